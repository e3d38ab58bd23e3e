"""The agenda: rules whose conditions hold, waiting to fire, in a fixed order."""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from .rules import Rule


@dataclass(frozen=True)
class Activation:
    rule: Rule
    # (fact name, version or None when absent) for every fact the rule looked at:
    # the identity refraction remembers.
    signature: tuple[tuple[str, int | None], ...]

    def key(self) -> tuple[int, int]:
        # Higher salience first; equal salience falls back to load order.
        return (-self.rule.salience, self.rule.order)


class Agenda:
    def __init__(self) -> None:
        self._heap: list[tuple[tuple[int, int], int, Activation]] = []
        self._live: dict[str, Activation] = {}
        self._pushed = 0

    def __len__(self) -> int:
        return len(self._live)

    def put(self, activation: Activation) -> None:
        self._live[activation.rule.id] = activation
        self._pushed += 1
        heapq.heappush(self._heap, (activation.key(), self._pushed, activation))

    def drop(self, rule_id: str) -> None:
        self._live.pop(rule_id, None)

    def next(self) -> Activation | None:
        while self._heap:
            _, _, activation = heapq.heappop(self._heap)
            if self._live.get(activation.rule.id) is activation:
                del self._live[activation.rule.id]
                return activation
        return None
