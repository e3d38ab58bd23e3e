"""Remedies, ranked: the diagnoses' own remedies, scored and checked against the estimate."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .diagnosis import Diagnosis
from .engine import Result
from .estimation import Estimation, after_remedy, apply_whatif, changes_anything
from .knowledge import KnowledgeBase
from .templating import fill_value

# Each later remedy in a scenario's list is worth a little less than the one before.
RANK_DECAY = 0.12
MIN_CONFIDENCE = 0.2


@dataclass
class Prescription:
    remedy: str
    score: float
    after: Estimation | None
    values_after: dict[str, Any]


def rank(diagnoses: list[Diagnosis], result: Result, kb: KnowledgeBase, values: dict[str, Any],
         current: Estimation | None, limit: int = 6) -> list[Prescription]:
    scores: dict[str, float] = {}
    for diagnosis in diagnoses[:3]:
        if diagnosis.confidence < MIN_CONFIDENCE:
            continue
        for index, remedy in enumerate(kb.scenarios[diagnosis.scenario].remedies):
            scores[remedy] = scores.get(remedy, 0.0) + diagnosis.confidence * (1 - RANK_DECAY * index)
    for conclusion in result.of_kind("recommend"):
        scores[conclusion.target] = scores.get(conclusion.target, 0.0) + conclusion.weight / 200
    out = []
    for remedy_id, score in scores.items():
        remedy = kb.remedies[remedy_id]
        if not changes_anything(values, remedy):
            continue
        after = after_remedy(values, remedy) if current is not None else None
        if after is not None and after.result.per_gpu_gib >= current.result.per_gpu_gib - 0.01 \
                and after.result.host_ram_gib >= current.result.host_ram_gib - 0.01:
            continue  # the estimate says it would not help this set-up
        out.append(Prescription(remedy_id, round(score, 4), after, apply_whatif(values, remedy.whatif)))
    if current is not None and current.result.fits is False:
        # What makes it fit comes first; among those, the diagnosis's order.
        out.sort(key=lambda p: (not (p.after is not None and p.after.result.fits), -p.score, p.remedy))
    else:
        out.sort(key=lambda p: (-p.score, p.remedy))
    return out[:limit]


def change_for(prescription: Prescription, kb: KnowledgeBase, lang: str) -> dict[str, Any]:
    """The remedy's exact change, with placeholders filled from the set-up after it."""
    remedy = kb.remedies[prescription.remedy]
    lookup = prescription.values_after.get
    change = {}
    for key, body in remedy.change.items():
        change[key] = body[lang] if key == "note" else fill_value(body, lookup)
    return change
