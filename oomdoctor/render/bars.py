"""The memory breakdown as fixed-width text bars, for terminals, Slack code blocks and chat messages.

Columns line up by display width, not by characters: a CJK character takes two cells
in a monospace font, and labels are as long as their language makes them.
"""
from __future__ import annotations

import unicodedata
from typing import Any

from ..conclusions.report import PARTS
from ..knowledge import KnowledgeBase

BAR_WIDTH = 24


def width(text: str) -> int:
    """Cells the text takes in a monospace font: East Asian wide and full-width characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 0 if unicodedata.combining(ch) else 1
               for ch in text)


def pad(text: str, cells: int) -> str:
    return text + " " * max(0, cells - width(text))


def bar(value: float, capacity: float, cells: int = BAR_WIDTH) -> str:
    if capacity <= 0:
        return ""
    filled = max(0, min(cells, round(cells * value / capacity)))
    return "█" * filled + "·" * (cells - filled)


def table(estimate: dict[str, Any], kb: KnowledgeBase, lang: str, cells: int = BAR_WIDTH,
          verdict: bool = True) -> list[str]:
    """One line per part, the total, and the card's capacity as a marker on the same scale."""
    t = lambda key, **kw: kb.text(key, lang, **kw)  # noqa: E731
    capacity = estimate.get("gpu_capacity_gib")
    total = estimate["per_gpu_gib"] or sum(float(estimate["breakdown"].get(p) or 0) for p in PARTS)
    scale = max(capacity or 0.0, total)
    names = {p: t("part." + p) for p in (*PARTS, "total", "capacity")}
    label = max(width(n) for n in names.values())
    lines = []
    for part in PARTS:
        value = float(estimate["breakdown"].get(part) or 0.0)
        lines.append(f"{pad(names[part], label)} {value:>7.2f} GiB  {bar(value, scale, cells)}")
    lines.append(f"{pad(names['total'], label)} {total:>7.2f} GiB  {bar(total, scale, cells)}")
    if capacity:
        mark = max(round(cells * capacity / scale), 1)
        lines.append(f"{pad(names['capacity'], label)} {capacity:>7.2f} GiB  {'─' * (mark - 1)}┤")
        if verdict and estimate.get("fits") is not None:
            lines.append(f"{pad('', label)} {t('report.fits') if estimate['fits'] else t('report.does_not_fit')}")
    return lines
