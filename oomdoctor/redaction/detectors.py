"""Where the secrets are: each detector yields spans `(start, end, kind)` of the original text, in order.

Detectors read the text as it came and never each other's output, so their order does not
matter for what is found; where spans overlap, `redact` merges them and keeps the kind of the
detector listed first in `DETECTORS`. Every regex here starts at a literal or one character
class, with bounded quantifiers and nothing nested, and every detector reads each character a
bounded number of times: the work is linear in the text.
"""
from __future__ import annotations

import heapq
import itertools
import re
from functools import lru_cache
from typing import Iterable, Iterator

from .formats import catalog
from .keys import classify, looks_random
from .markers import holds_marker, is_marker

Span = tuple[int, int, str]


def merge(*streams: Iterable[Span]) -> Iterator[Span]:
    """Spans of several sorted streams in order; a lone stream as it is (most texts wake one detector)."""
    started = []
    for stream in streams:
        stream = iter(stream)
        first = next(stream, None)
        if first is not None:
            started.append(itertools.chain((first,), stream))
    if len(started) <= 1:
        return started[0] if started else iter(())
    return heapq.merge(*started)

# ------------------------------------------------------------------ private keys (PEM, OpenSSH, PGP)

_PEM_BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
# What a key holds between its BEGIN and END lines: base64, whitespace, and the same however
# escaped (`\n` in a JSON string, `\\n` twice escaped, `\u002b`, `&#43;`), header lines
# (`Proc-Type: 4,ENCRYPTED`), quotes and `+` of a string split over lines in code. Any other
# character in between means the END line is not this key's.
_NOT_PEM = re.compile(r"[^A-Za-z0-9+/=\s\\\"',:.;&#_-]")
# A key cut off before its END line: base64 lines and line breaks, real or escaped.
_PEM_LINE = re.compile(r"(?:\r?\n|\\r\\n|\\n|\\\\n|[ \t]{1,8})(?P<b64>[A-Za-z0-9+/=]{1,100})")
_PEM_LIMIT = 65536


def private_keys(text: str) -> Iterator[Span]:
    if "PRIVATE KEY" not in text:
        return iter(())
    return merge(_pem_blocks(text), _pem_tails(text))


def _pem_blocks(text: str) -> Iterator[Span]:
    done = 0
    # The next END line and the next character no key holds, each searched once from where
    # the last search left off: many BEGIN lines cost one scan, not one scan each.
    end = bad = None  # None: not searched yet; False: none after the last search
    for begin in _PEM_BEGIN.finditer(text):
        if begin.start() < done:
            continue
        if end is not False and (end is None or end.start() < begin.end()):
            end = _PEM_END.search(text, begin.end()) or False
        if bad is not False and (bad is None or bad.start() < begin.end()):
            bad = _NOT_PEM.search(text, begin.end()) or False
        within = end and end.start() - begin.end() <= _PEM_LIMIT and (bad is False or bad.start() >= end.start())
        if within:
            stop = end.end()
        else:
            stop = begin.end()
            # Base64 lines of a full-width body, then the shorter last one: nothing after it is the key's.
            while stop - begin.end() < _PEM_LIMIT:
                line = _PEM_LINE.match(text, stop)
                if line is None:
                    break
                stop = line.end()
                if len(line.group("b64")) < 60:
                    break
        done = stop
        yield begin.start(), stop, "private_key"


def _pem_tails(text: str) -> Iterator[Span]:
    """An END line whose BEGIN was not pasted: the base64 lines right before it."""
    done = 0
    for end in _PEM_END.finditer(text):
        if end.start() < done:
            continue
        start = end.start()
        floor = max(done, start - _PEM_LIMIT)
        body = _PEM_BODY_BACK.match(text[floor:start][::-1])
        start -= body.end() if body else 0
        while start < end.start() and text[start] in " \t\r\n":
            start += 1
        done = end.end()
        if end.start() - start >= 16 and "BEGIN" not in text[start:end.start()]:
            yield start, end.end(), "private_key"


