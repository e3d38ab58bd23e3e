"""From the consultation's facts to a Setup, with every default made an assumption; and back.

Missing inputs are filled from ``knowledge/defaults.yaml``.  The model comes
from the caller's shape, a pasted ``config.json``, the catalog id, or a bare
parameter count (a generic Llama-style shape), in that order.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from .. import yaml_safe
from . import anatomy
from .estimate import COMPONENTS, Estimate
from .setup import OPTIONAL_POSITIVE_INTS, POSITIVE_INTS, RL_OBJECTIVES, Setup, is_count
from .whatif import FIELDS

DEFAULTS_PATH = Path(__file__).resolve().parents[2] / "knowledge" / "defaults.yaml"


@dataclass(frozen=True)
class Assumption:
    fact: str
    value: Any
    text: dict[str, str]     # {"en": ..., "zh": ...}

    def say(self, lang: str = "en") -> str:
        return self.text.get(lang) or self.text["en"]


@dataclass(frozen=True)
class Default:
    fact: str
    value: Any
    text: dict[str, str]
    when: dict[str, tuple[Any, ...]]
    silent: bool
    # The set-up its `when` describes has this value as a rule (a toolkit's own default), not as a guess: a remedy
    # that only sets it to this value is not the first thing to try.
    held: bool = False


class DefaultsError(ValueError):
    """knowledge/defaults.yaml is malformed."""


@functools.lru_cache(maxsize=4)
def load_defaults(path: Path = DEFAULTS_PATH) -> tuple[Default, ...]:
    try:
        raw = yaml_safe.load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise DefaultsError(f"{Path(path).name}: {exc}") from None
    if not isinstance(raw, dict) or set(raw) != {"defaults"} or not isinstance(raw["defaults"], list):
        raise DefaultsError(f"{Path(path).name}: expected a top-level 'defaults' list")
    out = []
    for i, entry in enumerate(raw["defaults"]):
        where = f"{Path(path).name}: default #{i + 1}"
        if not isinstance(entry, dict) or not {"fact", "value", "en", "zh"} <= set(entry):
            raise DefaultsError(f"{where}: needs fact, value, en and zh")
        extra = set(entry) - {"fact", "value", "en", "zh", "when", "silent", "held"}
        if extra:
            raise DefaultsError(f"{where}: unknown key(s) {sorted(extra)}")
        if entry["fact"] not in FIELDS:
            raise DefaultsError(f"{where}: '{entry['fact']}' is not a fact the estimator reads")
        when = {k: tuple(v) if isinstance(v, list) else (v,) for k, v in (entry.get("when") or {}).items()}
        out.append(Default(entry["fact"], entry["value"], {"en": entry["en"], "zh": entry["zh"]}, when,
                           bool(entry.get("silent", False)), bool(entry.get("held", False))))
    return tuple(out)


# ---------------------------------------------------------------- catalog hooks
def shape_from_config_text(text: str) -> Any | None:
    """A shape from pasted config.json text via the catalog; None if it cannot be read."""
    try:
        config = json.loads(text) if isinstance(text, str) else dict(text)
    except (ValueError, TypeError):
        return None
    try:
        from oomdoctor.catalog import shape_from_config
    except ImportError:
        return None
    return shape_from_config(config)


def shape_from_name(name: str) -> Any | None:
    """A catalog shape by id, or by the catalog's name resolution."""
    found = resolve_name(name)
    return found.shape if found is not None else None


def resolve_name(name: str) -> Any | None:
    """A model by name and how it was found: ``oomdoctor.catalog.hub.lookup`` (the Hub's config.json when
    the lookup is on, the catalog, the name's family and size), a catalog id first."""
    try:
        from oomdoctor.catalog import get_model
        from oomdoctor.catalog.hub import Resolved, lookup
    except ImportError:
        return None
    try:
        shape = get_model(name)             # a catalog id, as the extractors give
        return Resolved(shape, "catalog", shape.id)
    except KeyError:
        return lookup(name)                 # the Hub (when on) before the catalog's fuzzy match, then the name


