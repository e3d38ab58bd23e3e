"""What the names of recipes, scripts and trainer classes say about the run.

torchtune's recipe names say the method and, for `*_distributed`, FSDP (`full_finetune_distributed`,
`lora_finetune_single_device`, even when a terminal wraps the name); TRL's trainer classes and
example scripts say the objective (`SFTTrainer`, `GRPOConfig`, `sft.py`, `dpo.py`), as do
LLaMA-Factory's workflow functions in a traceback (`run_sft(`); an accelerate config named for
FSDP or plain multi-GPU says the strategy; `llamafactory-cli train`, `finetuning_type`, `swift sft`
or `swift rlhf` say which toolkit's defaults apply, and so do Unsloth's import and loaders, verl's entry module
and overrides, TRL's CLI and configs, `axolotl train` and `tune run`, and a sentence saying the run uses one. Only the running script's own name counts, not a
directory on its path.
"""
from __future__ import annotations

import re
from typing import Iterator

from . import Finding

NAME = "launch"
PRODUCES = {"train.method", "dist.strategy", "train.objective", "toolkit", "toolkit.named"}

_RECIPE = re.compile(r"(?<![A-Za-z])(lora|qlora|full)_finetune_?[ \t]{0,2}\n?[ \t]{0,2}_?(single_device|distributed)\b")
_OBJECTIVES = {"sft": "sft", "dpo": "dpo", "grpo": "grpo", "kto": "kto", "orpo": "orpo", "ppo": "ppo", "reward": "reward",
               "rm": "reward", "pt": "pretrain", "rloo": "rloo"}
_TRAINER_CLASS = re.compile(r"\b(SFT|DPO|GRPO|KTO|ORPO|PPO|Reward)(?:Trainer|Config)\b")
_SCRIPT = re.compile(r"(?<![\w.-])(?:train_)?(sft|dpo|grpo|kto|orpo|ppo)(?:_trainer)?\.py\b")
_WORKFLOW = re.compile(r"\brun_(sft|dpo|pt|rm|ppo|kto)\(")
_TRL_CLI = re.compile(r"(?<![\w/.-])trl[ \t]{1,3}(sft|dpo|grpo|kto|rloo|reward)\b")
# torchtune's preference and RL recipes (recipes/*.py): their loss is not the fine-tuning recipes' chunked one.
_TUNE_RECIPE = re.compile(r"(?<![\w.-])(?:(?:lora|full)_(dpo)_(?:single_device|distributed)|"
                          r"(?:async_)?(ppo|grpo)_full_finetune_(?:single_device|distributed))\b")
