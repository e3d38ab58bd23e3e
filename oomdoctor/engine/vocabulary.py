"""What rules may name: facts, values, conclusion kinds and their targets.

The engine knows no domain; the knowledge base hands it a vocabulary so that a
typo in a rule file fails at load with a suggestion instead of a silent dead rule.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .conditions import RuleSyntaxError


@dataclass(frozen=True)
class ConclusionKind:
    """An action a rule may take besides assert, e.g. ``conclude: {scenario: X, confidence: 0.8}``."""

    key: str
    weight: str
    default_weight: float = 1.0
    low: float = 0.0
    high: float = 1.0
    extra: tuple[str, ...] = ()


@dataclass
class Vocabulary:
    facts: set[str] = field(default_factory=set)
    # fact name -> predicate on values a rule may assert
    value_checks: dict[str, Callable[[Any], bool]] = field(default_factory=dict)
    conclusions: dict[str, ConclusionKind] = field(default_factory=dict)
    targets: dict[str, set[str]] = field(default_factory=dict)
    languages: tuple[str, ...] = ("en", "zh")

    @staticmethod
    def suggest(word: str, choices: Iterable[str]) -> str:
        close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
        return f" (did you mean '{close[0]}'?)" if close else ""

    def check_fact(self, name: str, where: str) -> None:
        if self.facts and name not in self.facts:
            raise RuleSyntaxError(f"{where}: unknown fact '{name}'{self.suggest(name, self.facts)}")

    def check_value(self, name: str, value: Any, where: str) -> None:
        check = self.value_checks.get(name)
        if check is not None and not check(value):
            raise RuleSyntaxError(f"{where}: {value!r} is not a valid value for fact '{name}'")

    def check_target(self, kind: str, target: str, where: str) -> None:
        known = self.targets.get(kind)
        if known is not None and target not in known:
            raise RuleSyntaxError(f"{where}: unknown {self.conclusions[kind].key} '{target}'{self.suggest(target, known)}")

    def check_text(self, text: Any, where: str) -> None:
        if not self.languages:
            return
        if not isinstance(text, dict):
            raise RuleSyntaxError(f"{where}: must give a text in each of {list(self.languages)}")
        missing = [lang for lang in self.languages if not isinstance(text.get(lang), str) or not text[lang].strip()]
        if missing:
            raise RuleSyntaxError(f"{where}: missing translation {missing}")
        extra = set(text) - set(self.languages)
        if extra:
            raise RuleSyntaxError(f"{where}: unknown language {sorted(extra)}")