_PEM_BODY_BACK = re.compile(r"[A-Za-z0-9+/=\s\\]{0,65536}")


# ------------------------------------------------------------------ provider tokens


def provider_tokens(text: str) -> Iterator[Span]:
    return merge(*(_format_tokens(text, fmt) for fmt in catalog().formats if fmt.prefix in text))


def _format_tokens(text: str, fmt) -> Iterator[Span]:
    for start, end in fmt.find(text):
        yield start, end, fmt.kind


# ------------------------------------------------------------------ logins on the command line and in code

# `wandb login KEY`, `wandb login --relogin KEY`; the key is 40 hex digits (or longer for
# local servers), like a git commit id: only this context tells them apart.
_WANDB_LOGIN = re.compile(r"login(?:[ \t]{1,4}--?[a-z-]{1,20}){0,3}[ \t]{1,4}([0-9a-f]{40}|[A-Za-z0-9_-]{40,86})(?![A-Za-z0-9_<-])")
# `wandb.login("KEY")`, `wandb.login(key='KEY', relogin=True)`.
_WANDB_CALL = re.compile(r"wandb\.login\([ \t]{0,4}(?:key[ \t]{0,2}=[ \t]{0,2})?[\"']([^\"'\s]{8,128})[\"']")
# `docker login -u me -p PASS`, `podman login --password PASS`.
_LOGIN_PASSWORD = re.compile(r"login(?:[ \t]{1,4}[^\s]{1,128}){0,4}?[ \t]{1,4}(?:-p|--password)(?:[ \t]{1,4}|=)([^\s\"']{1,256})")
# `curl -u user:pass`, `--user 'user:pass'`.
_CURL_USER = re.compile(r"(?<![^\s])(?:-u|--user)(?:[ \t]{1,4}|=)[\"']?[^\s:\"']{1,128}:([^\s\"']{1,256})")


def logins(text: str) -> Iterator[Span]:
    found = []
    if "login" in text:
        found.append(_wandb_logins(text))
        found.append(_found(text, _LOGIN_PASSWORD, 1, "password"))
    if "wandb.login(" in text:
        found.append(_found(text, _WANDB_CALL, 1, "wandb_key"))
    if "-u" in text:
        found.append(_found(text, _CURL_USER, 1, "password"))
    return merge(*found)


def _wandb_logins(text: str) -> Iterator[Span]:
    for match in _WANDB_LOGIN.finditer(text):
        if text[max(0, match.start() - 6):match.start()].lower().endswith("wandb "):
            yield match.start(1), match.end(1), "wandb_key"


def _found(text: str, regex: re.Pattern, group: int, kind: str) -> Iterator[Span]:
    """The group of each match, unless it is a placeholder (`$PASS`, `{pw}`) or already a marker."""
    for match in regex.finditer(text):
        value = match.group(group)
        if value[0] not in _PLACEHOLDER_STARTS and not is_marker(value):
            yield match.start(group), match.end(group), kind


# ------------------------------------------------------------------ .netrc

# `machine api.wandb.ai login user password KEY`, or `password KEY` on a line of its own.
_NETRC = re.compile(r"password[ \t]{1,4}([^\s]{1,256})")
_NETRC_LOGIN = re.compile(r"login[ \t]{1,4}[^\s<>]{1,128}[ \t]{1,4}\Z")
_NETRC_ENTRY = re.compile(r"(?:machine|login)[ \t]{1,4}[^\s]{1,128}[ \t]{0,4}\n[ \t]{0,16}(?:login[ \t]{1,4}[^\s]{1,128}[ \t]{0,4}\n)?\Z")