def _source_note(name: str, found: Any) -> Assumption:
    """Which of the three ways found the model (the Hub, the catalog, the name), in both languages."""
    shape = found.shape
    label = shape.hf_id or shape.id
    if found.source == "hub":
        return Assumption("model.name", name, _text(
            f"model: {label}, architecture read from its config.json on the Hub ({found.detail})",
            f"模型：{label}，架构读取自 Hub 上的 config.json（{found.detail}）"))
    note = found.note or {}
    if found.source == "catalog":
        return Assumption("model.name", name, _text(
            f"model: {label}, architecture from the catalog" + (f" ({note['en']})" if note else ""),
            f"模型：{label}，架构取自内置目录" + (f"（{note['zh']}）" if note else "")))
    text = getattr(shape, "assumption", None) or found.detail
    zh = text
    try:
        from oomdoctor.catalog.name_parse import parse_model_name
        parsed = parse_model_name(name)
        if parsed is not None:
            text, zh = parsed.text["en"], parsed.text["zh"]
    except ImportError:
        pass
    if note:
        text, zh = f"{text} ({note['en']})", f"{zh}（{note['zh']}）"
    return Assumption("model.name", name, _text(text, zh))


def shape_from_size(params_b: float) -> Any | None:
    try:
        from oomdoctor.catalog import generic
    except ImportError:
        return None
    try:
        return generic(params_b)
    except ValueError:
        return None


def gpu_memory_from_name(name: str) -> float | None:
    try:
        from oomdoctor.catalog import get_gpu, resolve_gpu
    except ImportError:
        return None
    try:
        gpu = get_gpu(name)
    except KeyError:
        gpu = resolve_gpu(name)
    return gpu.memory_gib if gpu is not None else None


# ---------------------------------------------------------------- facts -> Setup
ORDER = ("model.load_dtype", "train.method", "train.precision", "train.optimizer", "train.batch_size",
         "train.grad_accum", "train.seq_len", "train.grad_checkpointing", "train.attention", "train.packing",
         "train.objective", "lora.rank", "lora.targets", "lora.modules_to_save", "dist.num_gpus",
         "dist.strategy", "dist.zero_stage", "dist.offload_optimizer", "dist.offload_param", "train.eval_batch_size",
         # only a toolkit's own defaults set these (knowledge/defaults.yaml); else the estimator's own reading applies
         "train.loss", "train.activation_offload", "rl.vllm", "rl.vllm_memory_share", "rl.vllm_sleep",
         "prefix.virtual_tokens")
LORA_FACTS = ("lora.rank", "lora.targets", "lora.modules_to_save")
PREFIX_FACTS = ("prefix.virtual_tokens", "prefix.projection", "prefix.hidden")


def _text(en: str, zh: str) -> dict[str, str]:
    return {"en": en, "zh": zh}


def _resolve_shape(values: Mapping[str, Any], shape: Any, notes: list[Assumption]) -> Any | None:
    if shape is not None:
        return shape
    if values.get("model.config"):
        found = shape_from_config_text(values["model.config"])
        if found is not None:
            return found
    if values.get("model.name"):
        name = str(values["model.name"])
        found = resolve_name(name)
        if found is not None:
            notes.append(_source_note(name, found))
            return found.shape
    if values.get("model.params_b"):
        found = shape_from_size(values["model.params_b"])
        if found is not None:
            text = getattr(found, "assumption", None) or f"a Llama-style model of {values['model.params_b']}B"
            notes.append(Assumption("model.params_b", values["model.params_b"],
                                    _text(text, f"未知架构：按约 {values['model.params_b']}B 参数的 Llama 类稠密模型估算；"
                                                "粘贴 config.json 可得到精确结果")))
            return found
    return None


