"""Working memory: named facts, each remembering where it came from."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator


@dataclass(frozen=True)
class Provenance:
    """Who put a fact in working memory: an extractor, an answer, a rule, a default."""

    kind: str
    name: str
    detail: str = ""

    def as_dict(self) -> dict:
        out = {"kind": self.kind, "name": self.name}
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass(frozen=True)
class Fact:
    name: str
    value: Any
    source: Provenance
    # Bumped on every change so that refraction can tell an old match from a new one.
    version: int = 0

    def as_dict(self) -> dict:
        return {"name": self.name, "value": self.value, "source": self.source.as_dict()}


# Sources that a user stated outrank what was guessed from text, which outranks defaults.
_RANK = {"default": 0, "estimator": 1, "extractor": 2, "rule": 2, "answer": 3}


@dataclass
class WorkingMemory:
    _facts: dict[str, Fact] = field(default_factory=dict)
    _clock: int = 0

    def get(self, name: str) -> Fact | None:
        return self._facts.get(name)

    def value(self, name: str, default: Any = None) -> Any:
        fact = self._facts.get(name)
        return default if fact is None else fact.value

    def __contains__(self, name: str) -> bool:
        return name in self._facts

    def __iter__(self) -> Iterator[Fact]:
        return iter(sorted(self._facts.values(), key=lambda f: f.version))

    def __len__(self) -> int:
        return len(self._facts)

    def assert_fact(self, name: str, value: Any, source: Provenance) -> Fact | None:
        """Store a fact; return it if working memory changed, None if not.

        A weaker source never overwrites a stronger one: a default must not undo
        what the user answered.
        """
        old = self._facts.get(name)
        if old is not None:
            if old.value == value:
                return None
            if _RANK.get(source.kind, 2) < _RANK.get(old.source.kind, 2):
                return None
        self._clock += 1
        fact = Fact(name, value, source, self._clock)
        self._facts[name] = fact
        return fact

    def retract(self, name: str) -> Fact | None:
        return self._facts.pop(name, None)

    def copy(self) -> "WorkingMemory":
        return WorkingMemory(dict(self._facts), self._clock)