# The toolkit a command or config belongs to: first by the command that runs it (LLaMA-Factory's CLI and
# scripts, ms-swift's subcommands and CLI modules), else by keys only it uses (finetuning_type; ms-swift
# 2.x's --sft_type). A command outranks a key: ms-swift also accepts LLaMA-Factory's --finetuning_type.
_TOOLKIT_COMMANDS = (
    ("llamafactory", re.compile(r"\bllamafactory-cli\s{1,3}train\b|(?<![\w.-])src/train(?:_bash)?\.py\b[\s\S]{0,300}?--stage\b")),
    ("ms_swift", re.compile(r"(?<![\w/-])swift[ \t]{1,3}(?:sft|rlhf|pt)\b|\bswift/cli/(?:sft|rlhf|pt)\.py\b")),
    # Unsloth: its import or loader in a script, its banner or its frames in a log (a model repo such as
    # unsloth/llama-3-8b-bnb-4bit is not Unsloth running: plain transformers loads those too).
    ("unsloth", re.compile(r"(?:^|\n)[ \t]{0,12}(?:from[ \t]{1,3}unsloth(?:\.[\w.]{1,60})?[ \t]{1,3}import|import[ \t]{1,3}unsloth)\b|"
                           r"\bFast(?:LanguageModel|VisionModel|TextModel|Model)\.(?:from_pretrained|get_peft_model)\b|"
                           r"==\(\(====\)\)==[ \t]{1,3}Unsloth\b|\bUnsloth: Will (?:smartly offload|patch your computer)|"
                           r"(?:site|dist)-packages/unsloth(?:_zoo)?/")),
    # verl: its entry module, or its own modules' frames in a traceback (verl/workers/..., not any path with "verl").
    ("verl", re.compile(r"(?<![\w.])-m[ \t]{1,3}verl\.trainer\.[a-z_]{1,40}\b|(?<![\w.-])verl/trainer/main_[a-z_]{1,30}\.py\b|"
                        r"(?<![\w.-])verl/(?:workers|trainer|single_controller|utils)/[\w/]{1,80}\.py\b")),
    # TRL: its CLI, or one of its trainer configs constructed (a TrainingArguments passed to SFTTrainer keeps
    # the Trainer's own defaults, so the trainer class alone does not count).
    ("trl", re.compile(r"(?<![\w/.-])trl[ \t]{1,3}(?:sft|dpo|grpo|kto|rloo|reward)\b|"
                       r"\b(?:SFT|DPO|GRPO|KTO|RLOO|ORPO|CPO|BCO|Reward|OnlineDPO|Distillation)Config\(")),
    ("axolotl", re.compile(r"(?<![\w/.-])axolotl[ \t]{1,3}(?:train|preprocess)\b|(?<![\w.])-m[ \t]{1,3}axolotl\.cli\.(?:train|preprocess)\b")),
    ("torchtune", re.compile(r"(?<![\w/.-])tune[ \t]{1,3}run\b")),
)
_TOOLKIT_KEYS = (
    ("llamafactory", re.compile(r"(?:^|\n)[ \t]{0,8}finetuning_type[ \t]{0,3}:|--finetuning_type\b|'--finetuning_type'")),
    ("ms_swift", re.compile(r"--sft_type\b")),
    # verl's Hydra overrides and its config's top-level group; axolotl's own keys; a torchtune component.
    ("verl", re.compile(r"(?<![\w.])actor_rollout_ref\.(?:actor|rollout|ref|model)\.[\w.]{1,80}=|(?:^|\n)actor_rollout_ref[ \t]{0,3}:")),
    ("axolotl", re.compile(r"(?:^|\n)[ \t]{0,8}(?:lora_target_linear|sample_packing|sequence_len)[ \t]{0,3}:")),
    ("torchtune", re.compile(r"_component_[ \t]{0,3}[:=][ \t]{0,3}torchtune\.")),
)
# Last, the toolkit a user says they run it with: its name beside a word of using it ("用 LLaMA-Factory 微调",
# "with ms-swift"). The name alone may be a comparison or a link, so it needs the verb or preposition. With no
# command or config in sight, its defaults are only assumptions (``toolkit.named``): the config may switch them off.
_TOOLKIT_NAMES = {"llamafactory": r"(?:LLaMA|Llama|llama)[- _]?(?:Factory|factory)|LlamaFactory|llamafactory",
                  "ms_swift": r"ms[- _]swift|(?<![A-Za-z0-9_])msswift",
                  # (unsloth/<model> is a checkpoint's repo, not the toolkit)
                  "unsloth": r"(?:[Uu]nsloth|UNSLOTH)(?!/)",
                  "verl": r"verl|veRL|VeRL|VERL",
                  "trl": r"TRL|trl",
                  "axolotl": r"[Aa]xolotl",
                  "torchtune": r"[Tt]orch[Tt]une"}
_TOOLKIT_WORDS = tuple(
    (toolkit, re.compile(r"\b(?:[Uu]sing|[Uu]se|[Uu]sed|[Uu]ses|[Ww]ith|[Vv]ia|[Tt]hrough|run\s{1,3}by)\s{1,3}(?:the\s{1,3})?(?:" + name + r")(?![A-Za-z0-9_-])|"
                         r"(?:用|使用|通过|基于|拿|借助)(?:的是|的|了)?\s{0,2}(?:" + name + r")(?![A-Za-z0-9_-])|"
                         r"(?<![A-Za-z0-9_/.-])(?:" + name + r")\s{0,2}(?:微调|训练|跑|做|进行)|"
                         # "verl GRPO on Qwen2.5-32B", "Unsloth QLoRA", "a TRL SFT run"
                         r"(?<![A-Za-z0-9_/.-])(?:" + name + r")\s{1,3}(?:GRPO|PPO|DPO|SFT|RLHF|LoRA|QLoRA|training|"
                         r"fine-?tuning|finetuning|trainer|recipe|job|run)\b"))
    for toolkit, name in _TOOLKIT_NAMES.items())
