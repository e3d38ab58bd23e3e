"""Which follow-up question to ask, if any: the most valuable one not yet answered."""
from __future__ import annotations

from typing import Callable

from ..engine import Result
from ..knowledge import KnowledgeBase, Question

MAX_QUESTIONS = 3


def candidates(result: Result, kb: KnowledgeBase, asked: list[str], unknown: list[str]) -> list[tuple[float, Question]]:
    best: dict[str, float] = {}
    for conclusion in result.of_kind("ask"):
        question = kb.questions[conclusion.target]
        if question.id in asked or question.fact in unknown or question.fact in result.memory:
            continue
        best[question.id] = max(best.get(question.id, 0.0), conclusion.weight)
    ranked = [(priority, kb.questions[qid]) for qid, priority in best.items()]
    ranked.sort(key=lambda item: (-item[0], -item[1].priority, item[1].id))
    return ranked


def choose(result: Result, kb: KnowledgeBase, asked: list[str], unknown: list[str],
           top_with: Callable[[str, object], str | None], top_now: str | None) -> Question | None:
    """The question to ask now, or None when the answer should come instead.

    Estimate questions are always worth asking while unanswered. A diagnosis
    question is asked only if some answer to it would change the top diagnosis:
    each option is tried through the engine (`top_with`) before the user is bothered.
    """
    if len(asked) >= MAX_QUESTIONS:
        return None
    for _, question in candidates(result, kb, asked, unknown):
        if question.purpose == "estimate":
            return question
        if any(top_with(question.fact, option["value"]) != top_now for option in question.options):
            return question
    return None
