"""What-if: a set-up with a remedy's changes applied, and searches over remedies and sizes.

Changes are keyed by the knowledge base's fact names, the same names remedies
use in ``knowledge/remedies.yaml`` (``whatif: {set: ..., multiply: ..., cap: ...}``).
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .estimate import Estimate, estimate
from .setup import Setup

# Fact name -> Setup field.
FIELDS: dict[str, str] = {
    "model.load_dtype": "load_dtype",
    "train.method": "method",
    "train.precision": "precision",
    "train.optimizer": "optimizer",
    "train.batch_size": "batch_size",
    "train.eval_batch_size": "eval_batch_size",
    "train.seq_len": "seq_len",
    "train.grad_accum": "grad_accum",
    "train.grad_checkpointing": "grad_checkpointing",
    "train.attention": "attention",
    "train.packing": "packing",
    "train.objective": "objective",
    "lora.rank": "lora_rank",
    "lora.targets": "lora_targets",
    "lora.modules_to_save": "modules_to_save",
    "prefix.virtual_tokens": "virtual_tokens",
    "prefix.projection": "prefix_projection",
    "prefix.hidden": "prefix_hidden",
    "gpu.memory_gib": "gpu_memory_gib",
    "host.ram_total_gib": "host_ram_gib",
    "dist.num_gpus": "num_gpus",
    "dist.strategy": "strategy",
    "dist.zero_stage": "zero_stage",
    "dist.offload_optimizer": "offload_optimizer",
    "dist.offload_param": "offload_param",
    "eval.samples": "eval_samples",
    "eval.accumulation_steps": "eval_accumulation_steps",
    "eval.compute_metrics": "eval_compute_metrics",
    "eval.prediction_loss_only": "eval_prediction_loss_only",
    "eval.preprocess_logits": "eval_preprocess_logits",
    "eval.predict_with_generate": "eval_generate",
    "gen.max_new_tokens": "gen_new_tokens",
    "eval.num_beams": "gen_beams",
    "train.loss": "loss",
    "train.liger_kernels": "liger_kernels",
    "train.torch_compile": "compiled",
    "train.activation_offload": "activation_offload",
    "train.optimizer_in_backward": "optimizer_in_backward",
    "dist.context_parallel": "context_parallel",
    "dist.tensor_parallel": "tensor_parallel",
    "dist.num_nodes": "num_nodes",
    "rl.num_generations": "rl_generations",
    "rl.steps_per_generation": "rl_steps_per_generation",
    "rl.generation_batch_size": "rl_generation_batch",
    "rl.prompt_len": "rl_prompt_len",
    "rl.vllm": "vllm",
    "rl.vllm_memory_share": "vllm_memory_share",
    "rl.vllm_sleep": "vllm_sleep",
    "rl.beta": "rl_beta",
    "rl.precompute_ref": "precompute_ref",
    "rl.reward_model": "reward_model",
    "train.fp8": "fp8",
    "train.images_per_sample": "images_per_sample",
    "train.image_size": "image_size",
    "train.freeze_vision": "freeze_vision",
    "train.kbit_upcast": "kbit_fp32_upcast",
    "dist.fsdp_mixed_units": "fsdp_mixed_units",
}
OPS = ("set", "multiply", "cap")
_REFERENCE = re.compile(r"\{([a-z_][a-z0-9_.]{0,60})\}")


class NotModelled(KeyError):
    """A change names a fact the estimator has no field for."""


def _field(fact: str) -> str:
    if fact not in FIELDS:
        raise NotModelled(f"the estimator does not model fact '{fact}'")
    return FIELDS[fact]


def apply(setup: Setup, changes: Mapping[str, Mapping[str, Any]]) -> Setup:
    """The set-up after ``changes`` = ``{"set": {fact: value}, "multiply": {fact: factor}, "cap": {fact: value}}``.

    ``multiply`` rounds integers and keeps them at least 1; ``cap`` keeps the
    smaller of the current value and the cap.  Switching to QLoRA also loads
    the base in NF4, as bitsandbytes must.
    """
    unknown = set(changes) - set(OPS)
    if unknown:
        raise ValueError(f"unknown what-if operation(s) {sorted(unknown)}; use {list(OPS)}")
    new: dict[str, Any] = {}
    for fact, value in (changes.get("set") or {}).items():
        name = _field(fact)
        reference = _REFERENCE.fullmatch(value) if isinstance(value, str) else None
        if reference:
            # "{train.batch_size}": the other fact's value as the set-up has it now.
            value = getattr(setup, _field(reference.group(1)))
            if value is None:
                continue
        new[name] = tuple(value) if name in ("lora_targets", "modules_to_save") else value
    for fact, factor in (changes.get("multiply") or {}).items():
        name = _field(fact)
        current = new.get(name, getattr(setup, name))
        if current is None:
            continue
        new[name] = max(1, round(current * factor)) if isinstance(current, int) else current * factor
    for fact, cap in (changes.get("cap") or {}).items():
        name = _field(fact)
        current = new.get(name, getattr(setup, name))
        new[name] = cap if current is None else min(current, cap)
    if new.get("method", setup.method) == "qlora" and new.get("load_dtype", setup.load_dtype) not in ("nf4", "fp4",
                                                                                                       "int8"):
        new["load_dtype"] = "nf4"
    return setup.replace(**new)


@dataclass(frozen=True)
class Option:
    remedies: tuple[str, ...]
    cost: float
    setup: Setup
    estimate: Estimate
    fits: bool | None
    per_gpu_gib: float
    saved_gib: float


@dataclass(frozen=True)
class Search:
    baseline: Estimate
    options: list[Option]
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def fitting(self) -> list[Option]:
        return [o for o in self.options if o.fits]


def _remedy_parts(remedy: Any) -> tuple[str, dict, float | None]:
    if isinstance(remedy, Mapping):
        return remedy["id"], dict(remedy.get("whatif") or {}), remedy.get("cost")
    return remedy.id, dict(getattr(remedy, "whatif", None) or {}), getattr(remedy, "cost", None)


def _conflict(changes: list[dict]) -> bool:
    """Two remedies that set one fact to different values cannot both apply."""
    seen: dict[str, Any] = {}
    for ch in changes:
        for fact, value in (ch.get("set") or {}).items():
            if fact in seen and seen[fact] != value:
                return True
            seen[fact] = value
    return False


def _merge(changes: list[dict]) -> dict:
    merged: dict[str, dict] = {op: {} for op in OPS}
    for ch in changes:
        for op in OPS:
            for fact, value in (ch.get(op) or {}).items():
                if op == "multiply" and fact in merged[op]:
                    merged[op][fact] *= value
                elif op == "cap" and fact in merged[op]:
                    merged[op][fact] = min(merged[op][fact], value)
                else:
                    merged[op][fact] = value
    return merged


def _more_room(after: Estimate, before: Estimate) -> bool:
    """Whether a change leaves more headroom on the card (a larger card) though it lowers no moment."""
    return after.headroom_gib is not None and before.headroom_gib is not None and \
        after.headroom_gib > before.headroom_gib + 1e-9


def search(setup: Setup, remedies: Iterable[Any], max_combination: int = 3, limit: int = 10) -> Search:
    """Each remedy alone, then the cheapest combinations of 2–3 that fit.

    A remedy's cost is its ``cost`` when given, else its position in the list
    plus one (the knowledge base lists remedies cheapest first); a combination
    costs the sum.  Only combinations none of whose subsets already fits are
    kept, so each shows a step that was needed.
    """
    base = estimate(setup)
    entries, skipped = [], []
    for position, remedy in enumerate(remedies):
        rid, changes, cost = _remedy_parts(remedy)
        if not changes:
            skipped.append((rid, "no what-if"))
            continue
        try:
            apply(setup, changes)
        except (NotModelled, ValueError) as exc:
            skipped.append((rid, str(exc)))
            continue
        entries.append((rid, changes, float(cost) if cost is not None else float(position + 1)))

    cache: dict[tuple[str, ...], Option | None] = {}

    def option(combo: tuple[int, ...]) -> Option | None:
        key = tuple(entries[i][0] for i in combo)
        if key not in cache:
            changes = [entries[i][1] for i in combo]
            if _conflict(changes):
                cache[key] = None
            else:
                try:
                    new = apply(setup, _merge(changes))
                    est = estimate(new)
                except (NotModelled, ValueError):
                    cache[key] = None
                else:
                    cache[key] = Option(key, sum(entries[i][2] for i in combo), new, est, est.fits,
                                        est.per_gpu_gib, base.per_gpu_gib - est.per_gpu_gib)
        return cache[key]

    # A remedy that lowers no moment of this set-up's step (evaluation remedies where nothing is evaluated)
    # is not an option here, alone or in a combination; one that only enlarges the card lowers nothing
    # and is still an option.
    useless = {i for i in range(len(entries)) if (o := option((i,))) is not None and not any(
        o.estimate.moments.get(name, 0.0) < total - 1e-9 for name, total in base.moments.items())
        and not _more_room(o.estimate, base)}
    skipped += [(entries[i][0], "lowers nothing in this set-up") for i in sorted(useless)]
    entries = [e for i, e in enumerate(entries) if i not in useless]    # the cache is keyed by id: still valid
    singles = [o for o in (option((i,)) for i in range(len(entries))) if o is not None]
    options = sorted(singles, key=lambda o: (not o.fits, o.cost))
    if base.fits is False:
        fitting_sets: list[frozenset[int]] = [frozenset((i,)) for i in range(len(entries))
                                              if (o := option((i,))) is not None and o.fits]
        combos = []
        for size in range(2, max_combination + 1):
            for combo in itertools.combinations(range(len(entries)), size):
                if any(f <= frozenset(combo) for f in fitting_sets):
                    continue
                o = option(combo)
                if o is not None and o.fits:
                    combos.append(o)
                    fitting_sets.append(frozenset(combo))
        options += sorted(combos, key=lambda o: (o.cost, o.per_gpu_gib))[:limit]
    return Search(base, options, skipped)


def _largest(setup: Setup, name: str, upper: int) -> int:
    """Largest value of an integer field that still fits (memory grows with it), 0 when none does."""
    _need_gpu(setup)
    if not _fits(setup.replace(**{name: 1})):
        return 0
    lo, hi = 1, 2
    while hi <= upper and _fits(setup.replace(**{name: hi})):
        lo, hi = hi, hi * 2
    hi = min(hi, upper + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _fits(setup.replace(**{name: mid})):
            lo = mid
        else:
            hi = mid
    return lo


def _fits(setup: Setup) -> bool:
    return bool(estimate(setup).fits)


def _need_gpu(setup: Setup) -> None:
    if not setup.gpu_memory_gib:
        raise ValueError("the GPU's memory is needed (gpu_memory_gib)")


def max_batch_size(setup: Setup, upper: int = 4096) -> int:
    """The largest per-GPU micro-batch that fits; 0 when even 1 does not."""
    return _largest(setup, "batch_size", upper)


def max_seq_len(setup: Setup, upper: int = 1 << 20) -> int:
    """The longest sequence that fits at the set-up's batch size; 0 when even 1 token does not."""
    return _largest(setup, "seq_len", upper)


