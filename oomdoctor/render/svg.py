"""The memory breakdown as an inline SVG: stacked bars against a line at the GPU's capacity.

One bar for the estimate now and one per top remedy "after". Every segment has a
`<title>` (a tooltip and what a screen reader says), the whole chart a title and a
description that states the numbers in words. No script, no style attribute, so it
passes a strict Content-Security-Policy.
"""
from __future__ import annotations

from html import escape
from typing import Any

from ..knowledge import KnowledgeBase
from ..conclusions.report import PARTS

# Dark enough for 4.5:1 against white, distinct for the common colour-vision
# deficiencies (Okabe-Ito hues, darkened); segments are also separated by a white rule.
COLOURS = {
    "weights": "#0a4f8c",
    "gradients": "#a34d00",
    "optimizer": "#137048",
    "activations": "#a3306b",
    "logits": "#5a3f9e",
    "rollouts": "#7a5a00",
    "overhead": "#545b63",
}
CAPACITY_COLOUR = "#b00020"

WIDTH = 680
LEFT = 8
RIGHT = 70          # room for the total after the longest bar
TOTAL_LABEL_WIDTH = 72  # about "199.9 GiB" at 13px
BAR_HEIGHT = 22
LABEL_HEIGHT = 18
ROW_GAP = 12
TOP = 26            # room for the capacity label
LEGEND_COLUMNS = 2


def _total(breakdown: dict[str, float]) -> float:
    return sum(float(breakdown.get(part) or 0.0) for part in PARTS)


def _rows(reply: dict[str, Any], kb: KnowledgeBase, after: int) -> list[tuple[str, dict[str, float], float]]:
    lang = reply["lang"]
    est = reply["estimate"]
    rows = [(kb.text("ui.chart_now", lang), est["breakdown"], est["per_gpu_gib"] or _total(est["breakdown"]))]
    for remedy in reply.get("remedies") or []:
        if len(rows) > after:
            break
        if remedy.get("breakdown_after"):
            total = remedy.get("estimate_after_gib") or _total(remedy["breakdown_after"])
            rows.append((kb.text("ui.chart_after", lang, title=remedy["title"]), remedy["breakdown_after"], total))
    return rows


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".") if value < 1000 else f"{value:.0f}"


def breakdown(reply: dict[str, Any], kb: KnowledgeBase, after: int = 2, id_prefix: str = "mem") -> str:
    """The chart for a report, or "" when there is no estimate to draw."""
    est = reply.get("estimate")
    if not est or not est.get("breakdown"):
        return ""
    lang = reply["lang"]
    t = lambda key, **kw: kb.text(key, lang, **kw)  # noqa: E731
    rows = _rows(reply, kb, after)
    capacity = est.get("gpu_capacity_gib")
    largest = max([total for _, _, total in rows] + [_total(b) for _, b, _ in rows] + [capacity or 0.0])
    if largest <= 0:
        return ""
    scale = (WIDTH - LEFT - RIGHT) / (largest * 1.04)
    row_height = LABEL_HEIGHT + BAR_HEIGHT + ROW_GAP
    legend_top = TOP + row_height * len(rows) + 4
    legend_rows = (len(PARTS) + LEGEND_COLUMNS - 1) // LEGEND_COLUMNS
    height = legend_top + legend_rows * 22 + 6

    title_id, desc_id = f"{id_prefix}-title", f"{id_prefix}-desc"
    parts_words = ", ".join(f"{t('part.' + p)} {_fmt(float(est['breakdown'].get(p) or 0))} GiB" for p in PARTS)
    capacity_words = t("ui.chart_against", value=_fmt(capacity)) if capacity else ""
    desc = t("ui.chart_desc", total=_fmt(rows[0][2]), capacity=capacity_words, parts=parts_words)
    for label, _, total in rows[1:]:
        desc += " " + t("ui.chart_desc_after", label=label, total=_fmt(total))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {height}" '
           f'width="100%" role="img" aria-labelledby="{title_id} {desc_id}" lang="{escape(lang)}">',
           f'<title id="{title_id}">{escape(t("ui.chart_title"))}</title>',
           f'<desc id="{desc_id}">{escape(desc)}</desc>']
    for i, (label, parts, total) in enumerate(rows):
        y = TOP + i * row_height
        out.append(f'<g class="row"><text x="{LEFT}" y="{y + 13}" class="row-label">{escape(label)}</text>')
        x = float(LEFT)
        bar_y = y + LABEL_HEIGHT
        for part in PARTS:
            value = float(parts.get(part) or 0.0)
            if value <= 0:
                continue
            w = value * scale
            out.append(f'<rect x="{x:.1f}" y="{bar_y}" width="{max(w, 0.5):.1f}" height="{BAR_HEIGHT}" '
                       f'fill="{COLOURS[part]}" stroke="#ffffff" stroke-width="1">'
                       f'<title>{escape(t("part." + part))}: {_fmt(value)} GiB</title></rect>')
            x += w
        label_x = x + 6
        if capacity and x < LEFT + capacity * scale < x + TOTAL_LABEL_WIDTH:
            label_x = LEFT + capacity * scale + 6  # clear of the capacity line
        out.append(f'<text x="{label_x:.1f}" y="{bar_y + 16}" class="total">{_fmt(total)} GiB</text></g>')
    if capacity:
        cx = LEFT + capacity * scale
        anchor = "end" if cx > WIDTH * 0.6 else "start"
        tx = cx - 4 if anchor == "end" else cx + 4
        label = escape(t("ui.chart_capacity", value=_fmt(capacity)))
        out.append(f'<g class="capacity"><title>{label}</title>'
                   f'<text x="{tx:.1f}" y="{TOP - 8}" text-anchor="{anchor}" fill="{CAPACITY_COLOUR}" '
                   f'class="capacity-label">{label}</text>')
        # The line crosses the bars only, so it never runs through a row's label.
        for i in range(len(rows)):
            bar_y = TOP + i * row_height + LABEL_HEIGHT
            out.append(f'<line x1="{cx:.1f}" y1="{bar_y - 4}" x2="{cx:.1f}" y2="{bar_y + BAR_HEIGHT + 4}" '
                       f'stroke="{CAPACITY_COLOUR}" stroke-width="3"/>')
        out.append("</g>")
    out.append(f'<g class="legend" aria-hidden="true">')
    for i, part in enumerate(PARTS):
        lx = LEFT + (i % LEGEND_COLUMNS) * (WIDTH - LEFT) // LEGEND_COLUMNS
        ly = legend_top + (i // LEGEND_COLUMNS) * 22
        value = float(est["breakdown"].get(part) or 0.0)
        out.append(f'<rect x="{lx}" y="{ly}" width="14" height="14" fill="{COLOURS[part]}"/>'
                   f'<text x="{lx + 20}" y="{ly + 12}">{escape(t("part." + part))} {_fmt(value)} GiB</text>')
    out.append("</g></svg>")
    return "".join(out)
