"""A reply as a Slack Block Kit message, within Slack's limits.

A question becomes a section with buttons (or a menu when there are many
options); a report becomes a header, the diagnosis, the memory breakdown as text
bars, the top remedies with their exact change, and a "share" button. When the
message would break a limit, the least important parts go first (assumptions,
derivation, claims, lower remedies); the diagnosis is never dropped.
"""
from __future__ import annotations

from typing import Any

from ..knowledge import KnowledgeBase
from ..conclusions.report import PARTS
from ..templating import show
from . import bars
from .text import change_text

# https://api.slack.com/reference/block-kit/blocks and .../block-elements
MAX_BLOCKS = 50
MAX_SECTION = 3000
MAX_HEADER = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_FALLBACK = 3000
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_OPTION_TEXT = 75
MAX_OPTION_VALUE = 150
MAX_ACTION_ELEMENTS = 25
MAX_SELECT_OPTIONS = 100
MAX_BUTTONS = 5            # more options than this become a static_select

# Not a Slack limit: past this much text a chat message stops being read (Slack's own
# ceiling for a message is 40,000 characters); the web page has the rest.
MAX_CHARS = 12_000

MAX_REMEDIES = 5
MAX_DIAGNOSES = 3

# Which parts of a report go first when it is too big (lowest first).
KEEP_ALWAYS = 1000
IMPORTANCE = {"assumptions": 10, "derivation": 15, "claims": 20, "verify": 30, "remedy": 40, "plans": 50, "more_diagnoses": 55,
              "estimate": 80, "kind": 90, "actions": 95, "top_remedy": 96, "notices": 97}

ANSWER_BLOCK = "answer:"    # block_id prefix; "<consultation id>:<question id>" follows
SHARE_ACTION = "share"
SELECT_ACTION = "answer_select"
SKIP_ACTION = "answer_skip"


def escape(text: str) -> str:
    """Slack's three control characters in mrkdwn and plain text."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    """Text as the person typed it: Slack sends &, < and > escaped."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip_code(body: str, limit: int, before: str = "") -> str:
    """`before` and a ``` block that fit in `limit` characters, the fence still closed."""
    room = limit - len(before) - len("```\n\n```")
    if len(body) > room:
        body = body[: max(room - 1, 0)] + "…"
    return f"{before}```\n{body}\n```"


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, MAX_SECTION)}}


def context(*texts: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(t, MAX_SECTION)}
                                            for t in texts[:MAX_CONTEXT_ELEMENTS]]}


def plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": clip(text, limit), "emoji": True}


def skip_word(kb: KnowledgeBase, lang: str) -> str:
    """The word the consultation reads as "I don't know"."""
    return kb.texts["skip.words"][lang].split("|")[0]


def message(text: str, blocks: list[dict] | None = None, shared: bool = False) -> dict[str, Any]:
    return {"response_type": "in_channel" if shared else "ephemeral", "text": clip(text, MAX_FALLBACK),
            "blocks": blocks if blocks is not None else [section(escape(text))]}


def notice(text: str) -> dict[str, Any]:
    """A short message (help, an error, a setting changed); `text` may use mrkdwn."""
    return {"response_type": "ephemeral", "text": clip(text, MAX_FALLBACK), "blocks": [section(text)]}


def render(reply: dict[str, Any], kb: KnowledgeBase, cid: str, shared_by: str | None = None,
           note: str | None = None) -> dict[str, Any]:
    """The whole message: `shared_by` (a Slack user id) makes it an in-channel copy without buttons."""
    if reply["status"] == "question" and reply["questions"] and shared_by is None:
        groups = _question(reply, kb, cid)
    else:
        groups = _report(reply, kb, cid, shared_by)
    if note:
        groups.insert(0, (KEEP_ALWAYS, [context(escape(note))]))
    if reply.get("notices"):
        groups.insert(0, (IMPORTANCE["notices"], [context(*(escape(n) for n in reply["notices"]))]))
    blocks = _fit(groups, kb.text("slack.truncated", reply["lang"]))
    return message(reply.get("text") or "", blocks, shared=shared_by is not None)


def _chars(blocks: list[dict]) -> int:
    """The text a person reads in these blocks."""
    total = 0
    for block in blocks:
        if "text" in block:
            total += len(block["text"]["text"])
        for element in block.get("elements", ()):
            total += len(element.get("text", "")) if isinstance(element.get("text"), str) else 0
    return total


