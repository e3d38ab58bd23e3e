"""Why a conclusion was drawn: the rules that fired and where their facts came from."""
from __future__ import annotations

from typing import Any

from .engine import Firing, Result


def trace(firing: Firing, result: Result, depth: int = 0, limit: int = 8) -> dict[str, Any]:
    """The firing as a tree: each fact a rule asserted is traced to the rule that did."""
    facts = []
    for fact in firing.facts:
        entry: dict[str, Any] = {"name": fact.name, "value": fact.value, "source": fact.source.as_dict()}
        if fact.source.kind == "rule" and depth < limit:
            parent = next((f for f in reversed(result.firings) if f.rule.id == fact.source.name), None)
            if parent is not None:
                entry["because"] = trace(parent, result, depth + 1, limit)
        facts.append(entry)
    return {"rule": firing.rule.id, "explain": firing.rule.explain, "facts": facts, "absent": list(firing.absent)}