def netrc(text: str) -> Iterator[Span]:
    if "password" not in text:
        return
    for match in _NETRC.finditer(text):
        value = match.group(1)
        if is_marker(value) or value.lower() in _HARMLESS or value[0] in _PLACEHOLDER_STARTS:
            continue
        start = match.start()
        line_start = text.rfind("\n", max(0, start - 340), start) + 1
        if line_start == 0 and start > 340:
            continue  # a longer line than a .netrc has
        before = text[line_start:start]
        if "login" in before and _NETRC_LOGIN.search(before):
            yield match.start(1), match.end(1), "password"
        elif not before.strip(" \t") and _NETRC_ENTRY.search(text, max(0, line_start - 300), line_start):
            # On a line of its own, under the `machine …` or `login …` lines of the same entry.
            yield match.start(1), match.end(1), "password"


# ------------------------------------------------------------------ assignments: a credential's name, then its value

# Found from the word that makes a name a credential's, so that ordinary `key=value` text
# costs one scan and nothing per pair; the rest of the name is read backwards from there.
_STEM = r"(?i:pass|pwd|secret|token|key|auth|cred|sig)|密码|口令|密钥|令牌"
# Read on the text in lower case (same length, same positions): a case-sensitive alternation
# of words is scanned several times faster than a case-insensitive one.
_STEM_LOWER = r"pass|pwd|secret|token|key|auth|cred|sig|密码|口令|密钥|令牌"
_ASSIGNMENT = re.compile(
    r"(?:" + _STEM_LOWER + r")[a-z0-9_.\-]{0,32}"
    r"(?P<close>\\{0,2}[\"'`]|>)?\]?"
    r"(?P<sep>(?<=>)"  # `<password>value</password>`
    r"|[ \t]{0,4}(?::=|=>|=|:(?!//)|：|,(?=[ \t]{0,4}\\{0,2}[\"']))[ \t]{0,4}"
    r"|[ \t]{1,4}value="
    r"|[ \t]{1,4}(?P<prose>is|was|是|为)[ \t]{1,4}"
    # `token abc…` with spaces only: a value that looks generated (checked in Python).
    r"|[ \t]{1,4}(?=[A-Za-z0-9+/=_.~%-]{16}))"
)
# `--hub_token abc`, `-password abc`: a flag's value after spaces, any value.
_FLAG = re.compile(r"-(?<![A-Za-z0-9_.\->]-)-?(?=[A-Za-z0-9_.\-]{0,40}?(?:" + _STEM + r"))"
                   r"(?P<key>[A-Za-z][A-Za-z0-9_.\-]{0,63})[ \t]{1,4}(?=[^\s-])")
# `ENV HF_TOKEN abc` in a Dockerfile.
_ENV = re.compile(r"(?:ENV|ARG)[ \t]{1,4}(?=[A-Za-z0-9_.\-]{0,40}?(?:" + _STEM + r"))"
                  r"(?P<key>[A-Za-z][A-Za-z0-9_.\-]{0,63})[ \t]{1,4}(?=[^\s=])")
_KEY_BACK = re.compile(r"[a-z0-9_.\-]{0,48}")
_MARKER_NUMBER = re.compile(r":[0-9]{1,4}>")
_QUOTED = {
    '"': re.compile(r'"((?:[^"\\\n]|\\[^\n]){1,1024})"'),
    "'": re.compile(r"'((?:[^'\\\n]|\\[^\n]){1,1024})'"),
    "`": re.compile(r"`([^`\n]{1,1024})`"),
    '\\"': re.compile(r'\\"((?:[^"\\\n]|\\[^"\n]){1,1024})\\"'),
    "\\'": re.compile(r"\\'((?:[^'\\\n]|\\[^'\n]){1,1024})\\'"),
}
# A bare value runs to a space, a quote or a closing bracket; `<` and `>` are part of it, so a value
# with a marker inside (`abc<user>`) is read whole on a second pass as on the first.
_BARE = re.compile(r"[^\s\"'`,;)}\]]{1,512}")
_BARE_IN_URL = re.compile(r"[^\s\"'`,;)}\]&#]{1,512}")
_BARE_IN_XML = re.compile(r"[^<\n]{1,512}")
# `Authorization: Bearer …`, `token …`, `Basic …`: the scheme stays, the credential goes.
_SCHEME = re.compile(r"(?:Bearer|bearer|BEARER|Basic|basic|Token|token|Digest|Bot|ApiKey|Key|SSWS|OAuth|Negotiate|NTLM|"
                     r"AWS4-HMAC-SHA256|GoogleLogin|SharedKey|SharedAccessSignature)[ \t]{1,4}")

