"""Rules: conditions over facts and the actions taken when they all hold."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

from .. import yaml_safe
from .conditions import Condition, RuleSyntaxError, parse_condition
from .vocabulary import Vocabulary

RULE_KEYS = {"id", "salience", "when", "then", "explain"}
# Actions other than assert are conclusions the engine records without interpreting;
# the vocabulary says which kinds exist and what they may name.
ACTION_FIELDS = {"assert": None}


@dataclass(frozen=True)
class Action:
    kind: str  # "assert" or a conclusion kind from the vocabulary
    target: str  # the fact asserted, or the thing concluded
    value: Any = None  # the asserted value, or the conclusion's weight
    args: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Rule:
    id: str
    when: tuple[Condition, ...]
    then: tuple[Action, ...]
    salience: int = 0
    explain: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    # Load order: the fixed tie-break between rules of equal salience.
    order: int = 0
    origin: str = ""

    def facts(self) -> set[str]:
        return set().union(*(c.facts() for c in self.when)) if self.when else set()

    def matches(self, memory) -> bool:
        return all(c.holds(memory) for c in self.when)


def load_rules(paths: Iterable[Path], vocabulary: Vocabulary) -> list[Rule]:
    rules: list[Rule] = []
    seen: dict[str, str] = {}
    for path in sorted(paths):
        try:
            raw = yaml_safe.load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise RuleSyntaxError(f"{path.name}: not valid YAML: {exc}") from None
        if raw is None:
            continue
        if not isinstance(raw, dict) or set(raw) != {"rules"} or not isinstance(raw["rules"], list):
            raise RuleSyntaxError(f"{path.name}: a rule file holds one key, 'rules', with a list")
        for index, entry in enumerate(raw["rules"]):
            rule = parse_rule(entry, f"{path.name}: rule #{index + 1}", vocabulary, len(rules))
            rule = Rule(**{**rule.__dict__, "origin": path.name})
            if rule.id in seen:
                raise RuleSyntaxError(f"{path.name}: rule '{rule.id}' is defined twice (first in {seen[rule.id]})")
            seen[rule.id] = path.name
            rules.append(rule)
    return rules


def parse_rule(entry: Any, where: str, vocabulary: Vocabulary, order: int) -> Rule:
    if not isinstance(entry, dict):
        raise RuleSyntaxError(f"{where}: a rule must be a mapping")
    rid = entry.get("id")
    if not isinstance(rid, str) or not rid:
        raise RuleSyntaxError(f"{where}: a rule needs a string 'id'")
    where = f"{where.split(':')[0]}: rule '{rid}'"
    unknown = set(entry) - RULE_KEYS
    if unknown:
        key = sorted(unknown)[0]
        raise RuleSyntaxError(f"{where}: unknown key '{key}'{vocabulary.suggest(key, RULE_KEYS)}")
    when_raw = entry.get("when") or []
    then_raw = entry.get("then") or []
    if not isinstance(when_raw, list) or not isinstance(then_raw, list) or not then_raw:
        raise RuleSyntaxError(f"{where}: 'when' is a list of conditions and 'then' a non-empty list of actions")
    salience = entry.get("salience", 0)
    if not isinstance(salience, int) or isinstance(salience, bool):
        raise RuleSyntaxError(f"{where}: 'salience' must be an integer")
    when = tuple(parse_condition(c, f"{where}: when[{i}]") for i, c in enumerate(when_raw))
    for cond in when:
        for name in cond.facts():
            vocabulary.check_fact(name, where)
    then = tuple(_parse_action(a, f"{where}: then[{i}]", vocabulary) for i, a in enumerate(then_raw))
    explain = entry.get("explain") or {}
    vocabulary.check_text(explain, f"{where}: explain")
    return Rule(rid, when, then, salience, dict(explain), order)


def _parse_action(raw: Any, where: str, vocabulary: Vocabulary) -> Action:
    if not isinstance(raw, dict) or len(raw) != 1:
        raise RuleSyntaxError(f"{where}: an action is a mapping with one key, e.g. {{assert: {{fact: value}}}}")
    (kind, body), = raw.items()
    if kind == "assert":
        if not isinstance(body, dict) or len(body) != 1:
            raise RuleSyntaxError(f"{where}: 'assert' takes one {{fact: value}} pair")
        (name, value), = body.items()
        vocabulary.check_fact(name, where)
        vocabulary.check_value(name, value, where)
        return Action("assert", name, value)
    spec = vocabulary.conclusions.get(kind)
    if spec is None:
        known = {"assert", *vocabulary.conclusions}
        raise RuleSyntaxError(f"{where}: unknown action '{kind}'{vocabulary.suggest(kind, known)}")
    if isinstance(body, str):
        body = {spec.key: body}
    if not isinstance(body, dict) or spec.key not in body:
        raise RuleSyntaxError(f"{where}: '{kind}' needs '{spec.key}'")
    extra = set(body) - {spec.key, spec.weight, *spec.extra}
    if extra:
        key = sorted(extra)[0]
        raise RuleSyntaxError(
            f"{where}: '{kind}' has unknown key '{key}'{vocabulary.suggest(key, {spec.key, spec.weight, *spec.extra})}"
        )
    target = str(body[spec.key])
    vocabulary.check_target(kind, target, where)
    weight = body.get(spec.weight, spec.default_weight)
    if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not spec.low <= weight <= spec.high:
        raise RuleSyntaxError(f"{where}: '{spec.weight}' must be a number from {spec.low} to {spec.high}")
    args = tuple(sorted((k, v) for k, v in body.items() if k in spec.extra))
    return Action(kind, target, weight, args)
