"""DeepSpeed JSON: the ZeRO stage, offload targets and pinned memory."""
from __future__ import annotations

import json
import re
from typing import Any, Iterator

from ..knowledge import MAX_MAGNITUDE
from . import Finding

NAME = "deepspeed_config"
PRODUCES = {"dist.zero_stage", "dist.offload_optimizer", "dist.offload_param", "dist.pin_memory", "dist.strategy",
            "train.batch_size", "train.grad_accum", "train.precision"}

_ANCHOR = re.compile(r'"zero_optimization"\s{0,8}:\s{0,8}\{')
_MAX_OBJECT = 200_000


def enclosing_object(text: str, inside: int, limit: int = _MAX_OBJECT) -> str | None:
    """The JSON object around position `inside`: scan out to balanced braces, bounded."""
    depth, start = 0, None
    low = max(0, inside - limit)
    for i in range(inside, low - 1, -1):
        ch = text[i]
        if ch == "}":
            depth += 1
        elif ch == "{":
            if depth == 0:
                start = i
                break
            depth -= 1
    if start is None:
        return None
    return balanced_object(text, start, limit)


# Real configs nest a handful of levels; anything deeper is refused before json.loads
# could recurse on it.
MAX_DEPTH = 32


def balanced_object(text: str, start: int, limit: int = _MAX_OBJECT) -> str | None:
    depth, in_string, escaped = 0, False, False
    for i in range(start, min(len(text), start + limit)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
            if depth > MAX_DEPTH:
                return None
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return text[start: i + 1]
    return None


def _count(value: Any) -> bool:
    # JSON true is a Python bool, and bool is an int: "stage": true is no stage; 10**400 is no count either.
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_MAGNITUDE


def _device(section: Any) -> str | None:
    if not isinstance(section, dict):
        return None
    device = str(section.get("device", "none")).lower()
    return device if device in ("cpu", "nvme", "none") else None


# Configs pasted from templates hold placeholders (`"train_batch_size" : CONFIG_BATCH_SIZE`) and trailing
# commas; both are read as JSON after the placeholder becomes null and the comma goes.
_PLACEHOLDER = re.compile(r'(:\s{0,8})([A-Za-z_$][A-Za-z0-9_$]{0,60})(\s{0,8}[,}\n])')
_TRAILING = re.compile(r",(\s{0,40}[}\]])")


def _loads(raw: str | None) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        pass
    keep = {"true", "false", "null"}
    lenient = _PLACEHOLDER.sub(lambda m: m.group(0) if m.group(2) in keep else m.group(1) + "null" + m.group(3), raw)
    lenient = _TRAILING.sub(r"\1", lenient)
    try:
        return json.loads(lenient)
    except ValueError:
        return None


def extract(text: str) -> Iterator[Finding]:
    anchor = _ANCHOR.search(text)
    if not anchor:
        return
    config = _loads(enclosing_object(text, anchor.start()))
    if not isinstance(config, dict) or "zero_optimization" not in config:
        # The whole file did not parse (cut off, or not JSON around it): read the ZeRO section on its own.
        inner = _loads(balanced_object(text, anchor.end() - 1))
        config = {"zero_optimization": inner} if isinstance(inner, dict) else None
    if not isinstance(config, dict):
        return
    zero = config.get("zero_optimization")
    if not isinstance(zero, dict):
        return
    detail = '"zero_optimization": ' + json.dumps(zero)[:120]
    yield Finding("dist.strategy", "deepspeed", detail)
    stage = zero.get("stage")
    if _count(stage) and 0 <= stage <= 3:
        yield Finding("dist.zero_stage", stage, detail)
    for key, fact in (("offload_optimizer", "dist.offload_optimizer"), ("offload_param", "dist.offload_param")):
        device = _device(zero.get(key))
        if device:
            yield Finding(fact, device, detail)
            if device != "none" and isinstance(zero[key].get("pin_memory"), bool):
                yield Finding("dist.pin_memory", zero[key]["pin_memory"], detail)
    micro = config.get("train_micro_batch_size_per_gpu")
    if _count(micro) and micro > 0:
        yield Finding("train.batch_size", micro, "train_micro_batch_size_per_gpu")
    accum = config.get("gradient_accumulation_steps")
    if _count(accum) and accum > 0:
        yield Finding("train.grad_accum", accum, "gradient_accumulation_steps")
    for key in ("bf16", "fp16"):
        section = config.get(key)
        if isinstance(section, dict) and section.get("enabled") is True:
            yield Finding("train.precision", key, f'"{key}": {{"enabled": true}}')
