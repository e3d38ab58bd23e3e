"""A reply as compact Markdown that one chat message holds, for any bot.

A report says what ran out, the most likely cause, the estimate against the card and the
top three remedies with their change; a question says what is known so far and asks, its
options numbered so that a reply of "2" picks the second (the consultation reads it so).
Only what every common chat Markdown understands is used: **bold**, *italics* (Lark's card
Markdown has no _underscore_ italics), numbered lists and fenced code.

The size bound is counted in UTF-16 code units, as Telegram counts its 4,096-unit limit for
a message's text (https://core.telegram.org/bots/api#sendmessage); 4,000 leaves room for a
bot's own prefix. A bot with a smaller limit passes its own: Discord takes 2,000 characters
in a message's content (https://discord.com/developers/docs/resources/message#create-message).
A change is cut after CHANGE_LINES lines (the JSON reply has it whole); when the report is
still longer, the least important parts go first (other causes, the breakdown, lower
remedies); what ran out, the cause and the question with its options always stay.
"""
from __future__ import annotations

from typing import Any

from ..conclusions.report import PARTS
from ..knowledge import KnowledgeBase
from ..templating import show
from .text import change_text

DEFAULT_MAX_CHARS = 4000
# Below this not even the cause and a question with its options fit.
MIN_CHARS = 600
MAX_CHARS = 40_000
TOP_REMEDIES = 3
# A change longer than this is cut in the compact report; the JSON reply has it whole.
CHANGE_LINES = 12
CHANGE_CHARS = 700

KEEP = 1000
IMPORTANCE = {"more_causes": 30, "breakdown": 40, "remedy_3": 42, "remedy_2": 44, "plans": 46, "why_asked": 50,
              "notices": 60, "estimate": 90, "remedy_1": 95}


def size(text: str) -> int:
    """The length a chat platform counts: UTF-16 code units (an emoji is two)."""
    return len(text.encode("utf-16-le")) // 2


def numbered(question: dict[str, Any]) -> bool:
    """Whether a question's options are shown numbered: not when the answer is itself a number or the
    question also asks a count, where a reply of "2" means two."""
    return (bool(question.get("options")) and question.get("answer_type") != "number"
            and not question.get("asks_count"))


def render(reply: dict[str, Any], kb: KnowledgeBase, max_chars: int = DEFAULT_MAX_CHARS,
           options: bool = True) -> str:
    """The reply as chat Markdown within `max_chars`; `options=False` leaves a question's options
    out (a channel that shows them as buttons)."""
    if reply.get("status") == "question" and reply.get("questions"):
        parts = _question(reply, kb, options)
    else:
        parts = _report(reply, kb)
    return _fit(parts, max_chars, kb.text("markdown.truncated", reply["lang"]))


