"""Buttons and menus at POST /slack/interactions: answer the pending question, or share a report.

Slack wants a 200 within 3 seconds and ignores its body for block_actions, so the work is
recorded in the outbox and done by a worker, and its message goes to the payload's
response_url (responder.py); another worker takes it over if this one dies.
"""
from __future__ import annotations

from typing import Any

from flask import current_app

from ...render import blocks
from ...service import NotFound
from ...web.context import service
from . import bp, payload, responder
from .commands import owner, say, take_turn, where


@bp.post("/interactions")
def interaction():
    found = payload.interaction()
    action = payload.first_action(found) if found is not None else None
    if found is None or found.get("type") != "block_actions" or action is None:
        return "", 200
    user = payload.text(found, "user", "id")
    team = payload.text(found, "team", "id") or payload.text(found, "user", "team_id")
    who, here = owner(team, user), where(payload.text(found, "channel", "id"))
    response_url = payload.text(found, "response_url")
    lang = current_app.config["DEFAULT_LANG"]
    block_id = payload.text(action, "block_id")

    if payload.text(action, "action_id") == blocks.SHARE_ACTION:
        responder.later("slack:share", {"cid": payload.text(action, "value"), "who": who, "here": here, "user": user,
                                        "lang": lang}, response_url)
    elif block_id.startswith(blocks.ANSWER_BLOCK):
        value, shown = _chosen(action)
        responder.later("slack:answer", {"ref": block_id[len(blocks.ANSWER_BLOCK):], "value": value, "shown": shown,
                                         "who": who, "here": here, "lang": lang}, response_url)
    return "", 200


def _failed(args: dict) -> dict:
    return {"replace_original": False, **say("slack.failed", args["lang"])}


@responder.job("slack:share", failed=_failed)
def _share_job(args: dict, request_id: str) -> dict:
    return {"replace_original": False, **_share(args["cid"], args["who"], args["here"], args["user"], args["lang"])}


@responder.job("slack:answer", failed=_failed)
def _answer_job(args: dict, request_id: str) -> dict:
    return {"replace_original": False, **_answer(args["ref"], args["value"], args["shown"], args["who"], args["here"],
                                                  args["lang"], request_id)}


def _chosen(action: dict[str, Any]) -> tuple[str, str]:
    """(what the consultation reads, what the person saw) for a button or a menu."""
    if payload.text(action, "type") == "static_select":
        return payload.text(action, "selected_option", "value"), payload.text(action, "selected_option", "text", "text")
    return payload.text(action, "value"), payload.text(action, "text", "text")


def _answer(ref: str, value: str, shown: str, who: str, here: str, default_lang: str,
            request_id: str | None = None) -> dict:
    cid, _, question = ref.partition(":")
    consultations = service()
    try:
        record = consultations.record(cid, channel=here)
    except NotFound:
        return say("slack.stale", default_lang)
    lang = consultations.lang(cid) or default_lang
    if record["owner"] != who:
        return say("slack.not_yours", lang)
    # A retried answer whose turn is stored already is not stale: it is delivered again.
    if (consultations.find(who, here) != cid or record["state"].get("pending") != question) and \
            not consultations.answered(cid, request_id):
        return say("slack.stale", lang)
    if not value.strip():
        return say("slack.stale", lang)
    message = take_turn(cid, here, value, note=consultations.kb.text("slack.answered", lang, answer=shown or value),
                        request_id=request_id)
    return {**message, "replace_original": True}


def _share(cid: str, who: str, here: str, user: str, default_lang: str) -> dict:
    consultations = service()
    try:
        record = consultations.record(cid, channel=here)
    except NotFound:
        return say("slack.nothing", default_lang)
    lang = consultations.lang(cid) or default_lang
    if record["owner"] != who:
        return say("slack.not_yours", lang)
    reports = [m["reply"] for m in record["messages"] if m["reply"].get("status") == "report"]
    if not reports:
        return say("slack.nothing", lang)
    message = blocks.render(reports[-1], consultations.kb, cid, shared_by=user)
    return {**message, "replace_original": False}
