"""Plain sentences: "llama3 8b lora bs 4 on a 4090", "Qwen2.5-7B 全参数微调, A100 40G".

Model and GPU names are matched against the catalogs; the rest are short
patterns in English and Chinese for the settings people state in words.
"""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding, snippet

NAME = "sentence"
PRODUCES = {"model.name", "model.params_b", "gpu.name", "train.method", "train.batch_size",
            "train.seq_len", "dist.num_gpus", "train.grad_checkpointing", "model.load_dtype", "dist.zero_stage",
            "dist.strategy", "train.objective", "log.notebook", "log.memory_grows", "train.optimizer",
            "train.precision", "lora.rank", "dist.offload_optimizer", "log.stated_memory", "phase", "data.in_memory",
            "eval.compute_metrics", "eval.samples", "eval.enabled", "log.after_eval", "log.after_steps", "log.one_rank", "log.repeated_runs"}

_I = re.IGNORECASE
# Words are delimited by lookarounds on letters rather than \b, so that script and file names count:
# "lora_train.sh", "ds_z3_offload_config.json", "fsdp_config".
_PATTERNS: list[tuple[str, re.Pattern, object]] = [
    ("train.method", re.compile(r"(?<![A-Za-z])q-?lora(?![A-Za-z])", _I), "qlora"),
    ("train.method", re.compile(r"(?<![A-Za-z])lora(?![A-Za-z])|低秩", _I), "lora"),
    ("train.method", re.compile(r"\bfull[- ]?(?:parameter[- ])?(?:fine[- ]?tun\w{0,4}|ft|sft|training)\b|全参|全量", _I), "full"),
    ("train.method", re.compile(r"\bfreeze\b|冻结", _I), "freeze"),
    ("model.params_b", re.compile(r"(?<![\w.])(\d{1,4}(?:\.\d{1,2})?)[Bb](?!\w|\s{0,2}(?:tokens?|samples?|examples?|steps?|bytes?)\b)"), "params"),
    ("train.batch_size", re.compile(r"\b(?:micro[- _]?)?(?:bs|batch[- _]?size|batch|mbs)\s{0,3}(?:=|:|of|为|是)?\s{0,3}(\d{1,4})\b", _I), int),
    ("train.batch_size", re.compile(r"(?:批大小|批次大小|批量大小|batch)\s{0,3}(?:=|:|：|为|是)?\s{0,3}(\d{1,4})", _I), int),
    ("train.seq_len", re.compile(r"\b(?:seq(?:uence)?[- _]?(?:len(?:gth)?)?|max[- _]?len(?:gth)?|ctx|context(?:[- _]length)?|cutoff[- _]?len)\s{0,3}(?:=|:|of|为)?\s{0,3}(\d{1,3}(?:,\d{3})?|\d{1,6})\s{0,2}(k)?\b", _I), "seq"),
    ("train.seq_len", re.compile(r"(?:序列长度|序列|长度|上下文)\s{0,3}(?:=|:|：|为|是)?\s{0,3}(\d{1,6})\s{0,2}(k)?", _I), "seq"),
    ("train.seq_len", re.compile(r"\b(\d{1,3})\s{0,1}(k)\s{0,2}(?:context|ctx|tokens|seq(?:uence)?s?|长度|上下文)", _I), "seq"),
    ("dist.num_gpus", re.compile(r"\b(\d{1,3})\s{0,2}(?:x|×|\*)\s{0,2}(?=[A-Za-z]{0,8}\s{0,1}[AHLTVPB]?\d{2,4})", _I), int),
    ("dist.num_gpus", re.compile(r"\b(\d{1,3})\s{0,2}(?:gpus?|cards?|卡|张卡|块卡|块显卡|张显卡)", _I), int),
    ("dist.num_gpus", re.compile(r"(单|一|两|二|三|四|六|八|十六)\s{0,1}(?:张|块|台|个)\s{0,2}(?:卡|显卡|gpu|GPU|[A-Za-z]{0,8}\s{0,1}\d{2,4})"), "zh_count"),
    ("train.grad_checkpointing", re.compile(r"\b(?:no|without|disabled?)\s{1,3}(?:gradient|grad|activation)[- _]?checkpointing|"
                                            r"(?:gradient|grad|activation)[- _]?checkpointing\s{1,3}(?:is\s{1,3}|was\s{1,3})?(?:off|disabled|not\s{1,3}(?:on|enabled|used))\b|"
                                            r"(?:没(?:有)?开(?:启)?|未开启|不开|关闭(?:了)?)\s{0,2}(?:梯度检查点|重计算)|(?:梯度检查点|重计算)\s{0,2}(?:没(?:有)?开|未开启|不开|关(?:闭|了))", _I), False),
    ("train.grad_checkpointing", re.compile(r"(?<!no )(?<!without )(?:gradient|grad|activation)[- _]?checkpointing|梯度检查点|重计算", _I), True),
    ("model.load_dtype", re.compile(r"\b4[- ]?bit\b|\bnf4\b|4比特|四比特", _I), "nf4"),
    ("model.load_dtype", re.compile(r"\b8[- ]?bit\b(?!\s{0,2}(?:adam|optim))|\bint8\b", _I), "int8"),
    ("dist.zero_stage", re.compile(r"(?<![A-Za-z0-9])(?:zero|ds_z)[- _]?(?:stage[- _]?)?([0-3])(?![0-9])", _I), int),
    ("dist.offload_optimizer", re.compile(r"(?<![A-Za-z])offload(?:s|ing|ed)?[ _](?:the[ _])?optimizer|(?<![A-Za-z])(?:ds_)?z(?:ero)?[0-3]?_offload", _I), "cpu"),
    ("dist.strategy", re.compile(r"(?<![A-Za-z])fsdp(?![A-Za-z])", _I), "fsdp"),
    ("dist.strategy", re.compile(r"\bdeepspeed\b|(?<![A-Za-z])(?:zero[- _]?(?:stage|offload|init)|zero\.init|zero[123](?![0-9])|ds_z[0-3])", _I), "deepspeed"),
    ("dist.strategy", re.compile(r"\bddp\b|DistributedDataParallel", _I), "ddp"),
    ("train.objective", re.compile(r"\bdpo\b", _I), "dpo"),
    ("train.objective", re.compile(r"\bkto\b", _I), "kto"),
    ("train.objective", re.compile(r"\bppo\b|(?<![\w/-])rlhf(?![\w-])", _I), "ppo"),
    ("train.objective", re.compile(r"\bgrpo\b|\bnum_generations\b", _I), "grpo"),
    ("train.objective", re.compile(r"\borpo\b", _I), "orpo"),
    ("log.notebook", re.compile(r"\bjupyter\b|\bnotebook\b|\bcolab\b|\bipykernel\b|\.ipynb\b", _I), True),
    ("log.memory_grows", re.compile(r"memory (?:usage )?(?:keeps|kept|is|was) (?:growing|increasing|rising|going up)|memory (?:grows|increases|creeps)|"
                                    r"(?:grows|increases|creeps up) (?:every|each|after each|with each|over) (?:step|iteration|epoch|time)|"
                                    r"memory leak|显存(?:一直|持续|不断|逐渐)(?:增长|增加|上涨|上升)|内存泄漏|显存泄漏", _I), True),
    ("log.repeated_runs", re.compile(r"hyperparameter[- _]search|\bmodel_init\b|train(?:ing|s)? (?:in|inside) a loop|\bre-?(?:ran|run|running|executed?)\s{1,3}(?:the\s{1,3})?cell|"
                                     r"(?:several|multiple) (?:models|trainers) in (?:one|the same) (?:process|notebook)|超参数?搜索", _I), True),
    ("log.one_rank", re.compile(r"\b(?:only|just)\s{1,3}(?:on\s{1,3})?(?:one|a single|1)\s{1,3}(?:rank|gpu|card|process|worker)\b|"
                                r"\bone\s{1,3}(?:rank|gpu|card)\s{1,3}only\b|只有一张卡|只有一个rank", _I), True),
    ("log.stated_memory", re.compile(r"\bVRAM\b|显存|\bGPU\s{0,2}(?:memory|RAM|OOM)\b|\bCUDA\s{0,2}OOM\b", _I), "gpu"),
    ("log.stated_memory", re.compile(r"\b(?:host|system|cpu|main)[- ]{0,2}(?:ram|memory)\b|\bRAM\b|主机内存|系统内存|(?<!显)内存不足", _I), "host"),
    ("phase", re.compile(r"\b(?:when|while|during|at)\s{1,3}(?:the\s{1,3})?(?:final\s{1,3}|last\s{1,3})?(?:sav(?:e|ing)|checkpoint(?:ing)?)\b|保存(?:时|模型时|检查点时)", _I), "saving"),
    ("phase", re.compile(r"\b(?:when|while|during|at|in)\s{1,3}(?:the\s{1,3})?(?:eval|evaluation|evaluating|validation|predict(?:ion|ing)?)\b|评估时|验证时", _I), "evaluation"),
    ("phase", re.compile(r"\b(?:when|while|during)\s{1,3}(?:the\s{1,3})?(?:model\s{1,3})?load(?:ing)?\b|加载(?:模型)?时", _I), "loading"),
    ("phase", re.compile(r"\b(?:when|while|during)\s{1,3}(?:the\s{1,3})?(?:tokeni[sz]\w{0,6}|preprocess\w{0,6}|data\s{1,3}loading)|分词时|预处理时", _I), "data"),
    ("data.in_memory", re.compile(r"\b(?:whole|entire|full)\s{1,3}(?:tokeni[sz]ed\s{1,3})?dataset\s{1,3}in\s{1,3}(?:ram|memory)\b", _I), True),
    ("eval.compute_metrics", re.compile(r"\bcompute_(?:metrics|accuracy)\b", _I), True),
    ("eval.samples", re.compile(r"\b(\d{1,3}(?:,\d{3}){1,2}|\d{1,7})\s{1,2}(?:eval(?:uation)?|validation|val|dev)\s{1,2}"
                                r"(?:samples|examples|rows|items)\b|(?:评估集|验证集)\s{0,3}(?:有|为|共|是)?\s{0,3}(\d{1,7})\s{0,2}(?:条|个)?",
                                _I), "count"),
    ("eval.enabled", re.compile(r"\beval(?:uation)?\s{1,3}(?:runs|ran|starts|started|is\s{1,3}on|is\s{1,3}enabled)\b|开启(?:了)?评估", _I), True),
    ("log.after_eval", re.compile(r"\bafter\s{1,3}(?:an?\s{1,3}|the\s{1,3})?(?:eval|evaluation|validation)\b|评估(?:之)?后", _I), True),
    ("log.after_steps", re.compile(r"\b(?:at|after)\s{1,3}step\s{1,3}\d{1,7}\b|\bafter\s{1,3}\d{1,7}\s{1,3}(?:steps|iterations)\b|第\s{0,2}\d{1,7}\s{0,2}步", _I), True),
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


_ZH_COUNTS = {"单": 1, "一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "六": 6, "八": 8, "十六": 16}
PROSE_HEAD_LINES = 3000
PROSE_TAIL_LINES = 1000
PROSE_LINE_CHARS = 1000


def prose(text: str) -> str:
    """The part of a paste where people state their set-up in words, bounded in size.

    A 10 MiB training log is mostly repeated or numbered progress lines; the
    user's own sentences sit near the start or the end. Distinct lines only, each
    cut to a sentence's length, the first and last few thousand: the ~30 patterns
    below then cost the same for a 10 MiB log as for a 200 KiB one.
    """
    if len(text) <= PROSE_LINE_CHARS * 64:
        return text
    seen: set[str] = set()
    lines = []
    for line in text.splitlines():
        line = line[:PROSE_LINE_CHARS]
        if line.strip() and line not in seen:
            seen.add(line)
            lines.append(line)
    if len(lines) > PROSE_HEAD_LINES + PROSE_TAIL_LINES:
        lines = lines[:PROSE_HEAD_LINES] + lines[-PROSE_TAIL_LINES:]
    return "\n".join(lines)


def extract(text: str) -> Iterator[Finding]:
    from ..catalog import find_gpu_mentions, find_model_mentions, find_model_names

    model = next(iter(find_model_mentions(text)), None) or next(iter(find_model_names(prose(text))), None)
    if model is not None:
        model_id, matched = model
        yield Finding("model.name", model_id, matched)
    gpu = next(iter(find_gpu_mentions(text)), None)
    if gpu is not None:
        # The card's memory comes from the catalog through gpu.name; gpu.memory_gib is left
        # to what PyTorch or nvidia-smi measured, which is closer to what the job could use.
        gpu_id, _, matched = gpu
        yield Finding("gpu.name", gpu_id, matched)
    text = prose(text)
    seen: set[str] = set()
    for fact, pattern, kind in _PATTERNS:
        if fact in seen:
            continue
        match = pattern.search(text)
        if not match:
            continue
        if kind == "seq":
            value = _seq(match)
        elif kind == "count":
            value = int(next(g for g in match.groups() if g).replace(",", "")) or None
        elif kind == "zh_count":
            value = _ZH_COUNTS[match.group(1)]
        elif kind == "params":
            value = float(match.group(1))
            if not 0.05 <= value <= 2000:
                value = None
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
