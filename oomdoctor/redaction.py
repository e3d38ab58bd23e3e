"""Secrets and personal details out of pasted text, before anything stores or echoes it.

A pasted log often carries an access token, a password in a URL, an e-mail
address or the user's name in a home directory. `redact` replaces each with a
marker that says what was there (``<redacted:hf_token>``, ``/home/<user>/``),
so the diagnosis still reads the log and the reply can say that it was done.

Every pattern starts with a literal or a one-character class and has only
bounded quantifiers, nothing nested, so each runs in time linear in the text.
Patterns are tried in order; a later one never matches an earlier one's marker.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

MARKER_PREFIX = "<redacted:"
USER_MARKER = "<user>"
# What `count_markers` counts: every marker `redact` writes.
MARKERS = re.compile(r"<redacted:[a-z_]{1,32}>|[/\\]<user>")

# Left edge of a token: not inside a longer word or token.
_EDGE = r"(?<![A-Za-z0-9_-])"
# Right edge: the token's alphabet does not go on.
_END = r"(?![A-Za-z0-9_-])"


def _marker(kind: str) -> str:
    return f"{MARKER_PREFIX}{kind}>"


@dataclass(frozen=True)
class Pattern:
    kind: str
    regex: re.Pattern
    # Builds the replacement from the match; the default replaces it all with the marker.
    replace: Callable[[re.Match], str] | None = None


def _keep_group(group: int, kind: str) -> Callable[[re.Match], str]:
    """Keep the text before `group` (a key, a scheme), replace the group with the marker."""
    def replace(match: re.Match) -> str:
        whole = match.group(0)
        cut = match.start(group) - match.start(0)
        return whole[:cut] + _marker(kind) + whole[match.end(group) - match.start(0):]
    return replace


# Key names whose value is a secret: the last word of the key decides.
_SECRET_WORDS = {"password", "passwd", "pwd", "passphrase", "secret", "apikey", "credentials"}
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"), ("auth", "key"),
                 ("account", "key"), ("wandb", "key"), ("openai", "key"), ("anthropic", "key"), ("hf", "key"),
                 ("webhook", "url")}
# "..._token" is a credential only after one of these; pad_token, eos_token and the like are tokenizer settings.
_TOKEN_OWNERS = {"access", "auth", "api", "hub", "hf", "huggingface", "face", "bearer", "refresh", "session",
                 "github", "gh", "gitlab", "slack", "bot", "app", "user", "wandb", "openai", "anthropic", "oauth",
                 "personal", "secret", "private", "id", "login", "write", "read", "csrf", "xsrf", "service",
                 "registry", "npm", "pypi", "docker", "cloudflare", "discord", "telegram", "modelscope"}
_HARMLESS_VALUES = {"", "true", "false", "none", "null", "yes", "no", "0", "1", "***", "xxx", "...", "changeme"}


def secret_key(key: str) -> bool:
    """Whether an assignment to `key` (``HF_TOKEN``, ``db.password``, ``--api-key``) holds a secret."""
    words = [w for w in re.split(r"[_.\-]", key.lower()) if w]
    if not words:
        return False
    last = words[-1]
    if last in _SECRET_WORDS or (len(words) >= 2 and (words[-2], last) in _SECRET_PAIRS):
        return True
    return last == "token" and (len(words) == 1 or words[-2] in _TOKEN_OWNERS)


# A key and what joins it to its value: `key=`, `key: `, `"key": `, `--flag=`, `--flag ` (flags only).
# Only the key is consumed, so a key that is someone else's value is still seen; the value is read after.
_KEY = r"[A-Za-z][A-Za-z0-9_.\-]{0,63}"
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.\-])(?:--?(?P<flag>" + _KEY + r")(?:[ \t]{0,4}[:=][ \t]{0,4}|[ \t]{1,4})"
    r"|[\"']?(?P<key>" + _KEY + r")[\"']?[ \t]{0,4}[:=][ \t]{0,4})(?=[^\s])"
)
_VALUE = re.compile(r""""[^"\n]{1,512}"|'[^'\n]{1,512}'|[^\s"',;)}\]]{1,512}""")
_PLACEHOLDERS = ("<", "${", "$", "%(", "{{", "os.environ", "os.getenv")


