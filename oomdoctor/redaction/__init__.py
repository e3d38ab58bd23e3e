"""Secrets and personal details out of pasted text, before anything stores or echoes it.

A pasted log often carries an access token, a password in a URL or a config, a private key,
an e-mail address or the user's name in a home folder. `redact` finds them with detectors
(`detectors.py`: provider token shapes from `knowledge/secrets.yaml`, credential names in any
syntax, PEM blocks however escaped, URLs, logins, e-mail, home folders) and replaces each
with a marker that says what was there and is never longer than what it replaces
(`markers.py`), so the diagnosis still reads the log, the reply can say what was removed,
and the stored text is never larger than the text received.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

from . import detectors
from .formats import catalog
from .keys import classify, secret_key
from .markers import USER, describe as _describe, found, marker, note, user_marker

__all__ = ["Redaction", "redact", "redact_json", "echo", "found", "note", "describe", "secret_key"]

# Distinct values numbered per kind and message; past this many, further values share the last number.
MAX_NUMBERED = 1000


@dataclass
class Redaction:
    text: str
    # kind -> how many distinct values were replaced
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


# Where finds overlap, the more specific kind names the merged span.
_GENERIC_RANK = {"private_key": 0, "password": 2, "secret": 2, "api_key": 2, "key": 2, "token": 3, "signature": 3,
                 "email": 4, USER: 5}


def _rank(kind: str) -> int:
    return _GENERIC_RANK.get(kind, 1)  # a provider's token


def echo(value: Any, limit: int = 60) -> str:
    """A value from a request as an error message may quote it back: redacted, on one line, at most
    `limit` characters, quoted. An error reply is logged and shown, so it must not carry what
    the message itself would not keep (a token sent as a field name, say)."""
    text = " ".join(redact(str(value)[:4 * limit]).text.split())
    return repr(text if len(text) <= limit else text[:limit - 1] + "…")


def redact(text: str) -> Redaction:
    """The text with every secret and personal detail replaced by a marker, and what was replaced."""
    out = io.StringIO()
    write = out.write
    numbers: dict[str, dict[str, int]] = {}
    pos = 0                      # how far the text has been written out
    first = last = -1            # the span being gathered: overlapping finds are one secret
    kind = ""
    for start, end, found in detectors.merge(*(detector(text) for detector in detectors.DETECTORS)):
        if start < last:
            first, last = min(first, start), max(last, end)
            if _rank(found) < _rank(kind):
                kind = found
            continue
        if last >= 0:
            write(text[pos:first])
            write(_marker(text[first:last], kind, last - first, numbers))
            pos = last
        first, last, kind = max(start, pos), end, found
    if last >= 0:
        write(text[pos:first])
        write(_marker(text[first:last], kind, last - first, numbers))
        pos = last
    if not numbers:
        return Redaction(text, {})
    write(text[pos:])
    return Redaction(out.getvalue(), {k: len(seen) for k, seen in sorted(numbers.items())})


def _marker(value: str, kind: str, room: int, numbers: dict[str, dict[str, int]]) -> str:
    """The marker for one more value of `kind`: the same value keeps its number."""
    seen = numbers.get(kind)
    if seen is None:
        seen = numbers[kind] = {}
    n = seen.get(value)
    if n is None:
        n = min(len(seen) + 1, MAX_NUMBERED)
        if len(seen) < MAX_NUMBERED:
            seen[value] = n
    return user_marker(n, room) if kind == USER else marker(kind, n, room)


def redact_json(value: Any) -> Any:
    """A JSON value with every string redacted, keys included, at any depth.

    A string is redacted in its context: the value of a key that names a credential
    (`{"hub_token": "abc"}`, `["--hub_token", "abc"]`) is replaced whole, since on its own it
    looks like nothing. The caller bounds the depth (the API refuses bodies nested deeper than
    its limit before they are parsed).
    """
    if isinstance(value, str):
        return redact(value).text
    if isinstance(value, dict):
        return {redact(k).text if isinstance(k, str) else k: _under_key(k, v) for k, v in value.items()}
    if isinstance(value, list):
        out = []
        for i, item in enumerate(value):
            flag = value[i - 1] if i and isinstance(value[i - 1], str) and value[i - 1].startswith("-") else None
            out.append(_under_key(flag.lstrip("-"), item) if flag else redact_json(item))
        return out
    return value


def _under_key(key: Any, value: Any) -> Any:
    if isinstance(key, str) and isinstance(value, str):
        found_key = classify(key)
        if found_key is not None and detectors.secret_value(value, found_key.strong):
            return marker(detectors.kind_of(found_key), 1, len(value))
    return redact_json(value)


def describe(payload: str, lang: str, text) -> list[str]:
    """The reply's notice for a `redacted:` note, in the user's language (see markers.describe)."""
    return _describe(payload, lang, text, catalog().labels)