def _fit(groups: list[tuple[int, list[dict]]], truncated: str) -> list[dict]:
    """Drop the least important groups (the later one on a tie) until the blocks fit, then say so."""
    groups = list(groups)
    dropped = False
    while (sum(len(blocks) for _, blocks in groups) + dropped > MAX_BLOCKS
           or sum(_chars(blocks) for _, blocks in groups) > MAX_CHARS):
        candidates = [(importance, -i) for i, (importance, _) in enumerate(groups) if importance < KEEP_ALWAYS]
        if not candidates:
            break
        del groups[-min(candidates)[1]]
        dropped = True
    blocks = [block for _, group in groups for block in group]
    if dropped:
        blocks.append(context(escape(truncated)))
    return blocks[:MAX_BLOCKS]


def _question(reply: dict[str, Any], kb: KnowledgeBase, cid: str) -> list[tuple[int, list[dict]]]:
    lang = reply["lang"]
    t = lambda key, **kw: kb.text(key, lang, **kw)  # noqa: E731
    q = reply["questions"][0]
    groups: list[tuple[int, list[dict]]] = []
    if reply["diagnoses"]:
        top = reply["diagnoses"][0]
        groups.append((KEEP_ALWAYS, [context(escape(t("ui.so_far", title=top["title"])))]))
    groups.append((KEEP_ALWAYS, [section(f"*{escape(q['text'])}*\n_{escape(t('ui.labelled', label=t('report.why'), value=q['why']))}_")]))
    elements: list[dict[str, Any]] = []
    options = q["options"][:MAX_SELECT_OPTIONS]
    if 0 < len(options) <= MAX_BUTTONS:
        for i, option in enumerate(options):
            elements.append({"type": "button", "action_id": f"answer_{i}", "text": plain(option["label"], MAX_BUTTON_TEXT),
                             "value": clip(str(option["value"]), MAX_BUTTON_VALUE)})
    elif options:
        elements.append({"type": "static_select", "action_id": SELECT_ACTION,
                         "placeholder": plain(t("slack.choose"), MAX_OPTION_TEXT),
                         "options": [{"text": plain(o["label"], MAX_OPTION_TEXT),
                                      "value": clip(str(o["value"]), MAX_OPTION_VALUE)} for o in options]})
    elements.append({"type": "button", "action_id": SKIP_ACTION, "text": plain(t("ui.skip"), MAX_BUTTON_TEXT),
                     "value": skip_word(kb, lang)})
    groups.append((KEEP_ALWAYS, [{"type": "actions", "block_id": f"{ANSWER_BLOCK}{cid}:{q['id']}",
                                  "elements": elements[:MAX_ACTION_ELEMENTS]}]))
    groups.append((KEEP_ALWAYS, [context(escape(t("slack.answer_hint")))]))
    return groups


def memory_bars(estimate: dict[str, Any], kb: KnowledgeBase, lang: str) -> str:
    """The breakdown as fixed-width text bars, scaled so the GPU's capacity is visible."""
    return "\n".join(bars.table(estimate, kb, lang))


def limit_lines(estimate: dict[str, Any], kb: KnowledgeBase, lang: str) -> list[str]:
    """The inverse answers: the smallest GPU, the largest batch and sequence, the fewest GPUs that fit."""
    t = lambda key, **kw: kb.text(key, lang, **kw)  # noqa: E731
    lines = []
    gpu = estimate.get("smallest_gpu")
    if gpu:
        lines.append(t("report.smallest_gpu", value=f"{gpu['id']} ({show(gpu['memory_gib'])} GiB)"))
    if estimate.get("gpu_capacity_gib"):
        if estimate.get("max_batch_size"):
            lines.append(t("report.max_batch", value=estimate["max_batch_size"]))
        if estimate.get("max_seq_len"):
            lines.append(t("ui.max_seq_len", value=estimate["max_seq_len"]))
    if estimate.get("min_gpus"):
        lines.append(t("ui.min_gpus", value=estimate["min_gpus"]))
    return lines


def plan_lines(plans: list[dict[str, Any]], kb: KnowledgeBase, lang: str) -> list[str]:
    lines = []
    for plan in plans:
        batch = f" ({kb.text('ui.plan_batch', lang, batch=plan['batch_size'], accum=plan['grad_accum'])})" \
            if plan.get("batch_size") else ""
        after = kb.text("report.after", lang, value=show(plan["estimate_after_gib"]))
        lines.append(f"{' + '.join(plan['titles'])}{batch} — {after}")
    return lines


