"""REST API: consultations with follow-up questions, and stateless diagnose/estimate."""
from __future__ import annotations

from flask import Blueprint, current_app, jsonify, request

from ..consultation import State
from ..redaction import redact_json
from ..estimate_request import EstimateInputError, estimate_reply
from ..storage import NotFound
from . import consultant, input as check, store
from .errors import BadInput
from .openapi import document

bp = Blueprint("api", __name__)


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
    db = store()
    cid = db.create(State().to_dict(), owner=request.headers.get("X-Owner", ""), channel="api")
    reply = db.turn(cid, text, lambda raw: _step(raw, text, lang))
    return jsonify(id=cid, reply=reply), 201


@bp.post("/api/v1/consultations/<cid>/messages")
def add_message(cid: str):
    text, lang = _message()
    try:
        reply = store().turn(cid, text, lambda raw: _step(raw, text, lang))
    except NotFound:
        raise BadInput("no consultation with that id", 404) from None
    return jsonify(id=cid, reply=reply)


@bp.get("/api/v1/consultations/<cid>")
def get_consultation(cid: str):
    try:
        record = store().get(cid)
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
    if not store().delete(cid):
        raise BadInput("no consultation with that id", 404)
    return "", 204


@bp.post("/api/v1/diagnose")
def diagnose():
    text, lang = _message()
    return jsonify(consultant().diagnose(text, lang))


@bp.post("/api/v1/estimate")
def estimate():
    body = check.json_body(request)
    lang = check.language(body.pop("lang", None)) or "en"
    # A pasted config.json or a model name can carry a token like anything else, at any depth.
    body = redact_json(body)
    try:
        return jsonify(estimate_reply(body, lang))
    except EstimateInputError as exc:
        raise BadInput(str(exc)) from None


def _step(raw_state: dict, text: str, lang: str | None) -> tuple[dict, dict]:
    state, reply = consultant().take_turn(State.from_dict(raw_state), text, lang)
    return state.to_dict(), reply
