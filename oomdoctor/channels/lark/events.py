"""POST /lark/events: the URL verification, messages, and card button presses.

verify.py has already decrypted and checked the request. The URL verification is answered
here; a message or a button press goes to the official SDK's dispatcher, which parses it
into its typed event and calls the handlers below. Each event id is claimed once in the
store (`Store.first_delivery`), so an event Lark delivers again gets no second reply. Lark wants an
answer within 3 seconds: a message is acknowledged at once and its turn taken in a thread,
its card posted with the reply API; a button press is answered with a toast and its
question's card shown answered, and the next card follows the same way.
"""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Callable

from flask import Flask, current_app, g, jsonify, request

from ...web.context import store
from . import bp, cards, conversation, verify
from .replier import Replier

if TYPE_CHECKING:
    from lark_oapi.api.im.v1 import P2ImMessageReceiveV1
    from lark_oapi.event.callback.model.p2_card_action_trigger import (P2CardActionTrigger,
                                                                       P2CardActionTriggerResponse)

log = logging.getLogger(__name__)

MESSAGE = "im.message.receive_v1"
CARD_ACTION = "card.action.trigger"


_made = threading.Lock()


@bp.record_once
def _set_up(state) -> None:
    # Importing lark_oapi takes seconds: a service with Lark's settings pays it at start (gunicorn's master,
    # before the workers fork), not in an event's 3-second window; one without them never pays it.
    if state.app.config["LARK_ENCRYPT_KEY"] and state.app.config["LARK_VERIFICATION_TOKEN"]:
        _sdk(state.app)


def _sdk(app: Flask) -> dict[str, Any]:
    """The SDK's dispatcher and the replier, made once per app."""
    with _made:
        if "oomdoctor.lark.dispatcher" not in app.extensions:
            from lark_oapi import EventDispatcherHandler

            config = app.config
            app.extensions["oomdoctor.lark.replier"] = Replier(config["LARK_APP_ID"], config["LARK_APP_SECRET"],
                                                              config["LARK_DOMAIN"])
            app.extensions["oomdoctor.lark.dispatcher"] = (
                EventDispatcherHandler.builder(config["LARK_ENCRYPT_KEY"], config["LARK_VERIFICATION_TOKEN"])
                .register_p2_im_message_receive_v1(_on_message)
                .register_p2_card_action_trigger(_on_card_action)
                .build())
    return app.extensions


@bp.post("/events")
def events():
    event = g.lark_event
    kind = verify.event_type(event)
    if kind == verify.URL_VERIFICATION:
        challenge = event.get("challenge")
        return jsonify(challenge=challenge if isinstance(challenge, str) else "")
    if kind not in (MESSAGE, CARD_ACTION):
        return jsonify(msg="ignored")
    from lark_oapi.core.model import RawRequest

    raw = RawRequest()
    raw.uri = request.path
    raw.body = request.get_data(cache=True)
    raw.headers = dict(request.headers)
    handled = _sdk(current_app._get_current_object())["oomdoctor.lark.dispatcher"].do(raw)
    if handled.status_code != 200:
        # Checked already, so this is ours; a 200 keeps Lark from delivering it again to fail again.
        log.error("Lark event %s not handled (status %s)", kind, handled.status_code)
        return jsonify(msg="not handled")
    return current_app.response_class(handled.content, status=200, mimetype="application/json")


def _first_delivery(event_id: str | None) -> bool:
    if not event_id:
        return True
    return store().first_delivery("lark:" + event_id)


def _later(work: Callable[[], dict[str, Any]], message_id: str, key: str, lang: str) -> threading.Thread:
    """Run `work` in a thread with its own app context and reply to `message_id` with its card."""
    app = current_app._get_current_object()
    replier: Replier = _sdk(app)["oomdoctor.lark.replier"]

    def run() -> None:
        with app.app_context():
            try:
                card = work()
            except Exception:
                log.exception("Lark turn failed")
                card = cards.notice(app.extensions["oomdoctor.consultant"].kb, lang, "lark.failed")
        replier.reply(message_id, card, key)

    thread = threading.Thread(target=run, name="lark-turn", daemon=True)
    thread.start()
    return thread


def _on_message(data: P2ImMessageReceiveV1) -> None:
    event, header = data.event, data.header
    if event is None or event.message is None or event.sender is None or header is None:
        return
    message, sender = event.message, event.sender
    if sender.sender_type != "user" or sender.sender_id is None or not message.message_id:
        return  # another bot or an app: never answer one
    mentions = message.mentions or []
    if message.chat_type != "p2p" and not mentions:
        return  # in a group, only what @-mentions the bot (all it receives with im:message.group_at_msg)
    if not _first_delivery(header.event_id):
        return
    who = conversation.owner(header.tenant_key or sender.tenant_key or "", sender.sender_id.open_id or "")
    here = conversation.where(message.chat_id or "")
    default = current_app.config["LARK_DEFAULT_LANG"]
    text = conversation.text_of(message.message_type, message.content, [m.key or "" for m in mentions])
    kb = current_app.extensions["oomdoctor.consultant"].kb
    if text is None:
        work = lambda: cards.notice(kb, default, "lark.not_text")  # noqa: E731
    else:
        work = lambda: conversation.message(text, who, here)  # noqa: E731
    _later(work, message.message_id, header.event_id or message.message_id, default)


def _on_card_action(data: P2CardActionTrigger) -> P2CardActionTriggerResponse:
    event, header = data.event, data.header
    kb = current_app.extensions["oomdoctor.consultant"].kb
    default = current_app.config["LARK_DEFAULT_LANG"]
    value = (event.action.value if event and event.action else None) or {}
    operator, context = (event.operator if event else None), (event.context if event else None)
    if not isinstance(value, dict) or cards.ANSWER not in value or operator is None or context is None:
        return _toast("info", kb.text("lark.stale", default))
    if not _first_delivery(header.event_id if header else None):
        return _toast(None)
    who = conversation.owner((header.tenant_key if header else None) or operator.tenant_key or "",
                             operator.open_id or "")
    here = conversation.where(context.open_chat_id or "")
    cid = str(value[cards.ANSWER])
    why_not = conversation.unanswerable(value, who, here)
    lang = conversation.language_of(cid)
    if why_not is not None:
        return _toast("warning", kb.text(why_not, lang))
    shown = str(value.get("label") or value.get("v"))
    answered = cards.reply_card(conversation.asked(cid, here), kb, cid, answered=shown)
    _later(lambda: conversation.answer(value, here), context.open_message_id or "", header.event_id if header else "",
           lang)
    return _toast("success", kb.text("lark.answered", lang, answer=shown), card=answered)


def _toast(kind: str | None, text: str = "", card: dict[str, Any] | None = None) -> P2CardActionTriggerResponse:
    """What a button press answers: a toast (none without a kind), and the card that replaces the pressed one,
    if any."""
    from lark_oapi.event.callback.model.p2_card_action_trigger import P2CardActionTriggerResponse

    response: dict[str, Any] = {"toast": {"type": kind, "content": text}} if kind else {}
    if card is not None:
        response["card"] = {"type": "raw", "data": card}
    return P2CardActionTriggerResponse(response)
