"""A set-up's memory from the facts, and after each remedy: the bridge between facts and the estimator."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import estimate as estimator
from ..knowledge import KnowledgeBase, Remedy, fact_reference


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
        ref = fact_reference(value)
        if ref is None:
            after[name] = value
        elif values.get(ref) is not None:
            after[name] = values[ref]
    for name, factor in whatif.get("multiply", {}).items():
        current = after.get(name)
        if current is None:
            continue  # "half of an unknown batch" is not a number; the change says so instead
        scaled = current * factor
        after[name] = max(1, int(round(scaled))) if isinstance(current, int) else scaled
    for name, limit in whatif.get("cap", {}).items():
        current = after.get(name)
        after[name] = limit if current is None else min(current, limit)
    return after


def changes_anything(values: dict[str, Any], remedy: Remedy) -> bool:
    """Whether a remedy still applies: something it sets must change, and everything it
    shrinks or caps must shrink.

    Halving a batch of 1 only doubles accumulation, and gradient checkpointing that
    is already on changes nothing: neither is offered again.
    """
    if not remedy.whatif:
        return True
    after = apply_whatif(values, remedy.whatif)
    changed = lambda name: after.get(name) != values.get(name)  # noqa: E731
    sets = remedy.whatif.get("set", {})
    shrinks = set(remedy.whatif.get("cap", {}))
    shrinks |= {name for name, factor in remedy.whatif.get("multiply", {}).items() if factor < 1}
    # A share nobody stated or assumed (a vLLM's gpu_memory_utilization) is still lowered: the change names the value.
    return (not sets or any(changed(n) for n in sets)) and all(changed(n) or values.get(n) is None for n in shrinks)


def after_remedy(values: dict[str, Any], remedy: Remedy) -> Estimation | None:
    if not remedy.whatif:
        return None
    return estimate_from(apply_whatif(values, remedy.whatif))


def limits(estimation: Estimation) -> dict[str, Any]:
    """The inverse questions: the smallest single GPU that fits this set-up, and, on the
    user's GPU, the largest micro-batch and longest sequence that fit and the fewest GPUs."""
    from ..catalog import all_gpus

    setup = estimation.setup
    cards = sorted({(g.memory_gib, g.id) for g in all_gpus() if g.tier != "apple"})
    smallest = estimator.smallest_gpu(setup, [(gid, gib) for gib, gid in cards])
    out: dict[str, Any] = {"smallest_gpu": None}
    if smallest is not None:
        out["smallest_gpu"] = {"id": smallest[0], "memory_gib": round(smallest[1], 2)}
    if getattr(setup, "gpu_memory_gib", None):
        out["max_batch_size"] = estimator.max_batch_size(setup)
        out["max_seq_len"] = estimator.max_seq_len(setup)
        found = estimator.min_gpus(setup) if estimation.result.fits is False else None
        out["min_gpus"] = found[0] if found else None
    return out


def say_derivation(result: Any, kb: KnowledgeBase, lang: str) -> list[str]:
    """The estimate's derivation worded in ``lang`` (``derive.*`` texts, and the part and moment names)."""
    return [_say(line, kb, lang) for line in result.derivation]


def _say(line: Any, kb: KnowledgeBase, lang: str) -> str:
    values = {name: _worded(value, kb, lang) for name, value in line.params.items()}
    return kb.text(line.key, lang, **values)


def _worded(value: Any, kb: KnowledgeBase, lang: str) -> Any:
    if isinstance(value, estimator.Line):
        return _say(value, kb, lang)
    if isinstance(value, (list, tuple)):
        return kb.text("derive.join", lang).join(str(_worded(v, kb, lang)) for v in value)
    return value
