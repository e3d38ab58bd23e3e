"""What a message must be before any extractor sees it: text, bounded, not empty, secrets removed.

Every channel (REST, the web page, Slack) passes its message through
`message_text`, so what is stored, echoed and logged is the redacted text.
"""
from __future__ import annotations

import io
import json
import re
from typing import Any

from flask import current_app, g, request
from werkzeug.exceptions import RequestEntityTooLarge

from ..language import LANGUAGES
from ..observation import time_budget
from ..redaction import redact
from .errors import BadInput

# Control characters no log holds (tab, newlines, form feed and ESC for colours are fine),
# and U+FFFD, what a decoder leaves for bytes that were not text.
_NOT_TEXT = re.compile("[\x01-\x08\x0e-\x1a\x1c-\x1f\x7f\ufffd]")
# More of those than this share of the characters, and the message is a binary file.
BINARY_SHARE = 0.01


def message_text(raw: Any, limit: int) -> str:
    """The message as it may be stored and shown: checked, then redacted."""
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
    odd = _NOT_TEXT.subn("", raw)[1] if _NOT_TEXT.search(raw) else 0
    if odd > max(16, len(raw) * BINARY_SHARE):
        raise BadInput("'message' looks like a binary file (control characters); paste text")
    return redact(raw).text


def language(raw: Any) -> str | None:
    if raw is None or raw == "":
        return None
    if raw not in LANGUAGES:
        raise BadInput(f"'lang' must be one of {list(LANGUAGES)}")
    return raw


# A JSON string, possessive so that an unterminated one costs one scan, not one per quote.
_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"?', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}")


def too_deep(data: bytes, limit: int) -> bool:
    """Whether JSON text nests arrays and objects deeper than `limit`, found without recursion.

    Strings are cut out, the brackets kept, and innermost pairs removed `limit` times:
    whatever is left was nested deeper (or does not balance, which is not JSON either).
    """
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    for _ in range(limit):
        if not brackets:
            return False
        brackets, removed = _INNERMOST.subn(b"", brackets)
        if not removed:
            return True
    return bool(brackets)


def json_body(request) -> dict:
    """The request's JSON object; a clear 4xx for anything else, never a parser's crash."""
    if not request.is_json:
        raise BadInput("send JSON with Content-Type: application/json", 415)
    data = request.get_data(cache=True)  # over MAX_CONTENT_LENGTH: 413, said by the error handler
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"the body is not UTF-8 text (byte {exc.start} is not valid UTF-8)") from None
    limit = _depth_limit()
    if too_deep(data, limit):
        raise BadInput(f"the JSON body nests deeper than {limit} levels")
    try:
        body = json.loads(text)
    except RecursionError:
        raise BadInput(f"the JSON body nests deeper than {limit} levels") from None
    except ValueError as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise BadInput(f"the body is not valid JSON{where}") from None
    if not isinstance(body, dict):
        raise BadInput("the body must be a JSON object")
    return body


def _depth_limit() -> int:
    return int(current_app.config.get("MAX_JSON_DEPTH", 32))


def message_limit(channel: str) -> int:
    """The largest message a channel takes: its own setting, never above the global one."""
    config = current_app.config
    return min(config["MAX_MESSAGE_BYTES"], config.get(f"{channel.upper()}_MAX_MESSAGE_BYTES", config["MAX_MESSAGE_BYTES"]))


def whole_body() -> None:
    """before_request: read a body sent without Content-Length (chunked) up front, bounded.

    Werkzeug stops reading such a body at MAX_CONTENT_LENGTH without saying so, and the
    parsers then saw a cut body ("not valid JSON", a form missing its end, a wrong
    signature). Read here, one byte past the limit is a 413; whatever parses the body
    later reads this copy.
    """
    if request.content_length is not None or request.method not in ("POST", "PUT", "PATCH", "DELETE"):
        return
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    stream = request.environ.get("wsgi.input")
    if stream is None:
        return
    data = stream.read(limit + 1) if request.environ.get("wsgi.input_terminated") else b""
    if len(data) > limit:
        raise RequestEntityTooLarge()
    g.body_size = len(data)
    request.environ["wsgi.input"] = io.BytesIO(data)
    request.environ["CONTENT_LENGTH"] = str(len(data))


def body_size() -> int | None:
    """The body's size in bytes, when it is known."""
    return request.content_length if request.content_length is not None else g.get("body_size")


def too_many_parts() -> bool:
    """Whether a 413 was a form of too many parts rather than a body over the limit."""
    size = body_size()
    return (request.mimetype == "multipart/form-data" and size is not None
            and size <= current_app.config["MAX_CONTENT_LENGTH"])


def start_clock() -> None:
    """before_request, the first hook: the request's work may take WORK_SECONDS from now; reading
    a message past that stops with observation.OutOfTime (answered 422)."""
    g.time_budget = time_budget(float(current_app.config.get("WORK_SECONDS") or 0))
    g.time_budget.__enter__()


def stop_clock(_exc: BaseException | None) -> None:
    budget = g.pop("time_budget", None)
    if budget is not None:
        budget.__exit__(None, None, None)
