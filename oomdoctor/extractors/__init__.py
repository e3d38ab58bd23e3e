"""Extractors turn pasted text into facts. Each module does one parsing job.

Every extractor runs in time linear in its input: patterns are anchored on
literal prefixes, quantifiers are bounded, nothing nests.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterable


@dataclass(frozen=True)
class Finding:
    name: str
    value: Any
    # The text the value was read from, shown in the explanation.
    detail: str = ""


@dataclass(frozen=True)
class Extractor:
    name: str
    produces: frozenset[str]
    extract: Callable[..., Iterable[Finding]]
    # Extractors driven by the knowledge base (symptoms, settings) take it as a second argument.
    uses_knowledge: bool = False

    def run(self, text: str, kb=None) -> Iterable[Finding]:
        if not self.uses_knowledge:
            return self.extract(text)
        if kb is None:
            from .. import knowledge
            kb = knowledge.default()
        return self.extract(text, kb)


def snippet(text: str, start: int, end: int, limit: int = 160) -> str:
    piece = " ".join(text[start:end].split())
    return piece if len(piece) <= limit else piece[: limit - 1] + "…"


@functools.lru_cache(maxsize=1)
def registry() -> tuple[Extractor, ...]:
    """All extractors, in the order they run; later ones refine earlier ones."""
    from . import (config_keys, cuda_oom, deepspeed, free_mem, host_oom, model_config, nvidia_smi, parameters,
                   progress, sentence, symptoms)

    modules = (symptoms, cuda_oom, host_oom, nvidia_smi, free_mem, progress, config_keys, deepspeed,
               model_config, parameters, sentence)
    return tuple(Extractor(m.NAME, frozenset(m.PRODUCES), m.extract, hasattr(m, "produced_facts")) for m in modules)
