"""The knowledge base: facts, scenarios, symptoms, remedies, questions, texts, rules.

Loaded once from YAML and validated as a whole, so that a broken file fails at
start with the file, the entry and a suggestion, never mid-consultation.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import yaml_safe
from .engine import ConclusionKind, Rule, RuleSyntaxError, Vocabulary, load_rules
from .schema import Field, KnowledgeError, check_entry, check_ref, check_value, suggest

ROOT = Path(__file__).resolve().parent.parent
KNOWLEDGE_DIR = ROOT / "knowledge"
RULES_DIR = ROOT / "rules"

FACT_TYPES = ("number", "integer", "boolean", "string", "enum", "list")
OOM_KINDS = ("gpu", "host", "not_memory")


# No count, size or rate the facts describe comes near this; a number beyond it (a pasted 10**400) is not one,
# and would overflow the float arithmetic downstream.
MAX_MAGNITUDE = 1e15


def _plausible(value: int | float) -> bool:
    return (math.isfinite(value) if isinstance(value, float) else True) and abs(value) <= MAX_MAGNITUDE


@dataclass(frozen=True)
class FactSpec:
    name: str
    type: str
    text: dict[str, str]
    values: tuple[str, ...] = ()
    unit: str = ""
    # How an enum value reads in a sentence, per language; the raw value where none is given.
    labels: dict[str, dict[str, str]] = field(default_factory=dict, compare=False, hash=False)

    def label(self, value: Any, lang: str) -> str | None:
        entry = self.labels.get(value) if isinstance(value, str) else None
        return entry[lang] if entry else None

    def accepts(self, value: Any) -> bool:
        if self.type == "number":
            return isinstance(value, (int, float)) and not isinstance(value, bool) and _plausible(value)
        if self.type == "integer":
            return isinstance(value, int) and not isinstance(value, bool) and _plausible(value)
        if self.type == "boolean":
            return isinstance(value, bool)
        if self.type == "string":
            return isinstance(value, str)
        if self.type == "enum":
            return value in self.values
        return isinstance(value, list)


@dataclass(frozen=True)
class Symptom:
    id: str
    phrases: tuple[str, ...]
    asserts: dict[str, Any]
    priority: int
    text: dict[str, str]
    # All of these must appear too (e.g. "Killed" only counts beside a training command).
    requires: tuple[str, ...] = ()
    # None of these may appear (e.g. "out of memory" inside "CUDA out of memory" is not a host error).
    unless: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    id: str
    # What runs out in this scenario; some causes exhaust either (torch.compile, fp32 loading).
    oom_kinds: tuple[str, ...]
    title: dict[str, str]
    summary: dict[str, str]
    verify: dict[str, str]
    remedies: tuple[str, ...]
    sources: tuple[str, ...] = ()
    # Its remedies do not depend on the memory estimate: answer first, ask for the set-up after.
    answer_first: bool = False

    @property
    def oom_kind(self) -> str:
        return self.oom_kinds[0]


@dataclass(frozen=True)
class Remedy:
    id: str
    title: dict[str, str]
    effect: dict[str, str]
    cost_speed: dict[str, str]
    cost_quality: dict[str, str]
    change: dict[str, Any]
    whatif: dict[str, Any]
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class Question:
    id: str
    fact: str
    purpose: str
    priority: int
    text: dict[str, str]
    why: dict[str, str]
    answer: str
    options: tuple[dict[str, Any], ...] = ()
    # A second wording, for asking once more when the first answer could not be read.
    again: dict[str, str] | None = None
    # What the question is about, in a few words ("the model"), for a reply that lists what it would ask.
    topic: dict[str, str] | None = None
    # A size in GiB that answers the question as well as its own fact does ("80G" to "which GPU?": how much
    # memory each card has), read only when the answer writes its unit.
    or_size: str | None = None
    # A count the question asks beside its own fact ("which GPU (and how many)?"): a bare number answers
    # the count, so the options are never picked by their number.
    or_count: str | None = None


@dataclass(frozen=True)
class Claim:
    """A figure people repeat that is wrong, with the set-up that shows the truth."""

    id: str
    claim: dict[str, str]
    truth: dict[str, str]
    setup: dict[str, Any]
    sources: tuple[str, ...] = ()


@dataclass
class KnowledgeBase:
    facts: dict[str, FactSpec]
    symptoms: dict[str, Symptom]
    scenarios: dict[str, Scenario]
    remedies: dict[str, Remedy]
    questions: dict[str, Question]
    texts: dict[str, dict[str, str]]
    claims: dict[str, Claim]
    settings: list[dict] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)

    def text(self, key: str, lang: str, **values: Any) -> str:
        entry = self.texts.get(key)
        if entry is None:
            raise KeyError(f"no text '{key}'{suggest(key, self.texts)}")
        return entry[lang].format(**values) if values else entry[lang]

    def question_for(self, fact: str) -> Question | None:
        return next((q for q in self.questions.values() if q.fact == fact), None)


def _read(path: Path, top: str) -> Any:
    try:
        raw = yaml_safe.load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KnowledgeError(f"{path.name}: file is missing") from None
    except yaml.YAMLError as exc:
        raise KnowledgeError(f"{path.name}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict) or top not in raw:
        raise KnowledgeError(f"{path.name}: expected a top-level '{top}' key")
    extra = set(raw) - {top}
    if extra:
        raise KnowledgeError(f"{path.name}: unknown top-level key {sorted(extra)}")
    return raw[top]


def _entries(path: Path, top: str) -> list[tuple[str, dict]]:
    items = _read(path, top)
    if not isinstance(items, list):
        raise KnowledgeError(f"{path.name}: '{top}' must be a list")
    seen: set[str] = set()
    out = []
    for index, entry in enumerate(items):
        ident = entry.get("id") if isinstance(entry, dict) else None
        where = f"{path.name}: {top} '{ident}'" if ident else f"{path.name}: {top} #{index + 1}"
        if not isinstance(ident, str):
            raise KnowledgeError(f"{where}: needs a string 'id'")
        if ident in seen:
            raise KnowledgeError(f"{where}: id defined twice")
        seen.add(ident)
        out.append((where, entry))
    return out


def _load_facts(path: Path) -> dict[str, FactSpec]:
    raw = _read(path, "facts")
    if not isinstance(raw, dict):
        raise KnowledgeError(f"{path.name}: 'facts' must be a mapping of name to spec")
    schema = {
        "type": Field("enum", values=FACT_TYPES),
        "values": Field("list", required=False),
        "unit": Field("str", required=False),
        "labels": Field("map", required=False),
        "en": Field("str"),
        "zh": Field("str"),
    }
    facts = {}
    for name, spec in raw.items():
        where = f"{path.name}: fact '{name}'"
        check_entry(spec, schema, where)
        if spec["type"] == "enum" and not spec.get("values"):
            raise KnowledgeError(f"{where}: an enum needs 'values'")
        labels = spec.get("labels") or {}
        for value, text in labels.items():
            check_ref(value, spec.get("values") or (), "value", f"{where}: labels")
            check_value(text, Field("text"), f"{where}: labels: {value}")
        facts[name] = FactSpec(name, spec["type"], {"en": spec["en"], "zh": spec["zh"]},
                               tuple(spec.get("values") or ()), spec.get("unit", ""), labels)
    return facts


def _check_fact_values(mapping: dict, facts: dict[str, FactSpec], where: str) -> None:
    for name, value in mapping.items():
        check_ref(name, facts, "fact", where)
        if not facts[name].accepts(value):
            raise KnowledgeError(f"{where}: {value!r} is not a valid {facts[name].type} for fact '{name}'"
                                 + (suggest(value, facts[name].values) if facts[name].values else ""))


def _load_symptoms(path: Path, facts: dict[str, FactSpec]) -> dict[str, Symptom]:
    schema = {
        "id": Field("str"), "phrases": Field("list"), "asserts": Field("map"), "priority": Field("int", required=False),
        "requires": Field("list", required=False), "unless": Field("list", required=False), "text": Field("text"),
    }
    out = {}
    for where, entry in _entries(path, "symptoms"):
        check_entry(entry, schema, where)
        for key in ("phrases", "requires", "unless"):
            for phrase in entry.get(key) or ():
                if not isinstance(phrase, str) or not phrase.strip():
                    raise KnowledgeError(f"{where}: '{key}' holds non-empty strings")
        if not entry["phrases"]:
            raise KnowledgeError(f"{where}: needs at least one phrase")
        _check_fact_values(entry["asserts"], facts, where)
        out[entry["id"]] = Symptom(entry["id"], tuple(p.lower() for p in entry["phrases"]), dict(entry["asserts"]),
                                   entry.get("priority", 0), entry["text"],
                                   tuple(p.lower() for p in entry.get("requires") or ()),
                                   tuple(p.lower() for p in entry.get("unless") or ()))
    return out


WHATIF_OPS = ("set", "multiply", "cap")
_REFERENCE = re.compile(r"\{([a-z_][a-z0-9_.]{0,60})\}")


def fact_reference(value: Any) -> str | None:
    """A what-if may set a fact to another fact's value: ``{train.batch_size}``."""
    match = _REFERENCE.fullmatch(value) if isinstance(value, str) else None
    return match.group(1) if match else None