def min_gpus(setup: Setup, upper: int = 1024) -> tuple[int, Setup] | None:
    """The fewest GPUs of this size that fit, with the set-up used.

    Data parallelism alone (single, DDP) never lowers the memory per GPU, so
    those set-ups are sharded with ZeRO-3, as the ``more_gpus`` remedy does.
    """
    _need_gpu(setup)
    if setup.strategy in ("single", "ddp") or (setup.strategy == "deepspeed" and setup.zero_stage == 0):
        setup = setup.replace(strategy="deepspeed", zero_stage=3)
    # GPU counts the context- and tensor-parallel groups divide, as the set-up itself requires.
    group = setup.context_parallel * setup.tensor_parallel
    for n in _candidates(upper):
        if n % group:
            continue
        trial = setup.replace(num_gpus=n)
        if _fits(trial):
            lo = n // 2 + 1 if n > 1 else 1
            for m in range(lo, n + 1):
                if m % group == 0 and _fits(setup.replace(num_gpus=m)):
                    return m, setup.replace(num_gpus=m)
    return None


def _candidates(upper: int) -> Iterable[int]:
    n = 1
    while n <= upper:
        yield n
        n *= 2


def smallest_gpu(setup: Setup, gpus: Iterable[tuple[str, float]]) -> tuple[str, float, Estimate] | None:
    """The GPU with the least memory on which the set-up fits, as ``(id, memory_gib, estimate)``.

    The card's size changes only the verdict, not the memory the job needs, so the
    set-up is estimated once and held against each card.
    """
    need = estimate(setup).per_gpu_gib
    for gpu_id, memory in sorted(gpus, key=lambda g: g[1]):
        if need <= memory:
            return gpu_id, memory, estimate(setup.replace(gpu_memory_gib=memory))
    return None