_HARMLESS = {"", "true", "false", "none", "null", "nil", "yes", "no", "on", "off", "0", "1", "xxx", "...", "…",
             "changeme", "required", "optional", "str", "string", "bool", "int", "secret", "password", "token",
             "undefined", "redacted", "hidden", "masked", "[redacted]", "(redacted)", "n/a", "na",
             "default", "auto", "empty", "unset", "your_token", "your_key", "your-api-key", "your_api_key"}
_HARMLESS_LONGEST = max(map(len, _HARMLESS))
# Values that name where the secret comes from rather than holding it: `$HF_TOKEN`, `${X}`,
# `%(pw)s`, `{token}`, `<your key>`, `os.environ[...]`, `args.token`.
_PLACEHOLDER_STARTS = frozenset("$%{<")
_CODE_PLACEHOLDERS = ("os.environ", "os.getenv", "getenv(", "env(", "process.env", "secrets.", "args.", "self.",
                      "config.", "cfg.", "opts.", "settings.", "ENV[")


def assignments(text: str) -> Iterator[Span]:
    return merge(_assignments(text), _spaced(text, _FLAG, flag=True), _spaced(text, _ENV, flag=False))


_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _assignments(text: str) -> Iterator[Span]:
    n = len(text)
    reverse = None
    lower = text.lower() if text.isascii() else text.translate(_LOWER)
    for match in _ASSIGNMENT.finditer(lower):
        stem = match.start()
        if reverse is None:
            reverse = lower[::-1]  # the key's start is read backwards from its stem, in C
        key_start = stem - (_KEY_BACK.match(reverse, n - stem).end() - (n - stem))
        close, sep, prose = match.group("close", "sep", "prose")
        sep_start = match.start("sep")
        key_end = match.start("close") if close else sep_start - (text[sep_start - 1] == "]")
        if key_start and text[key_start - 1] in ":#" and (
                key_start >= 10 and text.startswith("<redacted:", key_start - 10)
                or key_start >= 2 and text.startswith("<#", key_start - 2)) and _MARKER_NUMBER.match(text, key_end):
            continue  # a marker's own kind and number (`<redacted:openai_key:2>`)
        dashes = lower.rfind("---", key_start, key_end)
        if dashes >= 0:
            key_start = dashes + 3  # a name does not run on from a PEM line's dashes
        found = classify(text[key_start:key_end].lstrip("-"))
        if found is None:
            continue
        before = text[key_start - 1] if key_start else "\n"
        if close == ">" and before != "<":
            continue
        start = match.end()
        if start >= n:
            continue
        spaced = not sep.strip(" \t") and close != ">"
        prose = prose is not None
        span = _assigned(text, found, start, close or "", before, strong=found.strong and not (spaced and not prose),
                         prose=prose)
        if span is not None:
            yield span


def _spaced(text: str, regex: re.Pattern, flag: bool) -> Iterator[Span]:
    for match in regex.finditer(text):
        found = classify(match.group("key"))
        if found is None:
            continue
        if not flag and not _at_line_start(text, match.start()):
            continue
        span = _assigned(text, found, match.end(), "", " ", strong=found.strong)
        if span is not None:
            yield span


