"""The REST API's routes: consultations with follow-up questions, and stateless diagnose/estimate.

Every reply's `text` is the plain-text rendering; `?format=markdown` makes it the compact chat
Markdown instead (render/markdown.py), for a bot that posts it as it is, at most `max_chars`
long (default 4,000).
"""
from __future__ import annotations

from flask import jsonify, request

from ...redaction import echo, redact_json
from ...render import markdown
from ...service import EstimateInputError, NotFound
from ...web import input as check
from ...web.context import service, store
from ...web.errors import BadInput
from . import CHANNEL, bp
from .openapi import document


def _message() -> tuple[str, str | None]:
    body = check.json_body(request)
    unknown = set(body) - {"message", "lang"}
    if unknown:
        named = ", ".join(sorted(echo(name) for name in unknown)[:8])
        raise BadInput(f"unknown field(s) {named}; expected 'message' and optional 'lang'")
    text = check.message_text(body.get("message"), check.message_limit("api"))
    return text, check.language(body.get("lang"))


FORMATS = ("text", "markdown")


def _markdown_limit() -> int | None:
    """`max_chars` when the query asks for format=markdown, None for plain text; read before any
    work is done, so that a bad query changes nothing (400)."""
    fmt = request.args.get("format", "text")
    if fmt not in FORMATS:
        raise BadInput(f"'format' must be one of {list(FORMATS)}")
    raw = request.args.get("max_chars")
    if fmt == "text":
        if raw is not None:
            raise BadInput("'max_chars' applies only to format=markdown")
        return None
    if raw is None:
        return markdown.DEFAULT_MAX_CHARS
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 6 and markdown.MIN_CHARS <= int(raw) <= markdown.MAX_CHARS):
        raise BadInput(f"'max_chars' must be a whole number from {markdown.MIN_CHARS} to {markdown.MAX_CHARS}")
    return int(raw)


def _in_format(reply: dict, limit: int | None, render=markdown.render) -> dict:
    return reply if limit is None else {**reply, "text": render(reply, service().kb, limit)}


@bp.get("/healthz")
def healthz():
    store().ping()
    return jsonify(status="ok")


@bp.get("/api/openapi.json")
def openapi():
    return jsonify(document())


@bp.post("/api/v1/consultations")
def create_consultation():
    limit = _markdown_limit()
    text, lang = _message()
    cid, reply = service().start(text, channel=CHANNEL, owner=request.headers.get("X-Owner", ""), lang=lang)
    return jsonify(id=cid, reply=_in_format(reply, limit)), 201


@bp.post("/api/v1/consultations/<cid>/messages")
def add_message(cid: str):
    limit = _markdown_limit()
    text, lang = _message()
    try:
        reply = service().reply(cid, text, lang, channel=CHANNEL)
    except NotFound:
        raise BadInput("no consultation with that id", 404) from None
    return jsonify(id=cid, reply=_in_format(reply, limit))


@bp.get("/api/v1/consultations/<cid>")
def get_consultation(cid: str):
    try:
        record = service().record(cid, channel=CHANNEL)
    except NotFound:
        raise BadInput("no consultation with that id", 404) from None
    return jsonify(
        id=record["id"], created=record["created"], updated=record["updated"], lang=record["lang"],
        turns=record["turns"], pending_question=record["state"].get("pending"),
        facts=record["state"].get("facts", []), unknown=record["state"].get("unknown", []),
        transcript=[{"seq": m["seq"], "message": m["text"], "reply": m["reply"]} for m in record["messages"]],
    )


@bp.delete("/api/v1/consultations/<cid>")
def delete_consultation(cid: str):
    if not service().delete(cid, channel=CHANNEL):
        raise BadInput("no consultation with that id", 404)
    return "", 204


@bp.post("/api/v1/diagnose")
def diagnose():
    limit = _markdown_limit()
    text, lang = _message()
    return jsonify(_in_format(service().diagnose(text, lang), limit))


@bp.post("/api/v1/estimate")
def estimate():
    limit = _markdown_limit()
    body = check.json_body(request)
    lang = check.language(body.pop("lang", None)) or "en"
    # A pasted config.json or a model name can carry a token like anything else, at any depth.
    body = redact_json(body)
    try:
        reply = service().estimate(body, lang)
    except EstimateInputError as exc:
        raise BadInput(str(exc)) from None
    return jsonify(_in_format(reply, limit, markdown.render_estimate))

