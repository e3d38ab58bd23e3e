"""From pasted text to facts: run every extractor, first finding of a fact wins.

Only admissible values enter (`admissible`): a value its fact's spec accepts and the
estimator can hold. A ZeRO stage of 4 or a GPU of 0 GiB is no set-up that can run; were
it kept, every later estimate of the consultation would refuse it.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Iterator

from .estimate.setup import OPTIONAL_POSITIVE_INTS, POSITIVE_INTS, Setup, is_count
from .estimate.whatif import FIELDS
from .extractors import Finding, Unknown, registry
from .knowledge import KnowledgeBase

log = logging.getLogger(__name__)

# Setup fields that take a tuple of module names; facts hold lists. A model has a handful of
# distinct linear modules, so more names than this are no list of them.
_TUPLES = ("lora_targets", "modules_to_save")
_DIVIDE_THE_GPUS = ("context_parallel", "tensor_parallel")
MAX_NAMES, MAX_NAME_CHARS = 64, 200


class OutOfTime(Exception):
    """Reading the text would take longer than the time the caller allowed (`time_budget`)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"reading the text took longer than {seconds:g} s")
        self.seconds = seconds


# (deadline on the monotonic clock, the seconds allowed); None: no limit (the CLI, tests).
_budget: ContextVar[tuple[float, float] | None] = ContextVar("oomdoctor_time_budget", default=None)


@contextmanager
def time_budget(seconds: float, started: float | None = None) -> Iterator[None]:
    """Within this block `observe` stops with OutOfTime once `seconds` have passed since
    `started` (now by default). It checks between extractors, each linear in the text, so
    it stops at most one extractor's time late (about 1 s for a 16 MiB message)."""
    start = time.monotonic() if started is None else started
    token = _budget.set((start + seconds, seconds) if seconds > 0 else None)
    try:
        yield
    finally:
        _budget.reset(token)


def _on_time() -> None:
    budget = _budget.get()
    if budget is not None and time.monotonic() > budget[0]:
        raise OutOfTime(budget[1])


@dataclass(frozen=True)
class Observation:
    name: str
    value: object
    extractor: str
    detail: str


def refusal(name: str, value: Any, counts: bool = True) -> str | None:
    """Why the estimator cannot hold this value of this fact, in its own words; None when it can.

    Asks the estimator's `Setup` itself, one field at a time, so its checks are the only ones.
    With `counts` False a count below 1 passes: the estimator sets such a count aside from
    the facts itself and says so in its assumptions ("batch_size: 0" in a pasted config).
    """
    field = FIELDS.get(name)
    if field is None or (not counts and field in POSITIVE_INTS + OPTIONAL_POSITIVE_INTS):
        return None
    if field in _TUPLES:
        # Setup only checks that it is no single string; the estimator then reads each as a name.
        if not (isinstance(value, (list, tuple)) and len(value) <= MAX_NAMES
                and all(isinstance(name, str) and len(name) <= MAX_NAME_CHARS for name in value)):
            return f"{field} must be a list of at most {MAX_NAMES} module names"
        value = tuple(value)
    # A parallel degree is checked against the GPU count only where the set-up is whole (from_facts sets
    # aside one that does not divide it, and says so): alone, it is given as many GPUs as it names.
    alone = {"num_gpus": value} if field in _DIVIDE_THE_GPUS and is_count(value) else {}
    try:
        Setup(model=None, **{field: value}, **alone)
    except (ValueError, TypeError) as exc:
        return str(exc)
    return None


def admissible(name: str, value: Any, kb: KnowledgeBase) -> bool:
    """Whether a value may stand for a fact in a consultation: a known fact, a value its spec
    accepts, and one the estimator can hold."""
    spec = kb.facts.get(name)
    return spec is not None and spec.accepts(value) and refusal(name, value, counts=False) is None


def observe(text: str, kb: KnowledgeBase) -> list[Observation]:
    """Facts the text shows. Extractors run in registry order; earlier ones are
    more specific (an OOM message's capacity beats a GPU named in prose)."""
    found: dict[str, Observation] = {}
    ruled_out: dict[str, list[Unknown]] = {}
    for extractor in registry():
        _on_time()
        try:
            for finding in extractor.run(text, kb):
                if isinstance(finding.value, Unknown):
                    ruled_out.setdefault(finding.name, []).append(finding.value)
                elif not any(rule.forbids(finding.value) for rule in ruled_out.get(finding.name, ())):
                    _keep(found, extractor.name, finding, kb)
        except Exception as exc:  # noqa: BLE001  one bad parse (a config of zero dimensions) must not lose the rest
            log.warning("extractor %s failed: %s: %s", extractor.name, type(exc).__name__, str(exc)[:200])
    return list(found.values())


def _keep(found: dict[str, Observation], extractor: str, finding: Finding, kb: KnowledgeBase) -> None:
    spec = kb.facts.get(finding.name)
    if spec is None:
        raise KeyError(f"extractor {extractor} produced unknown fact {finding.name}")
    value = finding.value
    if spec.type == "number" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if finding.name in found or not admissible(finding.name, value, kb):
        return
    found[finding.name] = Observation(finding.name, value, extractor, finding.detail)