def _at_line_start(text: str, pos: int) -> bool:
    """Only spaces or tabs (at most two) between `pos` and the line's start."""
    i = pos
    while i > 0 and pos - i < 2 and text[i - 1] in " \t":
        i -= 1
    return i == 0 or text[i - 1] == "\n"


def _assigned(text: str, found, start: int, close: str, before: str, strong: bool, prose: bool = False):
    if found.kind == "authorization" and (scheme := _SCHEME.match(text, start)):
        start = scheme.end()
    value_start, value_end = _value(text, start, close, before)
    if value_end <= value_start:
        return None
    value = text[value_start:value_end]
    if found.kind == "authorization":
        scheme = _SCHEME.match(value)
        if scheme and scheme.end() < len(value):
            value_start += scheme.end()
            value = value[scheme.end():]
    if not secret_value(value, strong, prose):
        return None
    return value_start, value_end, kind_of(found)


def _value(text: str, start: int, close: str, before: str) -> tuple[int, int]:
    if start >= len(text):
        return start, start
    if close == ">":
        match = _BARE_IN_XML.match(text, start)
        return (start, match.end()) if match and text.startswith("</", match.end()) else (start, start)
    first = text[start]
    if first in "\"'`\\":
        for quote in ('\\"', "\\'", '"', "'", "`"):
            if text.startswith(quote, start):
                match = _QUOTED[quote].match(text, start)
                if match:
                    return match.start(1), match.end(1)
                start += len(quote)  # unterminated: the rest of the word
                break
    match = (_BARE_IN_URL if before in "?&" else _BARE).match(text, start)
    return (start, match.end()) if match else (start, start)


def secret_value(value: str, strong: bool, prose: bool = False) -> bool:
    """Whether the value of a credential's name is a secret, not a placeholder, a word or a marker.

    `strong`: the name alone says so (`password`); otherwise the value must look generated.
    """
    bare = value.strip()
    if not bare or bare[0] in _PLACEHOLDER_STARTS or bare.strip("*") == "":
        return False
    if "<" in bare and holds_marker(bare):
        return False  # holds a marker already: what was around it went with it
    if len(bare) <= _HARMLESS_LONGEST and bare.lower() in _HARMLESS:
        return False
    if ("." in bare or "(" in bare or "[" in bare) and (
            bare.startswith(_CODE_PLACEHOLDERS) or bare.endswith("()") or "(" in bare and not bare.endswith(")")):
        return False  # code that fetches the secret: `token=get_token()`, `args.token`
    if prose and bare.isalpha():
        return False  # "the password is incorrect"
    return strong or looks_random(bare, 16)


@lru_cache(maxsize=1024)
def kind_of(found) -> str:
    """A provider's kind where the name says whose it is (`WANDB_API_KEY`), else what the name says."""
    if found.kind in ("api_key", "key", "token", "secret"):
        words = catalog().key_words
        for word in found.words:
            if word in words:
                return words[word]
    return {"authorization": "token"}.get(found.kind, found.kind)


# ------------------------------------------------------------------ URLs

# scheme://user:password@host: the user name stays, the password goes.
# The password may hold `#` or `?`, which a URL should have encoded and people paste anyway.
_URL_PASSWORD = re.compile(r"://([^\s:/?#@<>\"']{0,128}):([^\s/@<>\"']{1,256})@")
# scheme://TOKEN@host: a user name that looks generated is a token (`https://x-oauth:…@`, Sentry DSNs).
_URL_USER = re.compile(r"://([^\s:/?#@<>\"']{16,256})@")


def urls(text: str) -> Iterator[Span]:
    if "://" not in text:
        return iter(())
    return merge(_found(text, _URL_PASSWORD, 2, "password"), _url_users(text))


def _url_users(text: str) -> Iterator[Span]:
    for match in _URL_USER.finditer(text):
        if looks_random(match.group(1), 16):
            yield match.start(1), match.end(1), "token"


# ------------------------------------------------------------------ bearer tokens anywhere

