"""A consultation: messages in, facts accumulated, a question or a report out.

`take_turn` is a pure function of (state, message): the channels store the
state and call it; nothing here knows about HTTP, Slack or SQLite.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from . import language
from .conclusions import questioning, report
from .conclusions.evaluation import Evaluation, evaluate
from .engine import Engine, Provenance, WorkingMemory
from .knowledge import KnowledgeBase, Question
from .observation import admissible, observe
from .redaction import count_markers
from .render import text as render_text

# Facts the estimator and rules derive are recomputed every turn, never stored.
STORED_SOURCES = ("extractor", "answer", "default")


@dataclass
class State:
    facts: list[dict] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    pending: str | None = None
    lang: str | None = None
    turns: int = 0

    def to_dict(self) -> dict:
        return {"facts": self.facts, "unknown": self.unknown, "asked": self.asked, "pending": self.pending,
                "lang": self.lang, "turns": self.turns}

    @classmethod
    def from_dict(cls, raw: dict) -> "State":
        return cls(list(raw.get("facts", [])), list(raw.get("unknown", [])), list(raw.get("asked", [])),
                   raw.get("pending"), raw.get("lang"), int(raw.get("turns", 0)))

    def memory(self, kb: KnowledgeBase | None = None) -> WorkingMemory:
        memory = WorkingMemory()
        for fact in self.facts if kb is None else stored_facts(self.facts, kb):
            src = fact["source"]
            memory.assert_fact(fact["name"], fact["value"], Provenance(src["kind"], src["name"], src.get("detail", "")))
        return memory


def stored_facts(facts: Any, kb: KnowledgeBase) -> list[dict]:
    """The stored facts that may still stand, read back safely.

    A state stored by an older version, or before a bound was known, may hold a fact the
    knowledge base no longer has, a value it no longer accepts (a ZeRO stage of 4), or a
    malformed entry. Such a fact is dropped as if never said: one bad fact must not make
    every later turn of the consultation fail.
    """
    kept = []
    for fact in facts if isinstance(facts, list) else ():
        source = fact.get("source") if isinstance(fact, dict) else None
        if not (isinstance(source, dict) and isinstance(source.get("kind"), str) and isinstance(source.get("name"), str)
                and isinstance(source.get("detail", ""), str) and isinstance(fact.get("name"), str)):
            continue
        if admissible(fact["name"], fact.get("value"), kb):
            kept.append(fact)
    return kept


def _skip_words(kb: KnowledgeBase) -> set[str]:
    words = set()
    for lang in language.LANGUAGES:
        words.update(w.strip().lower() for w in kb.texts["skip.words"][lang].split("|"))
    return words


_NUMBER = re.compile(r"(\d{1,9}(?:\.\d{1,4})?)\s{0,2}([kK])?")
_YES = {"yes", "y", "true", "on", "enabled", "是", "开", "开启", "开了", "有", "对", "是的"}
_NO = {"no", "n", "false", "off", "disabled", "否", "关", "关闭", "没有", "没开", "不是", "无"}


def _direct_answer(question: Question, message: str) -> Any:
    """The answer when the message is just an option, a number or a yes/no."""
    text = message.strip().lower().rstrip(".!。！")
    for option in question.options:
        labels = {str(option["value"]).lower(), *(label.lower() for label in option["label"].values())}
        if text in labels:
            return option["value"]
    if question.answer == "number":
        # A bare number ("2048", "2k", "about 4") answers; a sentence that happens to hold
        # one ("Colab ~12-13 GB") goes to the extractors instead.
        numbers = _NUMBER.findall(text)
        match = _NUMBER.search(text) if len(numbers) == 1 and len(text.split()) <= 3 else None
        if match:
            number = float(match.group(1)) * (1024 if match.group(2) else 1)
            return int(number) if number.is_integer() else number
    if question.answer == "boolean":
        if text in _YES:
            return True
        if text in _NO:
            return False
    return None


class Consultant:
    """Holds the knowledge base and the engine built from its rules; one per process."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self.engine = Engine(kb.rules)
        self.skip_words = _skip_words(kb)

    def take_turn(self, state: State, message: str, lang: str | None = None,
                  allow_questions: bool = True) -> tuple[State, dict]:
        kb = self.kb
        state = State.from_dict(state.to_dict())
        state.lang = language.choose(lang, message, state.lang)
        state.turns += 1
        memory = state.memory(kb)
        # The channels redact secrets before a message gets here; the reply says how many.
        notes: list[str] = [f"redacted:{n}"] if (n := count_markers(message)) else []
        pending = kb.questions.get(state.pending) if state.pending else None
        state.pending = None
        source_kind = "answer" if pending else "extractor"
        if pending is not None:
            if message.strip().lower().rstrip(".!。！") in self.skip_words:
                if pending.fact not in state.unknown:
                    state.unknown.append(pending.fact)
            else:
                direct = _direct_answer(pending, message)
                if direct is not None and admissible(pending.fact, direct, kb):
                    memory.assert_fact(pending.fact, direct, Provenance("answer", pending.id, message.strip()[:80]))
        for obs in observe(message, kb):
            memory.assert_fact(obs.name, obs.value, Provenance(source_kind, obs.extractor, obs.detail))
        if pending is not None and pending.fact not in memory and pending.fact not in state.unknown:
            # An answer we cannot read is not asked again: it counts as "don't know".
            state.unknown.append(pending.fact)
            notes.append("not_understood")
        state.facts = [f.as_dict() for f in memory if f.source.kind in STORED_SOURCES]
        evaluation = evaluate(memory, kb, self.engine)
        question = None
        if allow_questions:
            question = questioning.choose(evaluation.result, kb, state.asked, state.unknown,
                                          lambda fact, value: self._top_with(memory, fact, value), self._top(evaluation))
        if question is not None:
            state.pending = question.id
            state.asked.append(question.id)
        reply = report.build(kb, evaluation, state.unknown, question, state.lang, notes)
        reply["text"] = render_text.render(reply, kb)
        return state, reply

    def _top(self, evaluation: Evaluation) -> str | None:
        return evaluation.diagnoses[0].scenario if evaluation.diagnoses else None

    def _top_with(self, memory: WorkingMemory, fact: str, value: Any) -> str | None:
        trial = memory.copy()
        trial.assert_fact(fact, value, Provenance("answer", "what-if"))
        return self._top(evaluate(trial, self.kb, self.engine))

    def diagnose(self, message: str, lang: str | None = None) -> dict:
        """One shot: no questions, assumptions stated."""
        return self.take_turn(State(), message, lang, allow_questions=False)[1]


_default: Consultant | None = None


def default() -> Consultant:
    global _default
    if _default is None:
        from . import knowledge
        _default = Consultant(knowledge.default())
    return _default
