"""What stands where a secret was, and what the reply says about it.

A marker names the kind and, from the second different value of a kind on, which value it
is (`<redacted:password:2>`), so the same token pasted twice is one secret and two different
passwords are two. A marker is never longer than what it replaces, so redaction never grows
a text: it takes the longest form that fits,

    <redacted:hf_token>   <#hf_token>   <#>   *        (a secret of 19+, 11+, 3+, 1+ characters;
    <redacted:password>   <#password>   <#pw>  <#>  *   a password also has a 5-character form)
    /home/<user>/         /home/<u>/    /home/#/       (a user name of 6+, 3+, 1+ characters)

and the notice is read back from the markers alone, since the text is all that is stored.
A secret of one or two characters becomes `*` or `**`, which the notice cannot see.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable

USER = "user"
GENERIC = "secret"
# Short names for the marker's short form, where the kind's own name would not fit.
ABBREVIATIONS = {"password": "pw"}
_EXPANSIONS = {abbr: kind for kind, abbr in ABBREVIATIONS.items()}

KIND = r"[a-z][a-z0-9_]{0,31}"
_MARKER = re.compile(
    r"<(?:redacted:|#)(?P<kind>" + KIND + r")?(?::(?P<n>[0-9]{1,4}))?>"
    r"|(?:home|Users|Documents and Settings)(?:/|\\{1,2})(?:<u(?:ser)?(?P<un>[0-9]{1,4})?>|#(?=[/\\\"':,)\]\s]|$))"
)


@lru_cache(maxsize=4096)
def marker(kind: str, n: int, room: int) -> str:
    """The longest marker for the `n`-th distinct value of `kind` that fits in `room` characters."""
    suffix = f":{n}" if n > 1 else ""
    forms = [f"<redacted:{kind}{suffix}>", f"<#{kind}{suffix}>"]
    if kind in ABBREVIATIONS:
        forms.append(f"<#{ABBREVIATIONS[kind]}{suffix}>")
    for form in (*forms, f"<#{suffix}>", "<#>"):
        if len(form) <= room:
            return form
    return "*" * room


@lru_cache(maxsize=1024)
def user_marker(n: int, room: int) -> str:
    """`<user>`, `<u>` or `#`: none of them a character a path or token is made of, so nothing
    that reads the redacted text sees a longer word where the name was."""
    suffix = str(n) if n > 1 else ""
    for form in (f"<user{suffix}>", "<user>", f"<u{suffix}>", "<u>"):
        if len(form) <= room:
            return form
    return "#"


def is_marker(value: str) -> bool:
    """A value that is already a marker or a mask: redacting it again changes nothing."""
    return (value.startswith(("<redacted:", "<#", "<user", "<u")) and value.endswith(">")) or value.strip("*") == ""


_HELD = re.compile(r"<(?:redacted:|#|u(?:ser)?[0-9]{0,4}>)")


def holds_marker(value: str) -> bool:
    return _HELD.search(value) is not None


def found(text: str) -> dict[str, int]:
    """Kind -> how many distinct values the markers in `text` stand for."""
    if "<" not in text and "#" not in text:
        return {}
    seen: dict[str, set[str]] = {}
    for match in _MARKER.finditer(text):
        if match.group(0).startswith("<"):
            kind, n = match.group("kind") or GENERIC, match.group("n") or "1"
            kind = _EXPANSIONS.get(kind, kind)
        else:
            kind, n = USER, match.group("un") or "1"
        seen.setdefault(kind, set()).add(n)
    return {kind: len(ns) for kind, ns in sorted(seen.items())}


def note(text: str) -> str | None:
    """The reply's note for a redacted message: `redacted:hf_token=1,user=1`, or None."""
    counts = found(text)
    if not counts:
        return None
    return "redacted:" + ",".join(f"{kind}={n}" for kind, n in counts.items())


def parse_note(payload: str) -> dict[str, int]:
    """`hf_token=1,user=1` -> {"hf_token": 1, "user": 1}; what it cannot read it leaves out."""
    out: dict[str, int] = {}
    for part in payload.split(","):
        kind, _, n = part.partition("=")
        if re.fullmatch(KIND, kind) and n.isdigit():
            out[kind] = int(n)
    return out


def describe(payload: str, lang: str, text: Callable[..., str], labels: dict[str, dict[str, str]]) -> list[str]:
    """The notice in the user's language: the kinds of secrets removed, then the user name, calmly.

    `text(key, lang, **values)` is the knowledge base's text lookup (knowledge/texts.yaml).
    """
    counts = parse_note(payload)
    out = []
    items = []
    for kind, n in counts.items():
        if kind == USER:
            continue
        label = labels.get(kind, labels[GENERIC])[lang]
        items.append(text("notice.redacted_item", lang, label=label) if n == 1
                     else text("notice.redacted_items", lang, label=label, count=n))
    if items:
        out.append(text("notice.redacted", lang, what=text("notice.redacted_sep", lang).join(items)))
    users = counts.get(USER, 0)
    if users == 1:
        out.append(text("notice.redacted_user", lang))
    elif users > 1:
        out.append(text("notice.redacted_users", lang, count=users))
    return out
