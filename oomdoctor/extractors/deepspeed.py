"""DeepSpeed: the JSON config (whole, cut off by the paste, or printed as a Python dict), the
well-known config file names that say the stage and the offload, and the engine's own log lines.

`"enabled": "auto"` and `"train_micro_batch_size_per_gpu": "auto"` are filled in by the trainer
and say nothing here; a "DeepSpeed version: 0.15.0" line of an environment dump is an installed
package, not a strategy; the memory estimator's table lists offload options side by side, none
of which is the run's.
"""
from __future__ import annotations

import functools
import json
import re
from typing import Any, Iterator

from ..knowledge import MAX_MAGNITUDE
from . import Finding, snippet, unknown

NAME = "deepspeed_config"
PRODUCES = {"dist.zero_stage", "dist.offload_optimizer", "dist.offload_param", "dist.pin_memory", "dist.strategy",
            "train.batch_size", "train.grad_accum", "train.precision", "train.optimizer", "train.grad_checkpointing"}

# Keys only a DeepSpeed config has; the first one found locates the object around it.
_ANCHOR = re.compile(r'["\'](?:zero_optimization|train_micro_batch_size_per_gpu|zero_allow_untested_optimizer|'
                     r'train_batch_size)["\']\s{0,8}:')
_MAX_OBJECT = 200_000
# A config cut off by the paste is a few KiB; repairing is tried on no more than this.
_MAX_REPAIR = 20_000
# Real configs nest a handful of levels; anything deeper is refused before json.loads could recurse on it.
MAX_DEPTH = 32


def enclosing_object(text: str, inside: int, limit: int = _MAX_OBJECT) -> str | None:
    """The JSON object around position `inside`: scan out to balanced braces, bounded."""
    start = object_start(text, inside, limit)
    return balanced_object(text, start, limit) if start is not None else None


def object_start(text: str, inside: int, limit: int = _MAX_OBJECT) -> int | None:
    depth = 0
    for i in range(inside, max(0, inside - limit) - 1, -1):
        ch = text[i]
        if ch == "}":
            depth += 1
        elif ch == "{":
            if depth == 0:
                return i
            depth -= 1
    return None


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


_PY_TOKEN = re.compile(r"""'((?:[^'\\\n]|\\.){0,2000})'|"(?:[^"\\\n]|\\.){0,2000}"|(?<![\w.])(True|False|None)(?![\w.])""")
_PY_WORDS = {"True": "true", "False": "false", "None": "null"}


def _python_to_json(raw: str) -> str:
    """A printed Python dict as JSON: single-quoted strings, True/False/None. One regex pass, no eval."""
    def convert(m: re.Match) -> str:
        if m.group(2):
            return _PY_WORDS[m.group(2)]
        if m.group(1) is not None:
            return '"' + m.group(1).replace('"', '\\"') + '"'
        return m.group(0)
    return _PY_TOKEN.sub(convert, raw)


def repair_truncated(raw: str, limit: int = _MAX_OBJECT) -> tuple[str, bool] | None:
    """A JSON object cut off by the paste, closed at the last complete member. (text, was_cut)."""
    stack: list[str] = []
    safe, safe_stack = None, None
    in_string, escaped = False, False
    for i, ch in enumerate(raw[:limit]):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
            if len(stack) > MAX_DEPTH:
                return None
            safe, safe_stack = i + 1, list(stack)
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
            if not stack:
                return raw[: i + 1], False
        elif ch == ",":
            safe, safe_stack = i, list(stack)
    if safe is None or not safe_stack:
        return None
    return raw[:safe].rstrip().rstrip(",") + "".join(reversed(safe_stack)), True


_PLACEHOLDER = re.compile(r'(:\s{0,8})([A-Za-z_$][A-Za-z0-9_$]{0,60})(\s{0,8}[,}\n])')
_TRAILING = re.compile(r",(\s{0,40}[}\]])")


def _loads(raw: str | None) -> Any:
    if not raw:
        return None
    for attempt in (raw, _python_to_json(raw)):
        try:
            return json.loads(attempt)
        except ValueError:
            pass
        keep = {"true", "false", "null"}
        # Templates hold placeholders (`"train_batch_size" : CONFIG_BATCH_SIZE`) and trailing commas.
        lenient = _PLACEHOLDER.sub(lambda m: m.group(0) if m.group(2) in keep else m.group(1) + "null" + m.group(3), attempt)
        lenient = _TRAILING.sub(r"\1", lenient)
        try:
            return json.loads(lenient)
        except ValueError:
            continue
    return None


@functools.lru_cache(maxsize=4)
def parse_config(text: str) -> tuple[dict, bool] | None:
    """The DeepSpeed config in the text and whether the paste cut it off (cached: three readers ask)."""
    anchor = _ANCHOR.search(text)
    if not anchor:
        return None
    start = object_start(text, anchor.start())
    if start is None:
        return None
    whole = balanced_object(text, start)
    config = _loads(whole) if whole else None
    if isinstance(config, dict):
        return config, False
    repaired = repair_truncated(_python_to_json(text[start:start + _MAX_REPAIR]))
    if repaired:
        config = _loads(repaired[0])
        if isinstance(config, dict):
            return config, repaired[1]
    inner = re.search(r'"zero_optimization"\s{0,8}:\s{0,8}\{', text)
    if inner:  # the whole file did not parse: read the ZeRO section on its own
        section = _loads(balanced_object(text, inner.end() - 1))
        if isinstance(section, dict):
            return {"zero_optimization": section}, True
    return None


