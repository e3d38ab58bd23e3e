"""Conditions a rule tests against working memory.

A condition is written in YAML as ``{fact: NAME, OP: OPERAND}``; the operand is a
literal or ``{fact: OTHER}`` (optionally ``times: K``) to compare two facts.
``any``, ``all`` and ``not`` combine conditions.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable

from .facts import WorkingMemory


class RuleSyntaxError(ValueError):
    """A rule file says something the engine cannot read."""


def _contains(container: Any, item: Any) -> bool:
    try:
        return item in container
    except TypeError:
        return False


def _in(item: Any, container: Any) -> bool:
    return _contains(container, item)


def _ordered(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def compare(left: Any, right: Any) -> bool:
        if isinstance(left, bool) or isinstance(right, bool):
            return False
        if not isinstance(left, (int, float)) or not isinstance(right, (int, float)):
            return False
        return op(left, right)

    return compare


BINARY_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": _ordered(operator.lt),
    "le": _ordered(operator.le),
    "gt": _ordered(operator.gt),
    "ge": _ordered(operator.ge),
    "in": _in,
    "not_in": lambda a, b: not _in(a, b),
    "contains": _contains,
}
UNARY_OPS = ("present", "absent")


@dataclass(frozen=True)
class Operand:
    literal: Any = None
    fact: str | None = None
    times: float = 1.0

    def resolve(self, memory: WorkingMemory) -> tuple[bool, Any]:
        if self.fact is None:
            return True, self.literal
        other = memory.get(self.fact)
        if other is None:
            return False, None
        value = other.value
        if self.times != 1.0 and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = value * self.times
        return True, value


class Condition:
    def facts(self) -> set[str]:
        raise NotImplementedError

    def holds(self, memory: WorkingMemory) -> bool:
        raise NotImplementedError


@dataclass(frozen=True)
class Test(Condition):
    fact: str
    op: str
    operand: Operand

    def facts(self) -> set[str]:
        names = {self.fact}
        if self.operand.fact:
            names.add(self.operand.fact)
        return names

    def holds(self, memory: WorkingMemory) -> bool:
        fact = memory.get(self.fact)
        if self.op == "present":
            return (fact is not None) == bool(self.operand.literal)
        if self.op == "absent":
            return (fact is None) == bool(self.operand.literal)
        if fact is None:
            # A missing fact equals nothing, so "not equal" and "not in" hold for it.
            return self.op in ("ne", "not_in")
        ok, right = self.operand.resolve(memory)
        return ok and BINARY_OPS[self.op](fact.value, right)

    def describe(self) -> str:
        right = f"fact {self.operand.fact}" if self.operand.fact else repr(self.operand.literal)
        if self.operand.fact and self.operand.times != 1.0:
            right += f" x {self.operand.times:g}"
        return f"{self.fact} {self.op} {right}"


@dataclass(frozen=True)
class AnyOf(Condition):
    parts: tuple[Condition, ...]

    def facts(self) -> set[str]:
        return set().union(*(p.facts() for p in self.parts))

    def holds(self, memory: WorkingMemory) -> bool:
        return any(p.holds(memory) for p in self.parts)


@dataclass(frozen=True)
class AllOf(Condition):
    parts: tuple[Condition, ...]

    def facts(self) -> set[str]:
        return set().union(*(p.facts() for p in self.parts)) if self.parts else set()

    def holds(self, memory: WorkingMemory) -> bool:
        return all(p.holds(memory) for p in self.parts)


@dataclass(frozen=True)
class Not(Condition):
    part: Condition

    def facts(self) -> set[str]:
        return self.part.facts()

    def holds(self, memory: WorkingMemory) -> bool:
        return not self.part.holds(memory)


def parse_condition(raw: Any, where: str) -> Condition:
    if not isinstance(raw, dict):
        raise RuleSyntaxError(f"{where}: a condition must be a mapping, got {type(raw).__name__}")
    for combinator, cls in (("any", AnyOf), ("all", AllOf)):
        if combinator in raw:
            if len(raw) != 1 or not isinstance(raw[combinator], list) or not raw[combinator]:
                raise RuleSyntaxError(f"{where}: '{combinator}' takes a non-empty list and nothing beside it")
            return cls(tuple(parse_condition(p, f"{where}.{combinator}[{i}]") for i, p in enumerate(raw[combinator])))
    if "not" in raw:
        if len(raw) != 1:
            raise RuleSyntaxError(f"{where}: 'not' takes one condition and nothing beside it")
        return Not(parse_condition(raw["not"], f"{where}.not"))
    if "fact" not in raw:
        raise RuleSyntaxError(f"{where}: a condition needs 'fact', 'any', 'all' or 'not' (got {sorted(raw)})")
    ops = [k for k in raw if k != "fact"]
    known = set(BINARY_OPS) | set(UNARY_OPS)
    if len(ops) != 1 or ops[0] not in known:
        raise RuleSyntaxError(
            f"{where}: a test on fact '{raw['fact']}' needs exactly one operator of {sorted(known)}, got {ops}"
        )
    op = ops[0]
    return Test(str(raw["fact"]), op, _parse_operand(raw[op], op, where))


def _parse_operand(raw: Any, op: str, where: str) -> Operand:
    if op in UNARY_OPS:
        if not isinstance(raw, bool):
            raise RuleSyntaxError(f"{where}: '{op}' takes true or false")
        return Operand(literal=raw)
    if isinstance(raw, dict):
        extra = set(raw) - {"fact", "times"}
        if "fact" not in raw or extra:
            raise RuleSyntaxError(f"{where}: a fact operand is {{fact: NAME, times: K}}, got {sorted(raw)}")
        times = raw.get("times", 1.0)
        if not isinstance(times, (int, float)) or isinstance(times, bool):
            raise RuleSyntaxError(f"{where}: 'times' must be a number")
        return Operand(fact=str(raw["fact"]), times=float(times))
    if op in ("in", "not_in") and not isinstance(raw, list):
        raise RuleSyntaxError(f"{where}: '{op}' takes a list")
    return Operand(literal=raw)