def _report(reply: dict[str, Any], kb: KnowledgeBase, cid: str, shared_by: str | None) -> list[tuple[int, list[dict]]]:
    lang = reply["lang"]
    t = lambda key, **kw: kb.text(key, lang, **kw)  # noqa: E731
    groups: list[tuple[int, list[dict]]] = []
    groups.append((KEEP_ALWAYS, [{"type": "header", "text": plain(t("report.title"), MAX_HEADER)}]))
    if shared_by:
        groups.append((KEEP_ALWAYS, [context(t("slack.shared_by", user=f"<@{escape(shared_by)}>"))]))
    kind = t("ui.labelled", label=f"*{t('report.kind')}*", value=t("kind." + reply["oom_kind"]))
    groups.append((IMPORTANCE["kind"], [section(escape(kind))]))

    diagnoses = reply["diagnoses"][:MAX_DIAGNOSES]
    if not diagnoses:
        groups.append((KEEP_ALWAYS, [section(escape(t("report.no_diagnosis")))]))
    for i, d in enumerate(diagnoses):
        head = escape(t("ui.labelled", label=f"*{t('report.diagnoses')}*", value="")) if i == 0 else ""
        why = "\n".join(f"• {escape(w)}" for w in d["why"])
        confidence = escape(t("ui.confidence", value=f"{d['confidence'] * 100:.0f}"))
        text = (f"{head}*{escape(d['title'])}* {confidence}\n"
                f"{escape(d['summary'])}" + (f"\n{why}" if why else ""))
        groups.append((KEEP_ALWAYS if i == 0 else IMPORTANCE["more_diagnoses"], [section(text)]))

    est = reply.get("estimate")
    if est:
        before = f"*{escape(t('report.estimate'))}*\n"
        after = "".join(f"\n• {escape(line)}" for line in est.get("remarks", []) + limit_lines(est, kb, lang))
        code = clip_code(escape(memory_bars(est, kb, lang)), MAX_SECTION - len(after), before)
        groups.append((IMPORTANCE["estimate"], [section(code + after)]))
        if est.get("derivation"):
            lines = "\n".join(f"• {escape(line)}" for line in est["derivation"])
            groups.append((IMPORTANCE["derivation"], [context(lines)]))
    else:
        groups.append((IMPORTANCE["estimate"], [section(escape(t("report.no_estimate")))]))

    remedies = reply.get("remedies") or []
    if remedies:
        groups.append((IMPORTANCE["top_remedy"], [section(f"*{escape(t('report.remedies'))}*")]))
    for i, r in enumerate(remedies[:MAX_REMEDIES], 1):
        after = ""
        if r.get("estimate_after_gib") is not None:
            after = " — " + escape(t("report.after", value=show(r["estimate_after_gib"])))
            if r.get("fits_after") is not None:
                after += f" ({escape(t('report.fits') if r['fits_after'] else t('report.does_not_fit'))})"
            if r.get("failed_moment_after"):
                after += "; " + escape(r["failed_moment_after"])
        head = (f"*{i}. {escape(r['title'])}*{after}\n{escape(r['effect'])}\n"
                f"_{escape(t('ui.labelled', label=t('report.cost'), value=t('ui.cost', **r['cost'])))}_\n")
        block = section(clip_code(escape(change_text(r["change"])), MAX_SECTION, head))
        # Lower remedies go first, the top one stays as long as anything optional does.
        importance = IMPORTANCE["top_remedy"] if i == 1 else IMPORTANCE["remedy"] - i
        groups.append((importance, [block]))

    if reply.get("plans"):
        lines = "\n".join(f"• {escape(line)}" for line in plan_lines(reply["plans"], kb, lang))
        groups.append((IMPORTANCE["plans"], [section(f"*{escape(t('ui.plans'))}*\n{lines}")]))
    if diagnoses:
        lines = "\n".join(f"• {escape(d['verify'])}" for d in diagnoses[:2])
        groups.append((IMPORTANCE["verify"], [section(f"*{escape(t('report.verify'))}*\n{lines}")]))
    if reply.get("claims"):
        lines = "\n".join(f"• “{escape(c['claim'])}” → {escape(c['truth'])}" for c in reply["claims"])
        groups.append((IMPORTANCE["claims"], [section(f"*{escape(t('report.claims'))}*\n{lines}")]))
    if reply.get("assumptions"):
        lines = "\n".join(f"• {escape(a['text'])}" for a in reply["assumptions"])
        groups.append((IMPORTANCE["assumptions"], [context(f"*{escape(t('report.assumptions'))}*\n{lines}")]))
    if not shared_by:
        groups.append((IMPORTANCE["actions"], [{"type": "actions", "block_id": f"share:{cid}", "elements": [
            {"type": "button", "action_id": SHARE_ACTION, "text": plain(t("slack.share"), MAX_BUTTON_TEXT),
             "value": cid}]}]))
    return groups