def _redact_assignments(text: str) -> tuple[str, int]:
    """Values of secret-named keys, replaced; linear: each value is read at most once."""
    out: list[str] = []
    pos = count = 0
    for match in _ASSIGNMENT.finditer(text):
        group = "flag" if match.group("flag") else "key"
        if match.start(group) < pos:
            continue  # inside a value already replaced (a quote before the key may be that value's)
        key = match.group(group)
        if not secret_key(key):
            continue
        start = match.end()
        if text.startswith(_PLACEHOLDERS, start) or text.startswith(_PLACEHOLDERS, start + 1):
            continue
        value = _VALUE.match(text, start)
        if value is None:
            continue
        bare = value.group(0).strip("\"'")
        if bare.lower() in _HARMLESS_VALUES or bare.startswith(_PLACEHOLDERS) or MARKERS.search(bare):
            continue  # not a secret, or one an earlier pattern already replaced
        quote = value.group(0)[0] if value.group(0)[0] in "\"'" else ""
        out.append(text[pos:start])
        out.append(f"{quote}{_marker('secret')}{quote}")
        pos = value.end()
        count += 1
    if not count:
        return text, 0
    out.append(text[pos:])
    return "".join(out), count


_HOME_NAME = r"([A-Za-z0-9._-]{1,64})"

PATTERNS: tuple[Pattern, ...] = (
    # Whole PEM blocks first: their body would otherwise look like other tokens.
    Pattern("private_key", re.compile(
        r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY( BLOCK)?-----"
        r"(?:[ \t]{0,4}\r?\n[A-Za-z0-9+/=:, \t-]{0,200}?(?=\r?\n|-----END)){0,400}"
        r"(?:\r?\n)?(?:-----END[A-Z0-9 ]{0,40} PRIVATE KEY( BLOCK)?-----)?")),
    Pattern("jwt", re.compile(_EDGE + r"eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{0,4096}" + _END)),
    Pattern("anthropic_key", re.compile(_EDGE + r"sk-ant-[A-Za-z0-9_-]{20,256}" + _END)),
    Pattern("openai_key", re.compile(_EDGE + r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,256}" + _END)),
    Pattern("hf_token", re.compile(_EDGE + r"hf_[A-Za-z0-9]{30,64}" + _END)),
    Pattern("github_token", re.compile(_EDGE + r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})" + _END)),
    Pattern("slack_token", re.compile(_EDGE + r"(?:xox[abposre]|xapp)-[A-Za-z0-9-]{10,250}" + _END)),
    Pattern("slack_webhook", re.compile(r"https?://hooks\.slack\.com/[A-Za-z0-9_/+-]{8,300}")),
    Pattern("aws_access_key", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA)[A-Z0-9]{16}(?![A-Z0-9])")),
    Pattern("google_api_key", re.compile(_EDGE + r"AIza[0-9A-Za-z_-]{35}" + _END)),
    # `wandb login KEY` (40 hex digits, like a git commit: only this context tells them apart).
    Pattern("wandb_key", re.compile(r"(?i:wandb)[ \t]{1,4}login(?:[ \t]{1,4}--[a-z-]{1,20}){0,3}[ \t]{1,4}([0-9a-f]{40}|[A-Za-z0-9_-]{40,86})"
                                    + _END), _keep_group(1, "wandb_key")),
    # `Authorization: Bearer ...` / `Basic ...`: an opaque token has a digit somewhere.
    Pattern("token", re.compile(r"(?i:\b(?:bearer|basic)[ \t]{1,4})(?=[A-Za-z._~+/=-]{0,1023}[0-9])([A-Za-z0-9._~+/=-]{16,1024})"
                                + r"(?![A-Za-z0-9._~+/=-])"), _keep_group(1, "token")),
    # scheme://user:password@host: the user name stays, the password goes.
    Pattern("url_password", re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/?#@<>]{0,128}:([^\s/?#@<>]{1,256})@"),
            _keep_group(1, "password")),
    Pattern("secret", _ASSIGNMENT),  # see _redact_assignments
    Pattern("email", re.compile(
        r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9][A-Za-z0-9-]{0,62}"
        r"(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}(?![A-Za-z0-9-])")),
    Pattern("home", re.compile(r"(/home/|/Users/)" + _HOME_NAME + r"(?=[/\s\"':,)\]]|$)"),
            lambda m: m.group(1) + USER_MARKER),
    Pattern("home", re.compile(r"\b([A-Za-z]:(?:\\\\|\\|/)(?:Users|Documents and Settings)(?:\\\\|\\|/))" + _HOME_NAME
                               + r"(?=[\\/\s\"':,)\]]|$)", re.IGNORECASE),
            lambda m: m.group(1) + USER_MARKER),
)

