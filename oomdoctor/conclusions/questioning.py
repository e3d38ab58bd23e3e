"""Which follow-up question to ask, if any: the most valuable one whose answer would change the reply.

Rules mark questions as needed; this module decides whether one is worth the user's time now.
A question is asked only when some answer to it would change what the reply leads with (the
top diagnosis, the first remedy, or whether the set-up fits), tried through the engine before
the user is bothered.
When the cause found does not depend on the estimate (fragmentation, a leak, another process),
the set-up questions wait: the answer comes first, with an offer to sharpen the estimate.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ..engine import Result
from ..knowledge import KnowledgeBase, Question

MAX_QUESTIONS = 3
# A cause this likely is worth answering before the set-up is known.
ANSWER_FIRST_CONFIDENCE = 0.5
# Ahead of the next cause by this much, no question about causes is worth asking either.
DECISIVE_MARGIN = 0.1
# A question is worth asking when this many of its answers would change the reply (one of two for a
# yes/no question): an answer that matters for only one outlying option is left as an assumption.
CHANGED_OPTIONS = 2

# What a reply leads with: (top diagnosis, first remedy, whether the estimate fits).
Lead = tuple[Any, Any, Any]


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


def held_back(diagnoses: Sequence, kb: KnowledgeBase, priced_moment: bool = False) -> frozenset[str]:
    """The purposes of questions not worth asking before the answer.

    When the likeliest cause's remedies do not depend on the memory estimate, the set-up
    waits; when that cause is also clearly ahead of the next, questions about causes, and
    those that only make the estimate agree with the log, do too (unless the reply prices the
    moment that failed, such as evaluation, from that estimate).
    """
    top = diagnoses[0] if diagnoses else None
    if not (top and top.confidence >= ANSWER_FIRST_CONFIDENCE and kb.scenarios[top.scenario].answer_first):
        return frozenset()
    runner_up = diagnoses[1].confidence if len(diagnoses) > 1 else 0.0
    if top.confidence - runner_up >= DECISIVE_MARGIN:
        return frozenset({"setup", "diagnosis"} if priced_moment else {"setup", "reconcile", "diagnosis"})
    return frozenset({"setup"})


def choose(result: Result, kb: KnowledgeBase, asked: list[str], unknown: list[str],
           lead_with: Callable[[str, object], Lead], lead_now: Lead, held: frozenset[str] = frozenset()) -> Question | None:
    """The question to ask now, or None when the answer should come instead.

    An estimate question (one moment's figure, such as the evaluation set's size) is asked
    while unanswered. A set-up or diagnosis question is asked only if one of its answers,
    tried through the engine (`lead_with`), changes the top diagnosis, the first remedy or the verdict.
    Questions whose purpose is `held` back wait for after the answer.
    """
    if len(asked) >= MAX_QUESTIONS:
        return None
    for _, question in candidates(result, kb, asked, unknown):
        if question.purpose in held:
            continue
        if question.purpose in ("estimate", "reconcile"):
            return question
        needed, changed = min(CHANGED_OPTIONS, len(question.options) - 1), 0
        for option in question.options:
            changed += lead_with(question.fact, option["value"]) != lead_now
            if changed >= needed:
                return question
    return None


def deferred(result: Result, kb: KnowledgeBase, asked: list[str], unknown: list[str]) -> list[str]:
    """The set-up questions left unasked because the answer did not need them: what would sharpen the estimate."""
    return [q.id for _, q in candidates(result, kb, asked, unknown) if q.purpose == "setup"]


def still_needed(result: Result, kb: KnowledgeBase, question_id: str) -> bool:
    """Whether a rule still asks this question (an answer may have settled it another way)."""
    return any(c.target == question_id for c in result.of_kind("ask"))
