"""A consultation: messages in, facts accumulated, a question or a report out.

`take_turn` is a pure function of (state, message): the channels store the
state and call it; nothing here knows about HTTP, Slack or SQLite.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from . import answers, language, redaction
from .conclusions import prescription, questioning, report
from .conclusions.evaluation import Evaluation, evaluate
from .engine import Engine, Provenance, WorkingMemory
from .knowledge import KnowledgeBase, Question
from .observation import admissible, observe
from .render import text as render_text

# Facts the estimator and rules derive are recomputed every turn, never stored.
STORED_SOURCES = ("extractor", "answer", "default")
# A reply after a report is read as a late answer only when it is as short as an answer ("没开", "4096 tokens");
# a longer message is a new paste, read by the extractors alone.
LATE_ANSWER_CHARS = 60


@dataclass
class State:
    facts: list[dict] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    pending: str | None = None
    lang: str | None = None
    turns: int = 0
    # Questions the last report offered to sharpen its estimate (not asked: the answer did not need them).
    offered: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"facts": self.facts, "unknown": self.unknown, "asked": self.asked, "pending": self.pending,
                "lang": self.lang, "turns": self.turns, "offered": self.offered}

    @classmethod
    def from_dict(cls, raw: dict) -> "State":
        return cls(list(raw.get("facts", [])), list(raw.get("unknown", [])), list(raw.get("asked", [])),
                   raw.get("pending"), raw.get("lang"), int(raw.get("turns", 0)), list(raw.get("offered", [])))

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
        # The channels redact secrets before a message gets here; the reply says what kinds, how many.
        notes: list[str] = [n] if (n := redaction.note(message)) else []
        pending = kb.questions.get(state.pending) if state.pending else None
        state.pending = None
        source_kind = "answer" if pending else "extractor"
        reading = answers.read(pending, message, kb, self.skip_words) if pending is not None else None
        late_fact = None
        answered = (reading.fact or pending.fact) if reading is not None and reading.value is not None else None
        if answered is not None and admissible(answered, reading.value, kb):
            memory.assert_fact(answered, reading.value, Provenance("answer", pending.id, message.strip()[:80]))
        elif pending is None and (late := self._late_answer(state, message, memory)) is not None:
            question, value = late
            memory.assert_fact(question.fact, value, Provenance("answer", question.id, message.strip()[:80]))
            late_fact = question.fact
        # The answer is read whole: the asked fact and everything else it states. What it mentions in passing
        # adds facts but does not rewrite known ones ("A100" answering "how many GPUs?" is not a new card).
        for obs in observe(message, kb):
            if obs.name in (answered, late_fact):
                continue
            if pending is not None and obs.name != pending.fact and obs.name in memory:
                continue
            memory.assert_fact(obs.name, obs.value, Provenance(source_kind, obs.extractor, obs.detail))
        if reading is not None and reading.skipped and pending.fact not in memory and pending.fact not in state.unknown:
            state.unknown.append(pending.fact)
        # A fact stated later is known, whatever was skipped before.
        state.unknown = [fact for fact in state.unknown if fact not in memory]
        state.facts = [f.as_dict() for f in memory if f.source.kind in STORED_SOURCES]
        evaluation = evaluate(memory, kb, self.engine)
        question = None
        # A count answering "which GPU (and how many)?" still leaves the card to ask.
        settled = answered is not None and answered in memory and answered != pending.or_count
        if pending is not None and not reading.skipped and pending.fact not in memory and not settled:
            question = self._ask_again(pending, evaluation, state, notes, allow_questions)
        held = questioning.held_back(evaluation.diagnoses, kb,
                                     evaluation.memory.value("phase") in prescription.FAILED_MOMENT)
        # Someone who could not answer one question gets the answer now rather than another question.
        if question is None and allow_questions and not state.unknown:
            question = questioning.choose(evaluation.result, kb, state.asked, state.unknown,
                                          lambda fact, value: self._lead_with(memory, fact, value),
                                          self._lead(evaluation), held)
        state.offered = []
        if question is None and "setup" in held:
            offered = questioning.deferred(evaluation.result, kb, state.asked, state.unknown)
            if offered:
                notes.append("offer:" + ",".join(offered))
                state.offered = offered
        if question is not None:
            state.pending = question.id
            state.asked.append(question.id)
        reply = report.build(kb, evaluation, state.unknown, question, state.lang, notes)
        reply["text"] = render_text.render(reply, kb)
        return state, reply

    def _late_answer(self, state: State, message: str, memory: WorkingMemory) -> tuple[Question, Any] | None:
        """A short reply after a report, read as the answer to a question it left open: one the user skipped,
        or one the report offered. Only when exactly one of them reads a value from it: "没开" after one
        skipped yes/no question is its answer; "no" beside two offered yes/no questions answers neither."""
        text = message.strip()
        if not text or "\n" in text or len(text) > LATE_ANSWER_CHARS:
            return None
        open_ids = [qid for qid in reversed(state.asked)
                    if (q := self.kb.questions.get(qid)) is not None and q.fact in state.unknown]
        open_ids += [qid for qid in state.offered if qid not in open_ids]
        readings: dict[str, tuple[Question, Any]] = {}
        for qid in open_ids:
            question = self.kb.questions.get(qid)
            if question is None or question.fact in memory or question.fact in readings:
                continue
            reading = answers.read(question, text, self.kb, self.skip_words)
            if reading.value is None or reading.skipped or (reading.fact or question.fact) != question.fact:
                continue
            if admissible(question.fact, reading.value, self.kb):
                readings[question.fact] = (question, reading.value)
        return next(iter(readings.values())) if len(readings) == 1 else None

    def _ask_again(self, pending: Question, evaluation: "Evaluation", state: State, notes: list[str],
                   allow_questions: bool) -> Question | None:
        """An answer that could not be read keeps its question open: asked once more, worded
        differently, while it still matters; after that it counts as "don't know"."""
        still_needed = questioning.still_needed(evaluation.result, self.kb, pending.id)
        if (allow_questions and still_needed and state.asked.count(pending.id) < 2
                and len(state.asked) < questioning.MAX_QUESTIONS):
            notes.append("asked_again")
            return replace(pending, text=pending.again) if pending.again else pending
        if still_needed:
            state.unknown.append(pending.fact)
            notes.append("not_understood")
        return None

    def _top(self, evaluation: Evaluation) -> str | None:
        return evaluation.diagnoses[0].scenario if evaluation.diagnoses else None

    def _lead(self, evaluation: Evaluation) -> questioning.Lead:
        """What the reply leads with: the top diagnosis, the first remedy, and whether the set-up fits."""
        values = {f.name: f.value for f in evaluation.memory}
        ranked = prescription.rank(evaluation.diagnoses, evaluation.result, self.kb, values, evaluation.estimation)
        fits = evaluation.estimation.result.fits if evaluation.estimation is not None else None
        return self._top(evaluation), ranked[0].remedy if ranked else None, fits

    def _lead_with(self, memory: WorkingMemory, fact: str, value: Any) -> questioning.Lead:
        trial = memory.copy()
        trial.assert_fact(fact, value, Provenance("answer", "what-if"))
        return self._lead(evaluate(trial, self.kb, self.engine))

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