# Local parts that are not people: `git@github.com:org/repo.git`.
_NOT_PEOPLE = {"git", "noreply", "no-reply", "root"}
# systemd unit names look like addresses: `user@1000.service`.
_NOT_DOMAINS = ("service", "slice", "scope", "socket", "target", "mount", "timer", "device", "path", "swap")


@dataclass
class Redaction:
    text: str
    # kind -> how many were replaced
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def redact(text: str) -> Redaction:
    """The text with every secret and personal detail replaced by a marker, and what was replaced."""
    counts: dict[str, int] = {}
    for pattern in PATTERNS:
        if not _may_match(pattern, text):
            continue
        if pattern.regex is _ASSIGNMENT:
            text, found = _redact_assignments(text)
            if found:
                counts[pattern.kind] = counts.get(pattern.kind, 0) + found
            continue

        def replace(match: re.Match, pattern: Pattern = pattern) -> str:
            if pattern.kind == "email" and _not_an_address(match.group(0)):
                return match.group(0)
            new = pattern.replace(match) if pattern.replace else _marker(pattern.kind)
            if new != match.group(0):
                counts[pattern.kind] = counts.get(pattern.kind, 0) + 1
            return new

        text = pattern.regex.sub(replace, text)
    return Redaction(text, counts)


# Cheap literal pre-checks: most pasted logs hold none of these, and `in` is far faster than a regex scan.
_NEEDLES = {
    "private_key": ("PRIVATE KEY",), "jwt": ("eyJ",), "anthropic_key": ("sk-ant-",), "openai_key": ("sk-",),
    "hf_token": ("hf_",), "github_token": ("gh", "github_pat_"), "slack_token": ("xox", "xapp-"),
    "slack_webhook": ("hooks.slack.com",), "google_api_key": ("AIza",), "email": ("@",),
    "url_password": ("://",), "token": ("earer", "asic", "EARER", "ASIC"), "wandb_key": ("login",),
    "home": ("/home/", "Users", "users", "USERS", "Documents and Settings"),
}


def _not_an_address(found: str) -> bool:
    local, _, domain = found.partition("@")
    return local.lower() in _NOT_PEOPLE or domain.rsplit(".", 1)[-1].lower() in _NOT_DOMAINS


def _may_match(pattern: Pattern, text: str) -> bool:
    needles = _NEEDLES.get(pattern.kind)
    return needles is None or any(n in text for n in needles)


def count_markers(text: str) -> int:
    """How many redaction markers a text holds (what `redact` put there)."""
    if MARKER_PREFIX not in text and USER_MARKER not in text:
        return 0
    return sum(1 for _ in MARKERS.finditer(text))
