"""Unsloth's training banner: the per-device batch and the accumulation it prints when training starts.

The banner (unsloth/models/llama.py, the patched inner training loop) prints
``Batch size per device = B | Gradient accumulation steps = G`` and then the total ``B x G x GPUs``; older
releases printed ``Total batch size = T`` on its own line. Only the per-device figure is the micro-batch: the
total is what the other readers must not take for it.
"""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding

NAME = "unsloth"
PRODUCES = {"train.batch_size", "train.grad_accum"}

_BANNER = re.compile(r"==\(\(====\)\)==[ \t]{1,3}Unsloth\b")
_PER_DEVICE = re.compile(r"Batch size per device = ([\d,]{1,9})[ \t]{0,3}\|[ \t]{0,3}Gradient [Aa]ccumulation steps = (\d{1,6})")


def _count(text: str) -> int | None:
    digits = text.replace(",", "")
    return int(digits) if digits.isdigit() and int(digits) > 0 else None


def extract(text: str) -> Iterator[Finding]:
    if not _BANNER.search(text):
        return
    values = {(m.group(1), m.group(2)) for m in _PER_DEVICE.finditer(text)}
    if len(values) != 1:
        return
    batch, accum = values.pop()
    detail = f"Batch size per device = {batch} | Gradient accumulation steps = {accum}"
    if (b := _count(batch)) is not None:
        yield Finding("train.batch_size", b, detail)
    if (g := _count(accum)) is not None:
        yield Finding("train.grad_accum", g, detail)