def render_estimate(reply: dict[str, Any], kb: KnowledgeBase, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """A stateless estimate (named inputs, no diagnosis): the line against the card, the breakdown,
    and the three changes that bring it down most."""
    lang = reply["lang"]
    t = lambda key, **kw: kb.text(key, lang, **kw)  # noqa: E731
    est = reply["estimate"]
    parts: list[tuple[int, str]] = [(KEEP, f"**{t('report.estimate')}:** {estimate_line(est, kb, lang)}")]
    parts.append((IMPORTANCE["breakdown"], breakdown_line(est, kb, lang)))
    if est.get("remarks"):
        parts.append((IMPORTANCE["notices"], "\n".join(italic(remark) for remark in est["remarks"])))
    whatif = reply.get("whatif") or []
    if whatif:
        parts.append((IMPORTANCE["remedy_1"], f"**{t('markdown.whatif')}**"))
    for i, w in enumerate(whatif[:TOP_REMEDIES], 1):
        after = t("report.after", value=show(w["estimate_after_gib"]))
        if w.get("fits_after") is not None:
            after += f" ({t('report.fits') if w['fits_after'] else t('report.does_not_fit')})"
        parts.append((IMPORTANCE[f"remedy_{i}"], f"{i}. **{w['title']}** — {after}"))
    return _fit(parts, max_chars, t("markdown.truncated"))


def estimate_line(est: dict[str, Any], kb: KnowledgeBase, lang: str) -> str:
    """"per GPU: 30 GiB / GPU capacity: 24 GiB — does not fit", in the reply's language."""
    line = kb.text("report.per_gpu", lang, value=show(est["per_gpu_gib"]))
    if est.get("gpu_capacity_gib"):
        line += " / " + kb.text("report.capacity", lang, value=show(est["gpu_capacity_gib"]))
        if est.get("fits") is not None:
            line += " — " + kb.text("report.fits" if est["fits"] else "report.does_not_fit", lang)
    return line


def breakdown_line(est: dict[str, Any], kb: KnowledgeBase, lang: str) -> str:
    """The parts that hold memory, in GiB, then the host RAM."""
    parts = [f"{kb.text('part.' + part, lang)} {show(float(est['breakdown'].get(part) or 0.0))}"
             for part in PARTS if est["breakdown"].get(part)]
    host = kb.text("report.host_ram", lang, value=show(est["host_ram_gib"]))
    return (" · ".join(parts) + " GiB · " if parts else "") + host


def italic(text: str) -> str:
    return f"*{text}*"


def fenced(body: str) -> str:
    """A code block whose fence no line of the body can close early."""
    fence = "```"
    while fence in body:
        fence += "`"
    return f"{fence}\n{body}\n{fence}"


def _clip_change(snippet: str, lines: int = CHANGE_LINES, chars: int = CHANGE_CHARS) -> str:
    kept = snippet.splitlines()[:lines]
    body = "\n".join(kept)
    if len(body) > chars:
        body = body[: chars - 1].rstrip() + "…"
    elif len(kept) < len(snippet.splitlines()):
        body += "\n…"
    return body


def _labelled(kb: KnowledgeBase, lang: str, label: str, value: str) -> str:
    return kb.text("ui.labelled", lang, label=f"**{label}**", value=value)


def _notices(reply: dict[str, Any]) -> list[tuple[int, str]]:
    if not reply.get("notices"):
        return []
    return [(IMPORTANCE["notices"], "\n".join(italic(f"({notice})") for notice in reply["notices"]))]


def _question(reply: dict[str, Any], kb: KnowledgeBase, options: bool) -> list[tuple[int, str]]:
    lang = reply["lang"]
    t = lambda key, **kw: kb.text(key, lang, **kw)  # noqa: E731
    q = reply["questions"][0]
    parts = _notices(reply)
    if reply.get("diagnoses"):
        so_far = f"{t('kind.' + reply['oom_kind'])} — {reply['diagnoses'][0]['title']}"
        parts.append((KEEP, _labelled(kb, lang, t("report.kind"), so_far)))
    parts.append((KEEP, _labelled(kb, lang, t("report.question"), q["text"])))
    parts.append((IMPORTANCE["why_asked"], italic(t('ui.labelled', label=t('report.why'), value=q['why']))))
    if options and q.get("options"):
        if numbered(q):
            listed = "\n".join(f"{i}. {o['label']}" for i, o in enumerate(q["options"], 1))
        else:
            listed = t("ui.labelled", label=t("report.options"), value=" / ".join(o["label"] for o in q["options"]))
        parts.append((KEEP, listed))
    hint = t("markdown.reply_number") if options and numbered(q) else t("report.answer_hint")
    parts.append((KEEP, italic(hint)))
    return parts


def _report(reply: dict[str, Any], kb: KnowledgeBase) -> list[tuple[int, str]]:
    lang = reply["lang"]
    t = lambda key, **kw: kb.text(key, lang, **kw)  # noqa: E731
    parts = [(KEEP, f"**{t('report.title')}**")] + _notices(reply)
    parts.append((KEEP, _labelled(kb, lang, t("report.kind"), t("kind." + reply["oom_kind"]))))
    diagnoses = reply.get("diagnoses") or []
    if diagnoses:
        top = diagnoses[0]
        confidence = t("ui.confidence", value=f"{top['confidence'] * 100:.0f}")
        cause = _labelled(kb, lang, t("markdown.cause"), f"{top['title']} {confidence}")
        if top.get("why"):
            cause += "\n" + top["why"][0]
        parts.append((KEEP, cause))
        if len(diagnoses) > 1:
            others = " / ".join(d["title"] for d in diagnoses[1:3])
            parts.append((IMPORTANCE["more_causes"], italic(t('markdown.also', titles=others))))
    else:
        parts.append((KEEP, t("report.no_diagnosis")))

    est = reply.get("estimate")
    if est:
        parts.append((IMPORTANCE["estimate"], _labelled(kb, lang, t("report.estimate"), estimate_line(est, kb, lang))))
        parts.append((IMPORTANCE["breakdown"], breakdown_line(est, kb, lang)))
    elif reply.get("oom_kind") != "not_memory":
        parts.append((IMPORTANCE["estimate"], t("report.no_estimate")))

    remedies = reply.get("remedies") or []
    if remedies:
        parts.append((IMPORTANCE["remedy_1"], f"**{t('report.remedies')}**"))
    for i, r in enumerate(remedies[:TOP_REMEDIES], 1):
        head = f"{i}. **{r['title']}**"
        if r.get("estimate_after_gib") is not None:
            head += " — " + t("report.after", value=show(r["estimate_after_gib"]))
            if r.get("fits_after") is not None:
                head += f" ({t('report.fits') if r['fits_after'] else t('report.does_not_fit')})"
        snippet = change_text(r["change"])
        body = f"{head}\n{fenced(_clip_change(snippet))}" if snippet.strip() else head
        parts.append((IMPORTANCE[f"remedy_{i}"], body))
    for plan in (reply.get("plans") or [])[:1]:
        after = t("report.after", value=show(plan["estimate_after_gib"]))
        parts.append((IMPORTANCE["plans"], f"{t('ui.plans')}: {' + '.join(plan['titles'])} — {after}"))
    return parts


def _fit(parts: list[tuple[int, str]], max_chars: int, truncated: str) -> str:
    """Drop the least important parts (the later on a tie) until the text fits, then say so."""
    max_chars = max(MIN_CHARS, min(int(max_chars), MAX_CHARS))
    parts = [(importance, text) for importance, text in parts if text]
    note = italic(truncated)
    dropped = False

    def joined() -> str:
        return "\n\n".join(text for _, text in parts) + (f"\n\n{note}" if dropped else "")

    while size(joined()) > max_chars:
        optional = [(importance, -i) for i, (importance, _) in enumerate(parts) if importance < KEEP]
        if not optional:
            break
        del parts[-min(optional)[1]]
        dropped = True
    text = joined()
    if size(text) > max_chars:
        # Only what is always kept is left (a long question or title): cut it, the note last.
        room = max_chars - size(note) - 3
        head = "\n\n".join(t for _, t in parts)
        while size(head) > room:
            head = head[: max(len(head) - (size(head) - room), 0)]
        text = head.rstrip() + "…\n\n" + note
    return text
