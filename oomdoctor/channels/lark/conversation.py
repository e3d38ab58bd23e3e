"""A Lark message or button press as a consultation turn, and the card that answers it.

A consultation belongs to one person in one chat: owner "<tenant>:<open_id>", channel
"lark:<chat_id>"; a direct chat and each group a person talks in keep their own. Commands:
"help"/"帮助", "new"/"新的" (optionally followed by text), "lang en"/"lang zh".

The reply's language: Chinese by default (LARK_DEFAULT_LANG), English once the user writes
English of their own. A pasted log is English whoever pastes it, so English counts only in a
message that reads as a sentence (a few lines at most, three or more words, no exception or
kernel-log line in it) and holds no Chinese; a message with Chinese is Chinese. Otherwise the
consultation keeps the language it has. Button answers never change it.
"""
from __future__ import annotations

import json
import re
from typing import Any

from flask import current_app

from ...language import LANGUAGES, detect
from ...service import NotFound
from ...web import input as check
from ...web.context import service
from ...web.errors import BadInput
from . import cards

CHANNEL_PREFIX = "lark:"
HELP = ("help", "帮助", "?", "？")
NEW = ("new", "新的", "重新开始")
# A message longer than this is a paste, not a sentence the user wrote.
SENTENCE_LINES = 3
SENTENCE_CHARS = 400
# What a program prints and a person does not write: an exception's "SomethingError:", a traceback,
# a dmesg timestamp, the OOM killer's line.
_MACHINE = re.compile(r"(?:Error|Exception)\s{0,2}:|Traceback \(most recent call last\)|File \"|"
                      r"\[\s{0,12}\d{1,9}\.\d{1,9}\]|Killed process")


def where(chat_id: str) -> str:
    return CHANNEL_PREFIX + chat_id


def owner(tenant_key: str, open_id: str) -> str:
    return f"{tenant_key}:{open_id}"


def written_language(text: str) -> str | None:
    """The language the user wrote in, when the message shows it; None for a paste or a bare answer."""
    found = detect(text)
    if found == "zh":
        return "zh"
    lines = [line for line in text.splitlines() if line.strip()]
    if (found == "en" and len(lines) <= SENTENCE_LINES and len(text) <= SENTENCE_CHARS
            and not _MACHINE.search(text)):
        words = [word for word in text.split() if word.isascii() and word.isalpha() and len(word) >= 2]
        if len(words) >= 3:
            return "en"
    return None


def text_of(message_type: str | None, content: str | None, mention_keys: list[str]) -> str | None:
    """What the user wrote, mentions (the "@_user_1" placeholders) removed; None for an image, a file…"""
    try:
        body = json.loads(content or "")
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    if message_type == "text":
        text = body.get("text")
    elif message_type == "post":
        text = _post_text(body)
    else:
        return None
    if not isinstance(text, str):
        return None
    for key in mention_keys:
        if key:
            text = text.replace(key, " ")
    return text.strip()


def _post_text(body: dict[str, Any]) -> str | None:
    """A rich-text post's text and code blocks, paragraph by paragraph."""
    if "content" not in body:  # {"zh_cn": {"title", "content"}} as some clients send it
        body = next((v for v in body.values() if isinstance(v, dict) and "content" in v), {})
    paragraphs = body.get("content")
    if not isinstance(paragraphs, list):
        return None
    lines = [body["title"]] if isinstance(body.get("title"), str) and body["title"] else []
    for paragraph in paragraphs:
        if not isinstance(paragraph, list):
            continue
        pieces = [element.get("text", "") for element in paragraph
                  if isinstance(element, dict) and element.get("tag") in ("text", "a", "code_block", "md")
                  and isinstance(element.get("text", ""), str)]
        lines.append("".join(pieces))
    return "\n".join(lines)


def message(text: str, who: str, here: str) -> dict[str, Any]:
    """The card that answers a message: a command's notice, or the consultation's next turn."""
    consultations = service()
    kb = consultations.kb
    cid = consultations.find(who, here)
    stored = consultations.lang(cid)
    default = current_app.config["LARK_DEFAULT_LANG"]
    lang = written_language(text) or stored or default
    words = text.split()
    first = words[0].lower() if words else ""
    if not words or text.strip().lower() in HELP:
        return cards.notice(kb, lang, "lark.help")
    if first == "lang" and len(words) <= 2:
        choice = words[1].lower() if len(words) == 2 else ""
        if choice not in LANGUAGES:
            return cards.notice(kb, lang, "lark.lang_usage")
        if cid is None:
            consultations.open(channel=here, owner=who, lang=choice)
        else:
            consultations.set_lang(cid, choice, said=text, channel=here)
        return cards.notice(kb, choice, "lark.lang_set")
    if first in NEW:
        text = text.split(maxsplit=1)[1] if len(words) > 1 else ""
        if not text:
            consultations.open(channel=here, owner=who, lang=stored)
            return cards.notice(kb, lang, "lark.new")
        # The new consultation is made with its first turn, so a turn that fails leaves none behind.
        cid = None
        lang = written_language(text) or stored or default
    try:
        said = check.message_text(text, check.message_limit("lark"))
    except BadInput as exc:
        if exc.status == 413:
            return cards.notice(kb, lang, "error.too_large", size=len(text.encode("utf-8")),
                                limit=check.message_limit("lark"))
        return cards.notice(kb, lang, "error.binary")
    if cid is None:
        cid, reply = consultations.start(said, channel=here, owner=who, lang=lang)
    else:
        reply = consultations.reply(cid, said, lang, channel=here)
    return cards.reply_card(reply, kb, cid)


def unanswerable(value: dict[str, Any], who: str, here: str) -> str | None:
    """Why a button press cannot answer (a text key), or None when it answers the pending question."""
    cid, question = str(value.get(cards.ANSWER, "")), str(value.get("q", ""))
    consultations = service()
    try:
        record = consultations.record(cid, channel=here)
    except NotFound:
        return "lark.stale"
    if record["owner"] != who:
        return "lark.not_yours"
    if consultations.find(who, here) != cid or record["state"].get("pending") != question:
        return "lark.stale"
    if not str(value.get("v", "")).strip():
        return "lark.stale"
    return None


def asked(cid: str, here: str) -> dict[str, Any]:
    """The reply that asked the pending question (its card is shown again, answered)."""
    return service().record(cid, channel=here)["messages"][-1]["reply"]


def answer(value: dict[str, Any], here: str) -> dict[str, Any]:
    """The consultation's next turn with the button's value; its card."""
    consultations = service()
    cid = str(value[cards.ANSWER])
    reply = consultations.reply(cid, str(value["v"]), consultations.lang(cid), channel=here)
    return cards.reply_card(reply, consultations.kb, cid)


def language_of(cid: str) -> str:
    """The consultation's language; the bot's default for one that is gone."""
    try:
        return service().lang(cid) or current_app.config["LARK_DEFAULT_LANG"]
    except NotFound:
        return current_app.config["LARK_DEFAULT_LANG"]
