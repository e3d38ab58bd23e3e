"""One pass of reasoning over the facts: the estimate, the rules' conclusions, the ranked diagnoses."""
from __future__ import annotations

from dataclasses import dataclass

from ..engine import Engine, Provenance, Result, WorkingMemory
from ..estimate import estimate_facts
from ..estimate.whatif import FIELDS as SETUP_FACTS
from ..knowledge import KnowledgeBase
from . import diagnosis
from .sizing import Estimation, estimate_from


@dataclass
class Evaluation:
    """Everything one pass of reasoning produced, for the report and for what-if."""

    memory: WorkingMemory
    estimation: Estimation | None
    result: Result
    diagnoses: list[diagnosis.Diagnosis]


def evaluate(memory: WorkingMemory, kb: KnowledgeBase, engine: Engine) -> Evaluation:
    values = {f.name: f.value for f in memory}
    estimation, result = _estimate_and_run(memory, values, engine)
    # A rule may derive a set-up fact the text did not state (evaluation failing in its concatenation means the
    # Trainer keeps the logits); the estimate is then redone with it, and the rules see the new figures.
    derived = {f.name: f.value for f in result.memory if f.source.kind == "rule"
               and f.name in SETUP_FACTS and values.get(f.name) != f.value}
    if derived:
        estimation, result = _estimate_and_run(memory, {**values, **derived}, engine)
    return Evaluation(result.memory, estimation, result, diagnosis.rank(result, kb))


def _estimate_and_run(memory: WorkingMemory, values: dict, engine: Engine) -> tuple[Estimation | None, Result]:
    memory = memory.copy()
    estimation = estimate_from(values)
    if estimation is not None:
        for name, value in estimate_facts(estimation.result).items():
            memory.assert_fact(name, value, Provenance("estimator", "estimate"))
    return estimation, engine.run(memory)