# An opaque token has a digit somewhere; `Bearer authentication` in prose does not.
_BEARER = re.compile(r"(?i:bearer|basic)[ \t]{1,4}([A-Za-z0-9._~+/=-]{16,4096})(?![A-Za-z0-9._~+/=-])")


def bearer_tokens(text: str) -> Iterator[Span]:
    if not any(n in text for n in ("earer", "EARER", "asic", "ASIC")):
        return
    for match in _BEARER.finditer(text):
        value = match.group(1)
        if any(c.isdigit() for c in value) and not is_marker(value):
            yield match.start(1), match.end(1), "token"


# ------------------------------------------------------------------ e-mail addresses

# Found from the `@`; the local part is read backwards.
_EMAIL_DOMAIN = re.compile(r"@[A-Za-z0-9][A-Za-z0-9-]{0,62}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}(?![A-Za-z0-9-])")
_LOCAL_BACK = re.compile(r"[A-Za-z0-9._%+-]{0,64}")
_LOCAL_EDGE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-")
# Local parts that are not people: `git@github.com:org/repo.git`.
_NOT_USERINFO = re.compile(r"[\s/@]")
_NOT_PEOPLE = {"git", "noreply", "no-reply", "root"}
# systemd unit names look like addresses: `user@1000.service`.
_NOT_DOMAINS = {"service", "slice", "scope", "socket", "target", "mount", "timer", "device", "path", "swap"}


def emails(text: str) -> Iterator[Span]:
    if "@" not in text:
        return
    n = len(text)
    reverse = None
    urls = "://" in text
    for match in _EMAIL_DOMAIN.finditer(text):
        at, end = match.span()
        if reverse is None:
            reverse = text[::-1]  # the local part is read backwards from the `@`, in C
        start = at - (_LOCAL_BACK.match(reverse, n - at).end() - (n - at))
        # It starts with a letter or digit, at a word's edge (not cut off 64 characters back).
        while start < at and text[start] in "._%+-":
            start += 1
        if start == at or start and text[start - 1] in _LOCAL_EDGE:
            continue
        if urls:
            userinfo = text.rfind("://", max(0, start - 256), start)
            if userinfo >= 0 and not _NOT_USERINFO.search(text, userinfo + 3, start):
                continue  # `https://user:token@host`: the URL detector's
        if at - start <= 9 and text[start:at].lower() in _NOT_PEOPLE or \
                text[text.rfind(".", at, end) + 1:end].lower() in _NOT_DOMAINS:
            continue
        yield start, end, "email"


# ------------------------------------------------------------------ user names in home folders

_HOME_NAME = r"([\w.-]{1,64})"
_HOME_END = r"(?=[/\\\s\"':,)\]]|$)"
_HOMES = (
    (("/home/",), re.compile(r"/home/" + _HOME_NAME + _HOME_END)),
    (("/Users/",), re.compile(r"/Users/" + _HOME_NAME + _HOME_END)),
    (("sers", "SERS"), re.compile(r"[\\/](?<=[A-Za-z]:[\\/])\\?(?i:users)(?:\\\\|\\|/)" + _HOME_NAME + _HOME_END)),
    (("Documents and Settings",), re.compile(r"[\\/](?<=[A-Za-z]:[\\/])\\?Documents and Settings(?:\\\\|\\|/)"
                                             + _HOME_NAME + _HOME_END)),
)


def home_folders(text: str) -> Iterator[Span]:
    return merge(*(_home_names(text, regex) for needles, regex in _HOMES if any(n in text for n in needles)))


def _home_names(text: str, regex: re.Pattern) -> Iterator[Span]:
    for match in regex.finditer(text):
        name = match.group(1)
        if name not in (".", ".."):
            yield match.start(1), match.end(1), "user"


# In priority order: where spans overlap, the first detector's kind names the merged span.
DETECTORS = (private_keys, provider_tokens, logins, netrc, assignments, urls, bearer_tokens, emails, home_folders)
