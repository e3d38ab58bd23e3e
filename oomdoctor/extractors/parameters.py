"""Parameter counts that trainers print: the model's size, and whether only adapters train.

peft's ``trainable params: 4,194,304 || all params: 6,742,609,920 || trainable%: 0.0622``,
MLX's ``Total parameters 7243.436M`` / ``Trainable parameters 1.704M``, EasyDeL's
``Model Contain 1.100048384 Billion Parameters``.
"""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding, snippet

NAME = "parameter_counts"
PRODUCES = {"model.params_b", "train.method"}

_PEFT = re.compile(r"trainable params:\s{0,2}([\d,]{1,20})\s{0,2}\|\|\s{0,2}all params:\s{0,2}([\d,]{1,20})", re.IGNORECASE)
_MLX_TOTAL = re.compile(r"Total parameters\s{1,4}(\d{1,9}(?:\.\d{1,6})?)M\b")
_MLX_TRAINABLE = re.compile(r"Trainable parameters\s{1,4}(\d{1,9}(?:\.\d{1,6})?)M\b")
_BILLION = re.compile(r"Model Contain\s{1,4}(\d{1,4}(?:\.\d{1,12})?)\s{1,4}Billion Parameters", re.IGNORECASE)
# Adapters train well under 10% of the weights; full fine-tuning trains (nearly) all of them.
_ADAPTER_SHARE = 0.1
_FULL_SHARE = 0.9


def _method(trainable: float, total: float) -> str | None:
    if total <= 0:
        return None
    share = trainable / total
    return "lora" if share < _ADAPTER_SHARE else "full" if share >= _FULL_SHARE else None


def extract(text: str) -> Iterator[Finding]:
    peft = _PEFT.search(text)
    if peft:
        trainable, total = (int(g.replace(",", "")) for g in peft.groups())
        detail = snippet(text, peft.start(), peft.end())
        if total:
            yield Finding("model.params_b", round(total / 1e9, 3), detail)
            method = _method(trainable, total)
            if method:
                yield Finding("train.method", method, detail)
        return
    total = _MLX_TOTAL.search(text)
    if total:
        detail = snippet(text, total.start(), total.end())
        yield Finding("model.params_b", round(float(total.group(1)) / 1e3, 3), detail)
        trainable = _MLX_TRAINABLE.search(text)
        if trainable:
            method = _method(float(trainable.group(1)), float(total.group(1)))
            if method:
                yield Finding("train.method", method, snippet(text, trainable.start(), trainable.end()))
        return
    billion = _BILLION.search(text)
    if billion:
        yield Finding("model.params_b", round(float(billion.group(1)), 3), snippet(text, billion.start(), billion.end()))
