"""`/oom …` at POST /slack/commands: help, new, lang, or text for the consultation.

A consultation belongs to one person in one channel: owner "team:user",
channel "slack:<channel id>". The language preference lives in the
consultation state's `lang` and is passed to every turn.
"""
from __future__ import annotations

from typing import Any

from flask import current_app, jsonify, request

from ...language import LANGUAGES
from ...render import blocks
from ...web import input as check
from ...web.context import service
from ...web.errors import BadInput
from . import bp, responder

CHANNEL_PREFIX = "slack:"


def where(channel_id: str) -> str:
    return CHANNEL_PREFIX + channel_id


def owner(team_id: str, user_id: str) -> str:
    return f"{team_id}:{user_id}"


def t(key: str, lang: str, **values: Any) -> str:
    return service().kb.text(key, lang, **values)


def say(key: str, lang: str, **values: Any) -> dict:
    """A short ephemeral message from texts.yaml (its mrkdwn kept, Slack's <, >, & escaped)."""
    return blocks.notice(blocks.escape(t(key, lang, **values)))


def take_turn(cid: str, here: str, text: str, note: str | None = None, request_id: str | None = None) -> dict:
    """One consultation turn in the stored language; the reply as a Slack message.

    With a request id (the outbox entry's) a turn that was stored already is not stored again."""
    consultations = service()
    reply = consultations.reply(cid, text, consultations.lang(cid), channel=here, request_id=request_id)
    return blocks.render(reply, consultations.kb, cid, note=note)


def start(here: str, who: str, text: str, lang: str | None, request_id: str | None = None) -> dict:
    """A new consultation and its first turn, as one unit; the reply as a Slack message."""
    consultations = service()
    cid, reply = consultations.start(text, channel=here, owner=who, lang=lang, request_id=request_id)
    return blocks.render(reply, consultations.kb, cid)


def _failed(args: dict) -> dict:
    return say("slack.failed", args["lang"])


@responder.job("slack:turn", failed=_failed)
def _turn_job(args: dict, request_id: str) -> dict:
    cid = args.get("cid")
    if cid is None:
        # A first message whose worker died after the consultation was made: another worker redoes the
        # job, and the consultation that holds this request's turn is the owner's latest here.
        latest = service().find(args["who"], args["here"])
        if latest is not None and service().answered(latest, request_id):
            cid = latest
    if cid is None:
        return start(args["here"], args["who"], args["text"], args.get("carried"), request_id=request_id)
    return take_turn(cid, args["here"], args["text"], request_id=request_id)


@bp.post("/commands")
def command():
    form = request.form
    who, here = owner(form.get("team_id", ""), form.get("user_id", "")), where(form.get("channel_id", ""))
    text = blocks.unescape(form.get("text", "")).strip()
    words = text.split(maxsplit=1)
    first = words[0].lower() if words else ""
    rest = words[1] if len(words) > 1 else ""
    consultations = service()
    cid = consultations.find(who, here)
    lang = consultations.lang(cid) or current_app.config["DEFAULT_LANG"]

    if first in ("", "help") and not rest:
        return jsonify(blocks.notice(blocks.escape(t("slack.help", lang))))
    if first == "lang" and len(text.split()) <= 2:
        choice = rest.strip().lower()
        if choice not in LANGUAGES:
            return jsonify(say("slack.lang_usage", lang))
        if cid is None:
            consultations.open(channel=here, owner=who, lang=choice)
        else:
            consultations.set_lang(cid, choice, said=text, channel=here)
        return jsonify(say("slack.lang_set", choice))
    if first == "new":
        if not rest.strip():
            consultations.open(channel=here, owner=who, lang=consultations.lang(cid))
            return jsonify(say("slack.new", lang))
        # The new consultation is made with its first turn (the language carried over).
        cid, text, carried = None, rest, consultations.lang(cid)
    else:
        carried = None

    try:
        message = check.message_text(text, check.message_limit("slack"))
    except BadInput as exc:
        if exc.status == 413:
            return jsonify(say("error.too_large", lang, size=len(text.encode("utf-8")),
                               limit=check.message_limit("slack")))
        return jsonify(say("error.binary", lang))
    args = {"cid": cid, "here": here, "who": who, "text": message, "lang": lang, "carried": carried}
    return jsonify(responder.in_time("slack:turn", args, form.get("response_url", ""), ack=say("slack.working", lang)))
