"""Fill `{fact.name}` placeholders in knowledge texts with values from working memory.

`{fact|fallback}` shows the fallback while the fact is unknown; `{fact*0.5|0.3}` shows the fact's value
scaled, for a change that is relative to what the user runs (half the current share, say), so that the
change shown and the what-if behind its estimate are the same number.
"""
from __future__ import annotations

import re
from typing import Any, Callable

_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_.]{0,60})(?:\*([0-9]{1,4}(?:\.[0-9]{1,4})?))?(?:\|([^{}]{0,80}))?\}")


def _value(match: re.Match, lookup: Callable[[str], Any]) -> Any:
    value = lookup(match.group(1))
    if match.group(2) is None or value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return round(value * float(match.group(2)), 4)


def show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value >= 100:
            return f"{value:.0f}"
        return f"{value:.2f}".rstrip("0").rstrip(".") if value >= 0.01 else f"{value:.3g}"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def fill(template: str, lookup: Callable[[str], Any]) -> str:
    """Replace each placeholder with its fact's value, its fallback, or leave it visible."""

    def one(match: re.Match) -> str:
        name = match.group(1)
        value = _value(match, lookup)
        if value is None:
            return match.group(3) if match.group(3) is not None else match.group(0)
        if name.endswith(("_share", "_ratio")) and isinstance(value, float):
            return f"{value:.0%}"
        return show(value)

    return _PLACEHOLDER.sub(one, template)


def fill_value(value: Any, lookup: Callable[[str], Any]) -> Any:
    """A template that is a lone placeholder becomes the raw value (an int stays an int)."""
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole:
            raw = _value(whole, lookup)
            return raw if raw is not None else (whole.group(3) or value)
        return fill(value, lookup)
    if isinstance(value, dict):
        return {k: fill_value(v, lookup) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_value(v, lookup) for v in value]
    return value
