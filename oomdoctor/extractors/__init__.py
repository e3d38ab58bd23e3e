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
class Unknown:
    """The value of a Finding that settles a fact as not known from this text.

    A config that says `deepspeed: None`, a count held in a shell variable, two pasted configs
    that disagree: the text speaks of the fact, and what it says rules values out. Extractors
    that run later may not set the fact to an excluded value (to any value when `excluded` is
    None), so a word elsewhere in the paste cannot fill in what the config left open.
    """
    excluded: frozenset | None = None

    def forbids(self, value: Any) -> bool:
        if self.excluded is None:
            return True
        return (tuple(value) if isinstance(value, list) else value) in self.excluded


def unknown(*excluded: Any) -> Unknown:
    return Unknown(frozenset(excluded) if excluded else None)


@dataclass(frozen=True)
class Extractor:
    name: str
    produces: frozenset[str]
    extract: Callable[..., Iterable[Finding]]
    # Extractors driven by the knowledge base (symptoms, settings) take it as a second argument.
    uses_knowledge: bool = False

    def run(self, text: str, kb=None) -> Iterable[Finding]:
        from .comments import without_disabled

        # A commented-out setting or line of code is off, whichever reader comes across it.
        text = without_disabled(text)
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
    from . import (config_keys, context_length, cuda_oom, deepspeed, free_mem, gpu_card, gpu_count, host_oom, launch,
                   model_config, named_settings, nvidia_smi, parameters, progress, run_summary, sentence, symptoms,
                   unsloth, verl)

    # Config readers come before the phrase readers: `load_in_4bit: False` must rule NF4 out before a
    # symptom phrase finds "load_in_4bit" in it.
    # verl's settings are read at their full paths before the generic readers take a leaf for another meaning.
    # A key named in a sentence ("num_generations 4", "load_in_4bit 是 False") is as explicit as a config line.
    modules = (run_summary, verl, unsloth, config_keys, deepspeed, launch, named_settings, symptoms, cuda_oom, host_oom,
               nvidia_smi, free_mem, progress,
               model_config, parameters, gpu_count, gpu_card, context_length, sentence)
    return tuple(Extractor(m.NAME, frozenset(m.PRODUCES), m.extract, hasattr(m, "produced_facts")) for m in modules)
