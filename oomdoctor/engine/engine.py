"""Forward chaining to quiescence, with refraction and a firing cap."""
from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

from .agenda import Activation, Agenda
from .facts import Fact, Provenance, WorkingMemory
from .rules import Rule

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Firing:
    rule: Rule
    # The facts the rule's conditions saw, as they were when it fired.
    facts: tuple[Fact, ...]
    absent: tuple[str, ...]


@dataclass(frozen=True)
class Conclusion:
    kind: str
    target: str
    weight: float
    firing: Firing
    args: tuple[tuple[str, Any], ...] = ()


@dataclass
class Result:
    memory: WorkingMemory
    conclusions: list[Conclusion] = field(default_factory=list)
    firings: list[Firing] = field(default_factory=list)
    # True when the run stopped at the firing cap rather than at quiescence.
    capped: bool = False

    def of_kind(self, kind: str) -> list[Conclusion]:
        return [c for c in self.conclusions if c.kind == kind]


class Engine:
    def __init__(self, rules: Iterable[Rule], max_firings: int = 1000) -> None:
        self.rules = list(rules)
        self.max_firings = max_firings
        # Which rules to look at again when a fact changes: the cost of a change is
        # bounded by the rules that mention it, not by the size of the rule set.
        self._by_fact: dict[str, list[Rule]] = defaultdict(list)
        for rule in self.rules:
            for name in rule.facts():
                self._by_fact[name].append(rule)
        # A rule none of whose facts are present judges memory as it would judge an
        # empty one, so these are the only rules to try beyond those the facts name.
        empty = WorkingMemory()
        self._match_empty = [rule for rule in self.rules if rule.matches(empty)]

    def run(self, memory: WorkingMemory) -> Result:
        memory = memory.copy()
        result = Result(memory)
        agenda = Agenda()
        fired: set[tuple[str, tuple]] = set()

        def consider(rule: Rule) -> None:
            if not rule.matches(memory):
                agenda.drop(rule.id)
                return
            signature = tuple(sorted((name, _version(memory.get(name))) for name in rule.facts()))
            if (rule.id, signature) not in fired:
                agenda.put(Activation(rule, signature))

        candidates = {rule.order: rule for rule in self._match_empty}
        for fact in memory:
            candidates.update((rule.order, rule) for rule in self._by_fact.get(fact.name, ()))
        for _, rule in sorted(candidates.items()):
            consider(rule)

        while True:
            activation = agenda.next()
            if activation is None:
                break
            if len(result.firings) >= self.max_firings:
                result.capped = True
                log.warning("stopped after %d firings; rule set may loop", self.max_firings)
                break
            rule = activation.rule
            fired.add((rule.id, activation.signature))
            firing = Firing(
                rule,
                tuple(f for f in (memory.get(n) for n in sorted(rule.facts())) if f is not None),
                tuple(sorted(n for n in rule.facts() if memory.get(n) is None)),
            )
            result.firings.append(firing)
            log.debug("fire %s", rule.id)
            changed: set[str] = set()
            for action in rule.then:
                if action.kind == "assert":
                    source = Provenance("rule", rule.id)
                    if memory.assert_fact(action.target, action.value, source) is not None:
                        changed.add(action.target)
                else:
                    result.conclusions.append(Conclusion(action.kind, action.target, action.value, firing, action.args))
            for name in changed:
                for other in self._by_fact.get(name, ()):
                    consider(other)
        return result


def _version(fact: Fact | None) -> int | None:
    return None if fact is None else fact.version
