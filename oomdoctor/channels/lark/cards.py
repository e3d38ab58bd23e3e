"""A reply as a Lark interactive card (message card JSON 1.0), built on the chat Markdown renderer.

A question becomes the Markdown without its options and a button per option plus "skip"; a
report becomes the compact report. Lark's message API caps a card at 30 KB of JSON (a text
or post message at 150 KB): the Markdown is held to CARD_CHARS code units, at most 3 bytes
each in UTF-8, which leaves room for the buttons and the JSON around them.
"""
from __future__ import annotations

from typing import Any

from ...knowledge import KnowledgeBase
from ...render import markdown

CARD_CHARS = 6000
MAX_BUTTON_TEXT = 60
MAX_BUTTONS = 10
# What a button carries back: the consultation, the question it answers, the value, the label shown.
ANSWER = "answer"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plain(text: str) -> dict[str, str]:
    return {"tag": "plain_text", "content": text}


def card(title: str, body: str, elements: list[dict[str, Any]] | None = None, note: str | None = None,
         template: str = "blue") -> dict[str, Any]:
    content = [{"tag": "markdown", "content": body}, *(elements or [])]
    if note:
        content.append({"tag": "note", "elements": [_plain(note)]})
    return {"config": {"wide_screen_mode": True, "update_multi": True},
            "header": {"template": template, "title": _plain(title)}, "elements": content}


def notice(kb: KnowledgeBase, lang: str, key: str, **values: Any) -> dict[str, Any]:
    """A short card from texts.yaml (help, a setting changed, an error)."""
    return card("OOM Doctor", kb.text(key, lang, **values))


def skip_word(kb: KnowledgeBase, lang: str) -> str:
    """The word the consultation reads as "I don't know"."""
    return kb.texts["skip.words"][lang].split("|")[0]


def reply_card(reply: dict[str, Any], kb: KnowledgeBase, cid: str, answered: str | None = None) -> dict[str, Any]:
    """The reply as a card; `answered` (what the user picked) shows a question as answered, without buttons."""
    lang = reply["lang"]
    t = lambda key, **kw: kb.text(key, lang, **kw)  # noqa: E731
    if reply.get("status") == "question" and reply.get("questions"):
        question = reply["questions"][0]
        body = markdown.render(reply, kb, CARD_CHARS, options=False)
        if answered is not None:
            return card(t("report.question"), body, note=t("lark.answered", answer=answered), template="grey")
        buttons = [_button(f"{i}. {o['label']}" if markdown.numbered(question) else o["label"],
                           {ANSWER: cid, "q": question["id"], "v": str(o["value"]), "label": o["label"]})
                   for i, o in enumerate(question["options"][:MAX_BUTTONS], 1)]
        skip = t("ui.skip")
        buttons.append(_button(skip, {ANSWER: cid, "q": question["id"], "v": skip_word(kb, lang), "label": skip}))
        return card(t("report.question"), body, [{"tag": "action", "actions": buttons}], note=t("lark.answer_hint"),
                    template="orange")
    fits = (reply.get("estimate") or {}).get("fits")
    return card(t("report.title"), markdown.render(reply, kb, CARD_CHARS), note=t("lark.report_note"),
                template="red" if fits is False else "green" if fits else "blue")


def _button(text: str, value: dict[str, str]) -> dict[str, Any]:
    return {"tag": "button", "text": _plain(_clip(text, MAX_BUTTON_TEXT)), "type": "default", "value": value}