def _load_remedies(path: Path, facts: dict[str, FactSpec]) -> dict[str, Remedy]:
    schema = {
        "id": Field("str"), "title": Field("text"), "effect": Field("text"), "cost_speed": Field("text"),
        "cost_quality": Field("text"), "change": Field("map"), "whatif": Field("map", required=False),
        "sources": Field("list", required=False),
    }
    change_schema = {
        "training_args": Field("map", required=False), "trainer_args": Field("map", required=False),
        "peft": Field("map", required=False),
        "bitsandbytes": Field("map", required=False), "deepspeed": Field("map", required=False),
        "env": Field("map", required=False), "launch": Field("str", required=False),
        "code": Field("str", required=False), "shell": Field("str", required=False),
        "note": Field("text", required=False),
    }
    out = {}
    for where, entry in _entries(path, "remedies"):
        check_entry(entry, schema, where)
        check_entry(entry["change"], change_schema, f"{where}: change")
        if not set(entry["change"]) - {"note"}:
            raise KnowledgeError(f"{where}: 'change' must carry a concrete change, not only a note")
        whatif = entry.get("whatif") or {}
        for op, body in whatif.items():
            if op not in WHATIF_OPS:
                raise KnowledgeError(f"{where}: whatif: unknown operation '{op}'{suggest(op, WHATIF_OPS)}")
            if not isinstance(body, dict):
                raise KnowledgeError(f"{where}: whatif: '{op}' takes a mapping of fact to value")
            if op == "set":
                literal = {k: v for k, v in body.items() if not fact_reference(v)}
                _check_fact_values(literal, facts, f"{where}: whatif")
                for name, value in body.items():
                    ref = fact_reference(value)
                    if ref:
                        check_ref(ref, facts, "fact", f"{where}: whatif: {name}")
                        check_ref(name, facts, "fact", f"{where}: whatif")
                        if facts[ref].type != facts[name].type:
                            raise KnowledgeError(f"{where}: whatif: {name} is a {facts[name].type}, {ref} a {facts[ref].type}")
            else:
                for name, factor in body.items():
                    check_ref(name, facts, "fact", f"{where}: whatif")
                    check_value(factor, Field("number"), f"{where}: whatif: {op} {name}")
        out[entry["id"]] = Remedy(entry["id"], entry["title"], entry["effect"], entry["cost_speed"],
                                  entry["cost_quality"], entry["change"], whatif, tuple(entry.get("sources") or ()))
    return out


