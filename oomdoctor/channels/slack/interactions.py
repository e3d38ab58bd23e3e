"""Buttons and menus at POST /slack/interactions: answer the pending question, or share a report.

Slack wants a 200 within 3 seconds and ignores its body for block_actions, so the
work runs in a thread and its message goes to the payload's response_url.
"""
from __future__ import annotations

import json
from typing import Any

from flask import current_app, request

from ...render import blocks
from ...service import NotFound
from ...web.context import service
from . import bp, responder
from .commands import owner, say, take_turn, where


def _payload() -> dict[str, Any] | None:
    try:
        payload = json.loads(request.form.get("payload", ""))
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


@bp.post("/interactions")
def interaction():
    payload = _payload()
    if payload is None or payload.get("type") != "block_actions" or not payload.get("actions"):
        return "", 200
    action = payload["actions"][0]
    user = (payload.get("user") or {}).get("id", "")
    team = (payload.get("team") or {}).get("id") or (payload.get("user") or {}).get("team_id", "")
    channel = (payload.get("channel") or {}).get("id", "")
    who, here = owner(team, user), where(channel)
    response_url = payload.get("response_url", "")
    lang = current_app.config["DEFAULT_LANG"]
    block_id = action.get("block_id", "")

    if action.get("action_id") == blocks.SHARE_ACTION:
        responder.later("slack:share", {"cid": action.get("value", ""), "who": who, "user": user, "lang": lang},
                        response_url)
    elif block_id.startswith(blocks.ANSWER_BLOCK):
        responder.later("slack:answer", {"ref": block_id[len(blocks.ANSWER_BLOCK):], "action": action, "who": who,
                                         "here": here, "lang": lang}, response_url)
    return "", 200


def _failed(args: dict) -> dict:
    return {"replace_original": False, **say("slack.failed", args["lang"])}


@responder.job("slack:share", failed=_failed)
def _share_job(args: dict, request_id: str) -> dict:
    return {"replace_original": False, **_share(args["cid"], args["who"], args["user"], args["lang"])}


@responder.job("slack:answer", failed=_failed)
def _answer_job(args: dict, request_id: str) -> dict:
    return {"replace_original": False,
            **_answer(args["ref"], args["action"], args["who"], args["here"], args["lang"], request_id)}


def _chosen(action: dict[str, Any]) -> tuple[str, str]:
    """(what the consultation reads, what the person saw) for a button or a menu."""
    if action.get("type") == "static_select":
        option = action.get("selected_option") or {}
        return option.get("value", ""), (option.get("text") or {}).get("text", "")
    return action.get("value", ""), (action.get("text") or {}).get("text", "")


def _answer(ref: str, action: dict[str, Any], who: str, here: str, default_lang: str,
            request_id: str | None = None) -> dict:
    cid, _, question = ref.partition(":")
    consultations = service()
    try:
        record = consultations.record(cid)
    except NotFound:
        return say("slack.stale", default_lang)
    lang = consultations.lang(cid) or default_lang
    if record["owner"] != who:
        return say("slack.not_yours", lang)
    # A retried answer whose turn is stored already is not stale: it is delivered again.
    if (consultations.find(who, here) != cid or record["state"].get("pending") != question) and \
            not consultations.answered(cid, request_id):
        return say("slack.stale", lang)
    value, shown = _chosen(action)
    if not value.strip():
        return say("slack.stale", lang)
    message = take_turn(cid, value, note=consultations.kb.text("slack.answered", lang, answer=shown or value),
                        request_id=request_id)
    return {**message, "replace_original": True}


def _share(cid: str, who: str, user: str, default_lang: str) -> dict:
    consultations = service()
    try:
        record = consultations.record(cid)
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
