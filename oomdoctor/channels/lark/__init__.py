"""Feishu/Lark: a bot that holds consultations in direct chats and when @-mentioned in groups.

Every request to /lark/ is decrypted and its signature and verification token checked
before anything reads it (verify.py); events.py hands the checked events to the official
SDK's dispatcher (lark-oapi) and claims each event id once in the store; conversation.py
turns a message or a button into a consultation turn; cards.py renders the reply as an
interactive card from the chat Markdown renderer; replier.py posts it with Lark's reply API.
"""
from __future__ import annotations

from flask import Blueprint

from . import verify

bp = Blueprint("lark", __name__, url_prefix="/lark")
bp.before_request(verify.signed_by_lark)

from . import events  # noqa: E402,F401  (adds its route to bp)