def _load_scenarios(path: Path, remedies: dict[str, Remedy]) -> dict[str, Scenario]:
    schema = {
        "id": Field("str"), "oom_kind": Field("any"), "title": Field("text"),
        "summary": Field("text"), "verify": Field("text"), "remedies": Field("list"), "sources": Field("list", required=False),
        "answer_first": Field("bool", required=False),
    }
    out = {}
    for where, entry in _entries(path, "scenarios"):
        check_entry(entry, schema, where)
        if not entry["remedies"]:
            raise KnowledgeError(f"{where}: a scenario needs at least one remedy")
        for rid in entry["remedies"]:
            check_ref(rid, remedies, "remedy", where)
        kinds = entry["oom_kind"] if isinstance(entry["oom_kind"], list) else [entry["oom_kind"]]
        for kind in kinds:
            check_value(kind, Field("enum", values=OOM_KINDS), f"{where}: 'oom_kind'")
        out[entry["id"]] = Scenario(entry["id"], tuple(kinds), entry["title"], entry["summary"], entry["verify"],
                                    tuple(entry["remedies"]), tuple(entry.get("sources") or ()),
                                    bool(entry.get("answer_first", False)))
    return out


ANSWER_TYPES = ("choice", "number", "boolean", "free")
# setup: the job's set-up the estimate needs; estimate: a figure of one moment (evaluation);
# reconcile: what makes the estimate agree with the log; diagnosis: a fact that tells causes apart.
PURPOSES = ("setup", "estimate", "reconcile", "diagnosis")