# A name said in contrast or refusal ("unlike unsloth", "instead of verl", "不用 verl") is not what the run uses.
_CONTRAST = re.compile(r"(?:\b(?:[Uu]nlike|instead\s{1,3}of|rather\s{1,3}than|than|without|not|never|except|vs\.?|versus|"
                       r"compared\s{1,3}(?:to|with)|switched\s{1,3}from|moved\s{1,3}from|from)|不用|没用|而不是|不是|除了|相比|比起|对比|不|没|别)"
                       r"[\s,，]{0,3}(?:\S{1,20}[\s,，]{1,3}){0,1}$")
_ACCELERATE_CONFIG = re.compile(r"--config_file[= ][\"']?([\w./-]{1,200})")


def _first(pattern: re.Pattern, text: str, contrast: bool) -> re.Match | None:
    """The first match, passing over names said in contrast when ``contrast``."""
    for m in pattern.finditer(text):
        if not contrast or not _CONTRAST.search(text[max(0, m.start() - 30):m.start()]):
            return m
    return None


# TRL's trainer configs run inside other toolkits' scripts (an Unsloth notebook builds an SFTConfig): the
# toolkit that wraps TRL is the one whose defaults apply.
_WRAPS_TRL = {"unsloth", "llamafactory", "ms_swift", "axolotl"}


def _outermost(toolkits: dict[str, str]) -> dict[str, str]:
    if "trl" in toolkits and _WRAPS_TRL & set(toolkits):
        return {k: v for k, v in toolkits.items() if k != "trl"}
    return toolkits


def _single(values: set, fact: str, detail: str) -> Iterator[Finding]:
    if len(values) == 1:
        yield Finding(fact, values.pop(), detail)


def extract(text: str) -> Iterator[Finding]:
    from .config_keys import distinct

    text = distinct(text)
    recipes = list(_RECIPE.finditer(text))
    if recipes:
        detail = " ".join(recipes[0].group(0).split())
        yield from _single({m.group(1) for m in recipes}, "train.method", detail)
        if all(m.group(2) == "distributed" for m in recipes):
            yield Finding("dist.strategy", "fsdp", detail)
    objectives: dict[str, str] = {}
    for m in _TRAINER_CLASS.finditer(text):
        objectives.setdefault(_OBJECTIVES[m.group(1).lower()], m.group(0))
    for m in _SCRIPT.finditer(text):
        objectives.setdefault(_OBJECTIVES[m.group(1)], m.group(0))
    for m in _WORKFLOW.finditer(text):
        objectives.setdefault(_OBJECTIVES[m.group(1)], m.group(0))
    for m in _TRL_CLI.finditer(text):
        objectives.setdefault(_OBJECTIVES[m.group(1)], m.group(0))
    for m in _TUNE_RECIPE.finditer(text):
        objectives.setdefault(_OBJECTIVES[m.group(1) or m.group(2)], m.group(0))
    if len(objectives) == 1:
        objective, detail = next(iter(objectives.items()))
        yield Finding("train.objective", objective, detail)
    for markers, fact in ((_TOOLKIT_COMMANDS, "toolkit"), (_TOOLKIT_KEYS, "toolkit"), (_TOOLKIT_WORDS, "toolkit.named")):
        found = ((toolkit, _first(pattern, text, contrast=markers is _TOOLKIT_WORDS)) for toolkit, pattern in markers)
        toolkits = _outermost({toolkit: " ".join(m.group(0).split()) for toolkit, m in found if m})
        if toolkits:
            if len(toolkits) == 1:
                yield Finding(fact, *next(iter(toolkits.items())))
            break
    strategies = set()
    for m in _ACCELERATE_CONFIG.finditer(text):
        name = m.group(1).rsplit("/", 1)[-1].lower()
        if "fsdp" in name:
            strategies.add("fsdp")
        elif "multi_gpu" in name or "ddp" in name:
            strategies.add("ddp")
    yield from _single(strategies, "dist.strategy", "accelerate --config_file")
