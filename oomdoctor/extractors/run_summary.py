"""What a trainer prints about the run it is starting: the per-device batch and the accumulation.

The Hugging Face Trainer's "***** Running training *****" banner (and accelerate's, diffusers' and
finetrainers' copies of it), kohya's sd-scripts summary. These are the values that ran, after every
override and default, so they come before what a pasted config says.
"""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding

NAME = "run_summary"
PRODUCES = {"train.batch_size", "train.grad_accum"}

_BATCH = [re.compile(r"Instantaneous batch size per device = (\d{1,6})"),
          re.compile(r"batch size per device / [^\n:]{1,20}: (\d{1,6})")]
_ACCUM = [re.compile(r"Gradient Accumulation steps = (\d{1,6})", re.IGNORECASE),
          re.compile(r"gradient accumulation steps / [^\n=]{1,30}= (\d{1,6})")]


def _one(patterns: list[re.Pattern], text: str) -> tuple[int, str] | None:
    found = sorted((m.start(), int(m.group(1)), m.group(0)) for p in patterns for m in p.finditer(text))
    values = {value for _, value, _ in found}
    if len(values) != 1 or not values.issubset(range(1, 1_000_000)):
        return None  # several runs with different settings in one paste: which one failed is not said
    return found[0][1], found[0][2]


def extract(text: str) -> Iterator[Finding]:
    from .config_keys import distinct

    text = distinct(text)
    for fact, patterns in (("train.batch_size", _BATCH), ("train.grad_accum", _ACCUM)):
        found = _one(patterns, text)
        if found:
            yield Finding(fact, found[0], found[1])