def _load_questions(path: Path, facts: dict[str, FactSpec]) -> dict[str, Question]:
    schema = {
        "id": Field("str"), "fact": Field("str"), "purpose": Field("enum", values=PURPOSES),
        "priority": Field("int"), "text": Field("text"), "why": Field("text"),
        "answer": Field("enum", values=ANSWER_TYPES), "options": Field("list", required=False),
        "again": Field("text", required=False), "topic": Field("text", required=False),
        "or_size": Field("str", required=False), "or_count": Field("str", required=False),
    }
    option_schema = {"value": Field("any"), "label": Field("text")}
    out = {}
    for where, entry in _entries(path, "questions"):
        check_entry(entry, schema, where)
        check_ref(entry["fact"], facts, "fact", where)
        if "or_size" in entry:
            check_ref(entry["or_size"], facts, "fact", where)
            if not entry["or_size"].endswith("_gib"):
                raise KnowledgeError(f"{where}: or_size must name a fact in GiB, not {entry['or_size']!r}")
        if "or_count" in entry:
            check_ref(entry["or_count"], facts, "fact", where)
            if facts[entry["or_count"]].type != "integer":
                raise KnowledgeError(f"{where}: or_count must name an integer fact, not {entry['or_count']!r}")
        options = entry.get("options") or []
        for i, option in enumerate(options):
            check_entry(option, option_schema, f"{where}: option #{i + 1}")
            _check_fact_values({entry["fact"]: option["value"]}, facts, f"{where}: option #{i + 1}")
        if entry["answer"] == "choice" and not options:
            raise KnowledgeError(f"{where}: a choice question needs options")
        out[entry["id"]] = Question(entry["id"], entry["fact"], entry["purpose"], entry["priority"], entry["text"],
                                    entry["why"], entry["answer"], tuple(options), entry.get("again"),
                                    entry.get("topic"), entry.get("or_size"), entry.get("or_count"))
    return out


def _load_texts(path: Path) -> dict[str, dict[str, str]]:
    raw = _read(path, "texts")
    if not isinstance(raw, dict):
        raise KnowledgeError(f"{path.name}: 'texts' must be a mapping")
    for key, value in raw.items():
        check_value(value, Field("text"), f"{path.name}: text '{key}'")
    return raw