def setup_from_facts(values: Mapping[str, Any], shape: Any = None) -> tuple[Setup | None, list[Assumption]]:
    """A Setup from fact values, and the assumptions that filled the gaps; ``(None, ...)`` without a model."""
    notes: list[Assumption] = []
    model = _resolve_shape(values, shape, notes)
    if model is None:
        return None, notes
    resolved: dict[str, Any] = {k: v for k, v in values.items() if v is not None}
    for fact, name in FIELDS.items():
        value = resolved.get(fact)
        if name in POSITIVE_INTS + OPTIONAL_POSITIVE_INTS and value is not None and not is_count(value):
            # "batch_size: 0" or "num_beams: 0" in a pasted config: set aside, as if unstated
            notes.append(Assumption(fact, None, _text(f"{fact} = {value!r} is not a positive count: ignored",
                                                      f"{fact} = {value!r} 不是正整数：已忽略")))
            del resolved[fact]
    if "train.method" not in resolved and any(f in resolved for f in LORA_FACTS):
        resolved["train.method"] = "lora"
    if "train.method" not in resolved and resolved.get("prefix.virtual_tokens") is not None:
        resolved["train.method"] = "prefix"
    # QLoRA implies a quantised load whatever float dtype was named (torch_dtype there is the compute dtype).
    if resolved.get("train.method") == "qlora" and resolved.get("model.load_dtype") not in (None, "nf4", "fp4",
                                                                                           "int8"):
        notes.append(Assumption("model.load_dtype", "nf4", _text(
            f"QLoRA quantises the base to NF4; the {resolved['model.load_dtype']} named is its compute dtype",
            f"QLoRA 将基座量化为 NF4；所给的 {resolved['model.load_dtype']} 是其计算精度")))
        resolved["model.load_dtype"] = "nf4"
    _settle_parallelism(resolved, notes)
    _settle_rollouts(resolved, notes)
    defaults = load_defaults()
    # The method decides the load dtype's default and the load dtype the method's: settle the stated one first.
    order = ORDER if "model.load_dtype" in resolved else ("train.method",) + ORDER
    for fact in order:
        if fact in resolved:
            continue
        if fact in LORA_FACTS and resolved.get("train.method") not in ("lora", "qlora"):
            continue
        if fact in PREFIX_FACTS and resolved.get("train.method") != "prefix":
            continue
        entry = next((d for d in defaults if d.fact == fact and all(
            resolved.get(k) in allowed for k, allowed in d.when.items())), None)
        if entry is None:
            continue
        resolved[fact] = entry.value
        if not entry.silent:
            notes.append(Assumption(fact, entry.value, entry.text))
    if resolved.get("train.method") in ("lora", "qlora"):
        targets, missing = anatomy.resolve_targets(model, resolved.get("lora.targets") or ())
        if not targets and missing:
            fallback = [b.name for b in anatomy.blocks(model) if b.role == anatomy.ATTN_IN][:1]
            notes.append(Assumption("lora.targets", fallback, _text(
                f"this model has no {', '.join(missing)}; LoRA assumed on {', '.join(fallback)}",
                f"该模型没有 {', '.join(missing)}；假设 LoRA 作用于 {', '.join(fallback)}")))
            resolved["lora.targets"] = fallback
    if resolved.get("train.method") in ("full", "freeze") and resolved.get("model.load_dtype") in ("nf4", "fp4",
                                                                                                 "int8"):
        notes.append(Assumption("train.method", "qlora", _text(
            "bitsandbytes-quantised weights cannot be trained directly; LoRA adapters on them (QLoRA) assumed",
            "bitsandbytes 量化后的权重无法直接训练；假设在其上训练 LoRA 适配器（QLoRA）")))
        resolved["train.method"] = "qlora"
        for fact in LORA_FACTS:
            entry = next((d for d in defaults if d.fact == fact and all(
                resolved.get(k) in allowed for k, allowed in d.when.items())), None)
            if entry is not None and fact not in resolved:
                resolved[fact] = entry.value
                if not entry.silent:
                    notes.append(Assumption(fact, entry.value, entry.text))
    gpu = resolved.get("gpu.memory_gib")
    if gpu is None and resolved.get("gpu.name"):
        gpu = gpu_memory_from_name(str(resolved["gpu.name"]))
    kwargs: dict[str, Any] = {"model": model, "gpu_memory_gib": gpu,
                              "host_ram_gib": resolved.get("host.ram_total_gib")}
    for fact, name in FIELDS.items():
        if fact in resolved and name not in kwargs:
            value = resolved[fact]
            kwargs[name] = tuple(value) if name in ("lora_targets", "modules_to_save") else value
    if kwargs.get("strategy") == "single" and kwargs.get("num_gpus", 1) > 1:
        kwargs["strategy"] = "ddp"
    return Setup(**kwargs), notes


def _settle_parallelism(resolved: dict[str, Any], notes: list[Assumption]) -> None:
    """GPUs over several machines, and parallel degrees the GPUs cannot take (said, then set aside)."""
    nodes, per_node = resolved.get("dist.num_nodes"), resolved.get("dist.gpus_per_node")
    if is_count(nodes) and is_count(per_node) and nodes > 1:
        # torchrun --nnodes N --nproc_per_node G: N × G ranks; accelerate's num_processes is already the total
        resolved["dist.num_gpus"] = nodes * per_node
        notes.append(Assumption("dist.num_gpus", nodes * per_node, _text(
            f"{nodes} machines × {per_node} GPUs each = {nodes * per_node} GPUs",
            f"{nodes} 台机器 × 每台 {per_node} 张 GPU = {nodes * per_node} 张 GPU")))
    gpus = resolved.get("dist.num_gpus", 1)
    for fact in ("dist.context_parallel", "dist.tensor_parallel"):
        degree = resolved.get(fact)
        if degree is None:
            continue
        others = 1
        for other in ("dist.context_parallel", "dist.tensor_parallel"):
            if other != fact and is_count(resolved.get(other)):
                others *= resolved[other]
        if not is_count(degree) or not is_count(gpus) or gpus % (degree * others):
            notes.append(Assumption(fact, None, _text(
                f"{fact} = {degree!r} does not divide the {gpus} GPU(s): ignored",
                f"{fact} = {degree!r} 不能整除 {gpus} 张 GPU：已忽略")))
            del resolved[fact]


