"""From the engine's conclusions to ranked diagnoses with their reasons."""
from __future__ import annotations

from dataclasses import dataclass

from ..engine import Result
from ..engine.explain import trace
from ..knowledge import KnowledgeBase
from ..templating import fill


@dataclass(frozen=True)
class Diagnosis:
    scenario: str
    confidence: float
    rules: tuple[str, ...]


def combine(confidences: list[float]) -> float:
    """Independent pieces of evidence for one cause: noisy-OR, so two 0.5s give 0.75."""
    miss = 1.0
    for c in confidences:
        miss *= 1.0 - c
    return 1.0 - miss


def oom_kind(result: Result) -> str:
    return result.memory.value("oom_kind") or "unknown"


def rank(result: Result, kb: KnowledgeBase) -> list[Diagnosis]:
    by_scenario: dict[str, list] = {}
    for conclusion in result.of_kind("conclude"):
        by_scenario.setdefault(conclusion.target, []).append(conclusion)
    kind = oom_kind(result)
    ranked = []
    for scenario, conclusions in by_scenario.items():
        confidence = combine([c.weight for c in conclusions])
        # A cause of another kind of failure than the one observed is kept but demoted.
        if kind != "unknown" and kind not in kb.scenarios[scenario].oom_kinds:
            confidence *= 0.3
        ranked.append(Diagnosis(scenario, round(confidence, 3), tuple(c.firing.rule.id for c in conclusions)))
    ranked.sort(key=lambda d: (-d.confidence, d.scenario))
    return ranked


def reasons(diagnosis: Diagnosis, result: Result, lang: str, kb: KnowledgeBase) -> list[str]:
    def lookup(name: str):
        value = result.memory.value(name)
        spec = kb.facts.get(name)
        return (spec.label(value, lang) if spec else None) or value

    out = []
    for firing in result.firings:
        if firing.rule.id in diagnosis.rules and firing.rule.explain:
            line = fill(firing.rule.explain[lang], lookup)
            if line not in out:
                out.append(line)
    return out


def traces(diagnosis: Diagnosis, result: Result) -> list[dict]:
    return [trace(c.firing, result) for c in result.of_kind("conclude") if c.target == diagnosis.scenario]