def _count(value: Any) -> bool:
    # JSON true is a Python bool, and bool is an int: "stage": true is no stage; 10**400 is no count either.
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_MAGNITUDE


def _device(section: Any) -> str | None:
    if not isinstance(section, dict) or "device" not in section:
        return None
    device = str(section["device"]).lower()
    return device if device in ("cpu", "nvme", "none") else None


_OPTIMIZERS = {"adam": "adamw", "adamw": "adamw", "cpuadam": "adamw", "fusedadam": "adamw", "adam8bit": "adamw_8bit",
               "adamw8bit": "adamw_8bit", "lion": "lion", "sgd": "sgd"}


def from_config(config: dict, cut: bool, world: int | None = None) -> Iterator[Finding]:
    detail = "DeepSpeed config " + json.dumps(config)[:100]
    yield Finding("dist.strategy", "deepspeed", detail)
    zero = config.get("zero_optimization")
    if isinstance(zero, dict):
        stage = zero.get("stage")
        if _count(stage) and 0 <= stage <= 3:
            yield Finding("dist.zero_stage", stage, detail)
        for key, fact in (("offload_optimizer", "dist.offload_optimizer"), ("offload_param", "dist.offload_param")):
            if key not in zero:
                continue
            device = _device(zero[key])
            if device:
                yield Finding(fact, device, detail)
            else:
                yield Finding(fact, unknown(), f'"{key}" is cut off or names no device')
        pins = {zero[k]["pin_memory"] for k in ("offload_optimizer", "offload_param")
                if isinstance(zero.get(k), dict) and _device(zero[k]) not in (None, "none") and "pin_memory" in zero[k]}
        if len(pins) == 1 and isinstance(next(iter(pins)), bool):
            yield Finding("dist.pin_memory", next(iter(pins)), detail)
    micro = config.get("train_micro_batch_size_per_gpu")
    accum = config.get("gradient_accumulation_steps")
    total = config.get("train_batch_size")
    if _count(micro) and micro > 0:
        yield Finding("train.batch_size", micro, "train_micro_batch_size_per_gpu")
    elif _count(total) and _count(accum) and world and accum > 0 and total % (accum * world) == 0 and total >= accum * world:
        # DeepSpeed's train_batch_size is global: micro batch x accumulation x ranks.
        yield Finding("train.batch_size", total // (accum * world), f"train_batch_size {total} over {accum} x {world} ranks")
    elif _count(total):
        yield Finding("train.batch_size", unknown(total), "train_batch_size is the global batch")
    if _count(accum) and accum > 0:
        yield Finding("train.grad_accum", accum, "gradient_accumulation_steps")
    yield from _precision(config)
    optimizer = config.get("optimizer")
    if isinstance(optimizer, dict) and isinstance(optimizer.get("type"), str):
        name = _OPTIMIZERS.get(re.sub(r"[^a-z0-9]", "", optimizer["type"].lower()))
        if name:
            yield Finding("train.optimizer", name, f'"optimizer": {{"type": "{optimizer["type"]}"}}')
    if isinstance(config.get("activation_checkpointing"), dict):
        # deepspeed.checkpointing's settings; Hugging Face models never call it, so it turns nothing on.
        yield Finding("train.grad_checkpointing", unknown(True), '"activation_checkpointing" section')


def _precision(config: dict) -> Iterator[Finding]:
    states = {}
    for key, name in (("bf16", "bf16"), ("bfloat16", "bf16"), ("fp16", "fp16")):
        section = config.get(key)
        if isinstance(section, dict) and "enabled" in section:
            states[name] = section["enabled"]
    on = [name for name, enabled in states.items() if enabled is True]
    if len(on) == 1:
        yield Finding("train.precision", on[0], f'"{on[0]}": {{"enabled": true}}')
    elif not on and states:
        # "auto" is the trainer's choice; false rules that one out.
        ruled_out = {name for name, enabled in states.items() if enabled is False}
        if any(enabled == "auto" for enabled in states.values()) and not ruled_out:
            yield Finding("train.precision", unknown(), '"enabled": "auto"')
        elif ruled_out:
            yield Finding("train.precision", unknown(*ruled_out), '"enabled": false')


# Config files named for what they hold: ds_z3_offload_config.json, zero3_offload.yaml, ds_config_zero2.json,
# zero3_bf16_cpuoffload_all.json, ms-swift's default-zero2 / zero3-offload.
_NAME_HIT = re.compile(r"zero|ds_z", re.IGNORECASE)
_NAME_STAGE = re.compile(r"(?:zero|(?<![a-z])z)[-_]?(?:stage)?[-_]?([0-3])(?![0-9])", re.IGNORECASE)
# In words: "deepspeed z3 offload", "ZeRO-3 + offload".
_PROSE = re.compile(r"(?<![A-Za-z])(?:deepspeed|ds)[ _-]{0,2}(?:zero|z)[ _-]?([0-3])(?![0-9])([ _+-]{0,3}offload)?", re.IGNORECASE)


def _named_configs(text: str) -> list[tuple[int, bool | None, bool, str]]:
    """(stage, offloads the optimizer, offloads the parameters, name) for each config named in the text;
    a stage said in words says nothing of offload unless it says "offload"."""
    found = []
    covered = -1
    for m in _NAME_HIT.finditer(text):
        if m.start() < covered:
            continue
        # the file name or path around the hit, found by walking out (bounded) rather than by a lazy pattern
        start, end = m.start(), m.end()
        while start > 0 and m.start() - start < 120 and (text[start - 1].isalnum() or text[start - 1] in "_./-"):
            start -= 1
        while end < len(text) and end - m.end() < 60 and (text[end].isalnum() or text[end] in "_.-"):
            end += 1
        covered = end
        token = text[start:end]
        name = token.rsplit("/", 1)[-1].lower()
        stage = _NAME_STAGE.search(name)
        if not stage or not (name.endswith((".json", ".yaml", ".yml")) or re.fullmatch(r"(?:default-)?zero[0-3](?:[-_]offload)?", name)):
            continue
        offload = "offload" in name
        params = offload and bool(re.search(r"offload[-_]?(?:all|param)|param[-_]?offload", name))
        found.append((int(stage.group(1)), offload, params, token))
    for m in _PROSE.finditer(text):
        found.append((int(m.group(1)), True if m.group(2) else None, False, m.group(0)))
    return found


_VERSION_LINE = re.compile(r"^[^\n]{0,40}deepspeed(?:[ \t]{0,4}version)?[ \t]{0,4}(?::|==|[ \t])[ \t]{0,4}v?\d{1,3}\.\d{1,3}[^\n]{0,40}$",
                           re.IGNORECASE | re.MULTILINE)
_ESTIMATE = re.compile(r"Estimated memory needed for params, optim states and gradients")
_ZERO_HEADER = re.compile(r"-{3,}ZERO ([0-3])-{3,}")
_ENGINE_OPTIMIZER = re.compile(r"DeepSpeed Basic Optimizer = (\w{1,40})")
_ENGINE_FP16 = re.compile(r"Creating fp16 (?:unfused |fused )?optimizer")


def extract(text: str) -> Iterator[Finding]:
    said: set[str] = set()

    def say(finding: Finding) -> Iterator[Finding]:
        if finding.name not in said:
            said.add(finding.name)
            yield finding

    parsed = parse_config(text)
    if parsed:
        from .gpu_count import launched

        for finding in from_config(*parsed, world=launched(text)):
            yield from say(finding)
    from .config_keys import distinct

    text = distinct(text)  # names, version lines and engine messages: the distinct lines are enough
    estimate = _ESTIMATE.search(text)
    if estimate:
        yield from say(Finding("dist.strategy", "deepspeed", snippet(text, estimate.start(), estimate.end())))
        header = _ZERO_HEADER.search(text)
        if header:
            yield from say(Finding("dist.zero_stage", int(header.group(1)), header.group(0)))
        for fact in ("dist.offload_optimizer", "dist.offload_param"):
            yield from say(Finding(fact, unknown(), "the estimator lists every offload option"))
    named = _named_configs(text)
    if named:
        stages = {stage for stage, *_ in named}
        detail = ", ".join(sorted({name for *_, name in named}))[:160]
        yield from say(Finding("dist.strategy", "deepspeed", detail))
        if len(stages) == 1:
            yield from say(Finding("dist.zero_stage", stages.pop(), detail))
        else:
            yield from say(Finding("dist.zero_stage", unknown(), "configs of different stages are named"))
        offloads = [(offload, params) for _, offload, params, _ in named if offload is not None]
        if offloads and all(offload for offload, _ in offloads):
            yield from say(Finding("dist.offload_optimizer", "cpu", detail))
            if all(params for _, params in offloads):
                yield from say(Finding("dist.offload_param", "cpu", detail))
    engine = _ENGINE_OPTIMIZER.search(text)
    if engine:
        name = _OPTIMIZERS.get(engine.group(1).lower())
        if name:
            yield from say(Finding("train.optimizer", name, engine.group(0)))
    fp16 = _ENGINE_FP16.search(text)
    if fp16:
        yield from say(Finding("train.precision", "fp16", fp16.group(0)))
    if "dist.strategy" not in said:
        mentions = len(re.findall(r"deepspeed", text, re.IGNORECASE))
        versions = sum(len(re.findall(r"deepspeed", m.group(0), re.IGNORECASE)) for m in _VERSION_LINE.finditer(text))
        if mentions and mentions == versions:
            yield Finding("dist.strategy", unknown("deepspeed"), "DeepSpeed is only an installed package here")