def _load_claims(path: Path, facts: dict[str, FactSpec]) -> dict[str, Claim]:
    schema = {"id": Field("str"), "claim": Field("text"), "truth": Field("text"), "setup": Field("map"),
              "sources": Field("list", required=False)}
    out = {}
    for where, entry in _entries(path, "claims"):
        check_entry(entry, schema, where)
        _check_fact_values(entry["setup"], facts, f"{where}: setup")
        out[entry["id"]] = Claim(entry["id"], entry["claim"], entry["truth"], entry["setup"],
                                 tuple(entry.get("sources") or ()))
    return out


READS = ("integer", "number", "boolean", "string", "list", "present", "model")


def _load_settings(path: Path, facts: dict[str, FactSpec]) -> list[dict]:
    items = _read(path, "settings")
    if not isinstance(items, list):
        raise KnowledgeError(f"{path.name}: 'settings' must be a list")
    schema = {"keys": Field("list"), "fact": Field("str"), "read": Field("any"), "unless": Field("list", required=False),
              "rank": Field("int", required=False), "min": Field("int", required=False),
              "empty_excludes": Field("list", required=False)}
    for index, entry in enumerate(items):
        where = f"{path.name}: setting #{index + 1}"
        check_entry(entry, schema, where)
        where = f"{path.name}: setting {entry['keys'][:1]}"
        check_ref(entry["fact"], facts, "fact", where)
        read = entry["read"]
        if isinstance(read, str):
            check_value(read, Field("enum", values=READS), f"{where}: read")
        elif isinstance(read, dict) and len(read) == 1 and next(iter(read)) in ("map", "words", "if_true", "if_false", "if_present"):
            values = read.get("map", read.get("words")).values() if ("map" in read or "words" in read) else read.values()
            for value in values:
                _check_fact_values({entry["fact"]: value}, facts, where)
        else:
            raise KnowledgeError(f"{where}: 'read' is one of {list(READS)} or {{map|words|if_true|if_false|if_present: ...}}")
        for value in entry.get("empty_excludes") or ():
            _check_fact_values({entry["fact"]: value}, facts, where)
    return items


def vocabulary(kb: KnowledgeBase) -> Vocabulary:
    return Vocabulary(
        facts=set(kb.facts),
        value_checks={name: spec.accepts for name, spec in kb.facts.items()},
        conclusions={
            "conclude": ConclusionKind("scenario", "confidence", default_weight=0.5),
            "recommend": ConclusionKind("remedy", "priority", default_weight=50, high=100),
            "ask": ConclusionKind("question", "priority", default_weight=50, high=100),
        },
        targets={"conclude": set(kb.scenarios), "recommend": set(kb.remedies), "ask": set(kb.questions)},
    )


def load(knowledge_dir: Path = KNOWLEDGE_DIR, rules_dir: Path = RULES_DIR) -> KnowledgeBase:
    facts = _load_facts(knowledge_dir / "facts.yaml")
    remedies = _load_remedies(knowledge_dir / "remedies.yaml", facts)
    kb = KnowledgeBase(
        facts=facts,
        symptoms=_load_symptoms(knowledge_dir / "symptoms.yaml", facts),
        scenarios=_load_scenarios(knowledge_dir / "scenarios.yaml", remedies),
        remedies=remedies,
        questions=_load_questions(knowledge_dir / "questions.yaml", facts),
        texts=_load_texts(knowledge_dir / "texts.yaml"),
        claims=_load_claims(knowledge_dir / "claims.yaml", facts),
        settings=_load_settings(knowledge_dir / "settings.yaml", facts),
    )
    try:
        kb.rules = load_rules(rules_dir.glob("*.yaml"), vocabulary(kb))
    except RuleSyntaxError as exc:
        raise KnowledgeError(str(exc)) from None
    return kb


@functools.lru_cache(maxsize=1)
def default() -> KnowledgeBase:
    """The shipped knowledge base, loaded once per process."""
    return load()
