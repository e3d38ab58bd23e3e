"""From pasted text to facts: run every extractor, first finding of a fact wins."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from .extractors import Finding, Unknown, registry
from .knowledge import KnowledgeBase

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Observation:
    name: str
    value: object
    extractor: str
    detail: str


def observe(text: str, kb: KnowledgeBase) -> list[Observation]:
    """Facts the text shows. Extractors run in registry order; earlier ones are
    more specific (an OOM message's capacity beats a GPU named in prose)."""
    found: dict[str, Observation] = {}
    ruled_out: dict[str, list[Unknown]] = {}
    for extractor in registry():
        try:
            for finding in extractor.run(text, kb):
                if isinstance(finding.value, Unknown):
                    ruled_out.setdefault(finding.name, []).append(finding.value)
                elif not any(rule.forbids(finding.value) for rule in ruled_out.get(finding.name, ())):
                    _keep(found, extractor.name, finding, kb)
        except (ValueError, KeyError, TypeError, RecursionError) as exc:  # one bad parse must not lose the rest
            log.warning("extractor %s failed: %s", extractor.name, exc)
    return list(found.values())


def _keep(found: dict[str, Observation], extractor: str, finding: Finding, kb: KnowledgeBase) -> None:
    spec = kb.facts.get(finding.name)
    if spec is None:
        raise KeyError(f"extractor {extractor} produced unknown fact {finding.name}")
    value = finding.value
    if spec.type == "number" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not spec.accepts(value) or finding.name in found:
        return
    found[finding.name] = Observation(finding.name, value, extractor, finding.detail)
