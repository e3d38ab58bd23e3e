"""The bridge between facts and the estimator: build a set-up, estimate, try remedies."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import estimate as estimator
from .knowledge import KnowledgeBase, Remedy


@dataclass
class Estimation:
    setup: Any
    result: Any
    assumptions: list  # estimator.Assumption


def estimate_from(values: dict[str, Any]) -> Estimation | None:
    setup, assumptions = estimator.setup_from_facts(values)
    if setup is None:
        return None
    return Estimation(setup, estimator.estimate(setup), assumptions)


def apply_whatif(values: dict[str, Any], whatif: dict[str, dict]) -> dict[str, Any]:
    """The fact values after a remedy: set replaces, multiply scales (integers stay ≥ 1), cap limits."""
    after = dict(values)
    for name, value in whatif.get("set", {}).items():
        after[name] = value
    for name, factor in whatif.get("multiply", {}).items():
        current = after.get(name)
        if current is None:
            current = 1
        scaled = current * factor
        after[name] = max(1, int(round(scaled))) if isinstance(current, int) else scaled
    for name, limit in whatif.get("cap", {}).items():
        current = after.get(name)
        after[name] = limit if current is None else min(current, limit)
    return after


def changes_anything(values: dict[str, Any], remedy: Remedy) -> bool:
    """A remedy whose what-if leaves every fact as it is was already applied."""
    if not remedy.whatif:
        return True
    after = apply_whatif(values, remedy.whatif)
    return any(after.get(k) != values.get(k) for k in set(after) | set(values))


def after_remedy(values: dict[str, Any], remedy: Remedy) -> Estimation | None:
    if not remedy.whatif:
        return None
    return estimate_from(apply_whatif(values, remedy.whatif))
