"""Plain sentences: "llama3 8b lora bs 4 on a 4090", "Qwen2.5-7B 全参数微调, A100 40G".

Model and GPU names are matched against the catalogs; the rest are short
patterns in English and Chinese for the settings people state in words.
"""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding, snippet

NAME = "sentence"
PRODUCES = {"model.name", "model.params_b", "gpu.name", "gpu.memory_gib", "train.method", "train.batch_size",
            "train.seq_len", "dist.num_gpus", "train.grad_checkpointing", "model.load_dtype", "dist.zero_stage",
            "dist.strategy", "train.objective", "log.notebook", "log.memory_grows", "train.optimizer",
            "train.precision", "lora.rank"}

_I = re.IGNORECASE
_PATTERNS: list[tuple[str, re.Pattern, object]] = [
    ("train.method", re.compile(r"\bq-?lora\b", _I), "qlora"),
    ("train.method", re.compile(r"\blora\b|低秩", _I), "lora"),
    ("train.method", re.compile(r"\bfull[- ]?(?:parameter[- ])?(?:fine[- ]?tun\w{0,4}|ft|sft|training)\b|全参|全量|\bfull\b", _I), "full"),
    ("train.method", re.compile(r"\bfreeze\b|冻结", _I), "freeze"),
    ("train.batch_size", re.compile(r"\b(?:micro[- _]?)?(?:bs|batch[- _]?size|batch|mbs)\s{0,3}(?:=|:|of|为|是)?\s{0,3}(\d{1,4})\b", _I), int),
    ("train.batch_size", re.compile(r"(?:批大小|批次大小|批量大小|batch)\s{0,3}(?:=|:|：|为|是)?\s{0,3}(\d{1,4})", _I), int),
    ("train.seq_len", re.compile(r"\b(?:seq(?:uence)?[- _]?(?:len(?:gth)?)?|max[- _]?len(?:gth)?|ctx|context(?:[- _]length)?|cutoff[- _]?len)\s{0,3}(?:=|:|of|为)?\s{0,3}(\d{1,3}(?:,\d{3})?|\d{1,6})\s{0,2}(k)?\b", _I), "seq"),
    ("train.seq_len", re.compile(r"(?:序列长度|长度|上下文)\s{0,3}(?:=|:|：|为|是)?\s{0,3}(\d{1,6})\s{0,2}(k)?", _I), "seq"),
    ("train.seq_len", re.compile(r"\b(\d{1,3})\s{0,1}(k)\s{0,2}(?:context|ctx|tokens|seq(?:uence)?s?|长度|上下文)", _I), "seq"),
    ("dist.num_gpus", re.compile(r"\b(\d{1,3})\s{0,2}(?:x|×|\*)\s{0,2}(?=[A-Za-z]{0,8}\s{0,1}[AHLTVPB]?\d{2,4})", _I), int),
    ("dist.num_gpus", re.compile(r"\b(\d{1,3})\s{0,2}(?:gpus?|cards?|卡|张卡|块卡|块显卡|张显卡)", _I), int),
    ("train.grad_checkpointing", re.compile(r"(?<!no )(?<!without )(?:gradient|grad|activation)[- _]?checkpointing|梯度检查点|重计算", _I), True),
    ("model.load_dtype", re.compile(r"\b4[- ]?bit\b|\bnf4\b|4比特|四比特", _I), "nf4"),
    ("model.load_dtype", re.compile(r"\b8[- ]?bit\b(?!\s{0,2}(?:adam|optim))|\bint8\b", _I), "int8"),
    ("dist.zero_stage", re.compile(r"\bzero[- _]?(?:stage[- _]?)?([0-3])\b", _I), int),
    ("dist.strategy", re.compile(r"\bfsdp\b", _I), "fsdp"),
    ("dist.strategy", re.compile(r"\bdeepspeed\b", _I), "deepspeed"),
    ("dist.strategy", re.compile(r"\bddp\b|DistributedDataParallel", _I), "ddp"),
    ("train.objective", re.compile(r"\bdpo\b", _I), "dpo"),
    ("train.objective", re.compile(r"\bkto\b", _I), "kto"),
    ("train.objective", re.compile(r"\bppo\b|\brlhf\b", _I), "ppo"),
    ("train.objective", re.compile(r"\bgrpo\b", _I), "grpo"),
    ("train.objective", re.compile(r"\borpo\b", _I), "orpo"),
    ("log.notebook", re.compile(r"\bjupyter\b|\bnotebook\b|\bcolab\b|\bipykernel\b|\.ipynb\b", _I), True),
    ("log.memory_grows", re.compile(r"memory (?:keeps|kept) (?:growing|increasing|rising)|memory (?:grows|increases|creeps)|memory leak|显存(?:一直|持续|不断|逐渐)(?:增长|增加|上涨|上升)|内存泄漏|显存泄漏", _I), True),
    ("train.optimizer", re.compile(r"\bpaged[- _]?adamw?[- _]?8[- _]?bit\b", _I), "paged_adamw_8bit"),
    ("train.optimizer", re.compile(r"\b(?:adamw?[- _]?8[- _]?bit|8[- _]?bit[- _]?adamw?)\b", _I), "adamw_8bit"),
    ("train.precision", re.compile(r"\bbf16\b|\bbfloat16\b", _I), "bf16"),
    ("train.precision", re.compile(r"\bfp16\b|\bfloat16\b|半精度", _I), "fp16"),
    ("lora.rank", re.compile(r"\b(?:lora[- _]?)?(?:rank|r)\s{0,2}(?:=|:)\s{0,2}(\d{1,4})\b", _I), int),
]


def _seq(match: re.Match) -> int | None:
    number = int(match.group(1).replace(",", ""))
    if match.group(2):
        number *= 1024
    return number if 16 <= number <= 2_000_000 else None


def extract(text: str) -> Iterator[Finding]:
    from ..catalog import find_gpu_mentions, find_model_mentions

    model = next(iter(find_model_mentions(text)), None)
    if model is not None:
        model_id, matched = model
        yield Finding("model.name", model_id, matched)
    gpu = next(iter(find_gpu_mentions(text)), None)
    if gpu is not None:
        gpu_id, memory_gib, matched = gpu
        yield Finding("gpu.name", gpu_id, matched)
        yield Finding("gpu.memory_gib", memory_gib, matched)
    seen: set[str] = set()
    for fact, pattern, kind in _PATTERNS:
        if fact in seen:
            continue
        match = pattern.search(text)
        if not match:
            continue
        if kind == "seq":
            value = _seq(match)
        elif kind is int:
            value = int(match.group(1))
            if value <= 0:
                value = None
        else:
            value = kind
        if value is None:
            continue
        seen.add(fact)
        yield Finding(fact, value, snippet(text, match.start(), match.end()))