RL_PROMPT = 512     # GRPOConfig.max_prompt_length's default while TRL still truncated prompts


def _settle_rollouts(resolved: dict[str, Any], notes: list[Assumption]) -> None:
    """RL values the set-up cannot take (said, then set aside); and an RL row's length from its parts.

    An RL step trains on prompt + completion: when no sequence length is stated and both parts are, the row is
    their sum (TRL 1.16 no longer truncates prompts, so the longest prompt has to be stated to be known)."""
    share = resolved.get("rl.vllm_memory_share")
    if share is not None and not (isinstance(share, (int, float)) and not isinstance(share, bool) and 0 < share <= 1):
        notes.append(Assumption("rl.vllm_memory_share", None, _text(
            f"vllm_gpu_memory_utilization = {share!r} is not a fraction between 0 and 1: ignored",
            f"vllm_gpu_memory_utilization = {share!r} 不是 0 到 1 之间的比例：已忽略")))
        del resolved["rl.vllm_memory_share"]
    beta = resolved.get("rl.beta")
    if beta is not None and not (isinstance(beta, (int, float)) and not isinstance(beta, bool) and beta >= 0):
        notes.append(Assumption("rl.beta", None, _text(f"beta = {beta!r} is not a number >= 0: ignored",
                                                       f"beta = {beta!r} 不是大于等于 0 的数：已忽略")))
        del resolved["rl.beta"]
    prompt, completion = resolved.get("rl.prompt_len"), resolved.get("gen.max_new_tokens")
    if (resolved.get("train.objective") in RL_OBJECTIVES and "train.seq_len" not in resolved
            and is_count(completion)):
        said = is_count(prompt)
        prompt = prompt if said else RL_PROMPT
        resolved["train.seq_len"] = prompt + completion
        notes.append(Assumption("train.seq_len", prompt + completion, _text(
            f"each trained row is a prompt of up to {prompt} tokens"
            f"{'' if said else ' (assumed: the max_prompt_length default of TRL releases that truncated prompts)'}"
            f" and a completion of up to {completion}: {prompt + completion} tokens",
            f"每个训练行是最多 {prompt} 个 token 的提示"
            f"{'' if said else '（假设值：早期截断提示的 TRL 版本中 max_prompt_length 的默认值）'}"
            f"加最多 {completion} 个 token 的回答：{prompt + completion} 个 token")))


# ---------------------------------------------------------------- Estimate -> facts
CLEAR_MARGIN = 0.05     # the published-table median error is 5.2 % (bench/accuracy/README.md)


def estimate_facts(est: Estimate) -> dict[str, Any]:
    """The estimate as facts for the rule engine."""
    b = est.breakdown
    total = sum(b.values()) or 1.0
    facts: dict[str, Any] = {
        "estimate.per_gpu_gib": round(est.per_gpu_gib, 2),
        "estimate.host_ram_gib": round(est.host_ram_gib, 2),
        "estimate.dominant": max(COMPONENTS, key=lambda c: b[c]),
        "estimate.optimizer_share": round(b["optimizer"] / total, 3),
        "estimate.activations_share": round((b["activations"] + b["logits"]) / total, 3),
        "estimate.fp32_master": est.fp32_master,
        "estimate.vision_trains": est.vision_trains,
        "estimate.image_tokens_vary": est.image_tokens_vary,
    }
    if est.layer_gib > 0:
        facts["estimate.layer_gib"] = round(est.layer_gib, 3)
    if est.fits is not None:
        facts["estimate.fits"] = est.fits
        facts["estimate.weights_exceed_gpu"] = est.weights_gib > (est.gpu_memory_gib or 0.0)
        if est.gpu_memory_gib:
            facts["estimate.weights_share"] = round(est.weights_gib / est.gpu_memory_gib, 3)
        # Beyond the estimate's own error: a log that shows training steps completing then contradicts it.
        facts["estimate.training_exceeds_gpu"] = est.training_gib > (est.gpu_memory_gib or 0.0) * (1 + CLEAR_MARGIN)
        if est.mixed_units_extra_gib is not None:
            # whether FSDP's wrapping of the adapters decides the verdict (then it is worth asking)
            facts["estimate.mixed_units_decide_fit"] = bool(est.fits) and est.mixed_units_extra_gib > (
                est.headroom_gib or 0.0)
    return facts
