"""What a message must be before any extractor sees it: text, bounded, not empty."""
from __future__ import annotations

from typing import Any

from ..language import LANGUAGES
from .errors import BadInput


def message_text(raw: Any, limit: int) -> str:
    if not isinstance(raw, str):
        raise BadInput("'message' must be a string")
    size = len(raw.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise BadInput(f"'message' is {size} bytes; the limit is {limit} bytes", 413)
    if "\x00" in raw:
        raise BadInput("'message' contains NUL bytes; paste text, not a binary file")
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput("'message' is not valid Unicode text") from None
    if not raw.strip():
        raise BadInput("'message' is empty: paste a traceback, a config or a sentence about your set-up")
    return raw


def language(raw: Any) -> str | None:
    if raw is None or raw == "":
        return None
    if raw not in LANGUAGES:
        raise BadInput(f"'lang' must be one of {list(LANGUAGES)}")
    return raw


def json_body(request) -> dict:
    if not request.is_json:
        raise BadInput("send JSON with Content-Type: application/json", 415)
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise BadInput("the body must be a JSON object")
    return body
