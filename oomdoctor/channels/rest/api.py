"""The REST API's routes: consultations with follow-up questions, and stateless diagnose/estimate."""
from __future__ import annotations

from flask import jsonify, request

from ...redaction import redact
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
        raise BadInput(f"unknown field(s) {sorted(unknown)}; expected 'message' and optional 'lang'")
    text = check.message_text(body.get("message"), check.message_limit("api"))
    return text, check.language(body.get("lang"))


@bp.get("/healthz")
def healthz():
    store().conn.execute("SELECT 1").fetchone()
    return jsonify(status="ok")


@bp.get("/api/openapi.json")
def openapi():
    return jsonify(document())


@bp.post("/api/v1/consultations")
def create_consultation():
    text, lang = _message()
    cid, reply = service().start(text, channel=CHANNEL, owner=request.headers.get("X-Owner", ""), lang=lang)
    return jsonify(id=cid, reply=reply), 201


@bp.post("/api/v1/consultations/<cid>/messages")
def add_message(cid: str):
    text, lang = _message()
    try:
        reply = service().reply(cid, text, lang, channel=CHANNEL)
    except NotFound:
        raise BadInput("no consultation with that id", 404) from None
    return jsonify(id=cid, reply=reply)


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
    text, lang = _message()
    return jsonify(service().diagnose(text, lang))


@bp.post("/api/v1/estimate")
def estimate():
    body = check.json_body(request)
    lang = check.language(body.pop("lang", None)) or "en"
    # A pasted config.json or a model name can carry a token like anything else.
    body = {k: redact(v).text if isinstance(v, str) else v for k, v in body.items()}
    try:
        return jsonify(service().estimate(body, lang))
    except EstimateInputError as exc:
        raise BadInput(str(exc)) from None

