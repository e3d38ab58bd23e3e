"""The multi-GPU FSDP gap of the published fms-acceleration rows, measured on two GPUs (``gpu_measure.py --sweep fsdp-gap``).

fms-acceleration's FSDP runs (published.yaml, ``fms-*-2gpu-*``) allocate more
than the estimate, by an amount that grows with the tokens (Mistral-7B LoRA:
1.0 GiB at 2 × 4096 tokens a GPU, 2.4 GiB at 4 × 4096), while the same set-ups
on one GPU are within 1.3 %.  On CPU (``fsdp_probe.py``, two gloo ranks) FSDP
holds nothing per token beyond one process, in the configuration those runs
used; so what is left happens on CUDA only, or in a part of that stack the
CPU runs do not reproduce.  This runs the set-up as those runs did, once in
one process and once as FSDP over two ranks, on the same GPU type, and says
what was alive at each run's allocated peak.

The set-up, from the sources (``published.yaml`` has the versions):

* fms-acceleration ``scripts/benchmarks/accelerate.yaml``: FSDP1 FULL_SHARD,
  ``BACKWARD_PRE``, no forward prefetch, no offload, ``mixed_precision: 'no'``
  (the Trainer's ``bf16=True`` turns it to bf16 for the QLoRA rows);
  ``fsdp_use_orig_params`` is not set, so ``accelerate launch`` passes its
  default, true (``accelerate/commands/launch.py``); ``limit_all_gathers``
  accelerate's default, true.
* fms-hf-tuning ``tuning/sft_trainer.py`` (398c2a8, lines 387-388): with a
  PEFT config, ``fsdp_auto_wrap_policy`` from peft, which wraps every
  decoder layer and, separately, every leaf module with a trainable weight
  (the LoRA A and B matrices): no FSDP unit mixes frozen and trainable
  parameters.
* standard-peft (LoRA): ``torch_dtype: bfloat16``, no ``bf16`` flag, so no
  autocast and no FSDP mixed precision; peft's adapters in fp32.
  baseline-peft-bnb (QLoRA): NF4, double quantisation, bf16 compute and quant
  storage (so FSDP can flatten it), ``bf16=True``: autocast, FSDP
  ``MixedPrecision(bf16, bf16, bf16)``, no ``prepare_model_for_kbit_training``
  (TRL 0.11 skips it for sharded QLoRA).
* transformers 4.45's causal-LM loss inside the model (the FSDP root): the
  logits upcast to fp32 and returned, the shifted logits copied, the output
  dropped before ``backward`` as the Trainer drops it.  Reentrant gradient
  checkpointing (transformers 4.x's default) with ``enable_input_require_grads``.
* packed rows of 4096 tokens, batch 2 and 4 a GPU; LoRA r16 on q, k, v, o,
  dropout 0.1; torch AdamW.

For every run: ``max_memory_allocated`` from the second step on, the
allocated bytes after the forward, after backward and after the optimizer
step, and, from ``torch.cuda.memory._record_memory_history``, what was alive
at the allocated peak of the last step, summed by the innermost frame of
transformers, peft, bitsandbytes, torch.distributed or this file that
allocated it (``peak_by_site``).  The difference between the FSDP rank and the
single process, site by site, is the mechanism.

``--dry-run`` runs the same code on CPU with two gloo ranks (two layers, 128 and
256 tokens, the tensor-level peak of ``instrument.Tracker``, no allocation
history).  Launch::

    torchrun --nproc_per_node 2 bench/accuracy/gpu_measure.py --sweep fsdp-gap --model mistral-7b-v0.1 --steps 3
    torchrun --nproc_per_node 2 bench/accuracy/gpu_measure.py --sweep fsdp-gap --dry-run
"""
from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

GIB = 1024 ** 3
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
# frames that say which library allocated a block (the innermost one of these wins)
SITES = ("transformers/", "peft/", "bitsandbytes/", "torch/distributed/", "torch/utils/checkpoint", "fsdp_gap.py")


@dataclass(frozen=True)
class GapRun:
    method: str          # lora (fms standard-peft) | qlora (fms baseline-peft-bnb)
    batch: int
    seq: int
    fsdp: bool

    @property
    def name(self) -> str:
        return f"{'fsdp2' if self.fsdp else 'single'}/{self.method}/b{self.batch}s{self.seq}"


def gap_runs(dry: bool, has_bnb: bool) -> list[GapRun]:
    seq = 128 if dry else 4096
    methods = ("lora", "qlora") if has_bnb else ("lora",)
    return [GapRun(m, b, seq, fsdp) for m in methods for b in (2, 4) for fsdp in (False, True)]


def setup_for(shape, run: GapRun, world: int):
    from oomdoctor.estimate import Setup

    common = dict(model=shape, optimizer="adamw", batch_size=run.batch, seq_len=run.seq, grad_checkpointing=True,
                  attention="sdpa", packing=True, lora_rank=16, lora_targets=TARGETS, lora_dropout=0.1,
                  strategy="fsdp" if run.fsdp else "single", num_gpus=world if run.fsdp else 1)
    if run.method == "lora":
        return Setup(method="lora", load_dtype="bf16", precision="fp32", **common)
    return Setup(method="qlora", load_dtype="nf4", precision="bf16", **common)


def _causal_445(peft_model):
    """transformers 4.45's loss inside the module FSDP wraps (see fsdp_probe._with_loss_in_model)."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fsdp_probe import _with_loss_in_model
    return _with_loss_in_model(peft_model)


def build(shape, run: GapRun, device, tmp: Path, rank: int):
    import peft
    import torch
    import torch.distributed as dist
    import transformers

    from oomdoctor.catalog import to_hf_config

    cfg = to_hf_config(shape)
    cfg["max_position_embeddings"] = max(cfg.get("max_position_embeddings") or 0, run.seq)
    config = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    config.use_cache = False
    torch.manual_seed(0)
    if run.method == "qlora":
        path = tmp / f"{shape.id}-bf16"
        if rank == 0 and not path.exists():
            transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).save_pretrained(path)
        if dist.is_initialized():
            dist.barrier()
        bnb = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                              bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16,
                                              bnb_4bit_quant_storage=torch.bfloat16)
        model = transformers.AutoModelForCausalLM.from_pretrained(path, quantization_config=bnb, dtype=torch.bfloat16,
                                                                  attn_implementation="sdpa",
                                                                  device_map={"": device})
    else:
        with torch.device(device):
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16,
                                                                  attn_implementation="sdpa")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model.enable_input_require_grads()
    peft_model = peft.get_peft_model(model, peft.LoraConfig(r=16, lora_alpha=16, lora_dropout=0.1,
                                                            target_modules=list(TARGETS), task_type="CAUSAL_LM"))
    wrapped = _causal_445(peft_model)
    if run.fsdp:
        wrapped = _shard(wrapped, peft_model, run, device)
    wrapped.train()
    return wrapped, config.vocab_size


def _shard(model, peft_model, run: GapRun, device):
    import torch
    from peft.utils.other import fsdp_auto_wrap_policy
    from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel, MixedPrecision, ShardingStrategy

    half = torch.bfloat16
    mixed = MixedPrecision(param_dtype=half, reduce_dtype=half, buffer_dtype=half) if run.method == "qlora" else None
    return FullyShardedDataParallel(model, auto_wrap_policy=fsdp_auto_wrap_policy(peft_model),
                                    sharding_strategy=ShardingStrategy.FULL_SHARD, mixed_precision=mixed,
                                    backward_prefetch=BackwardPrefetch.BACKWARD_PRE, forward_prefetch=False,
                                    limit_all_gathers=True, use_orig_params=True, device_id=torch.device(device))


def measure(shape, run: GapRun, steps: int, dry: bool, tmp: Path, rank: int, world: int) -> dict:
    import torch

    from gpu_measure import reset_peak
    from oomdoctor.estimate import estimate

    device = "cpu" if dry else f"cuda:{torch.cuda.current_device()}"
    if not dry:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    model, vocab = build(shape, run, device, tmp, rank)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5, weight_decay=0.0)
    g = torch.Generator(device="cpu").manual_seed(1 + rank)
    ids = torch.randint(0, vocab, (run.batch, run.seq), generator=g).to(device)
    batch = {"input_ids": ids, "labels": ids.clone()}
    tracker = None
    if dry:
        import sys
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from instrument import Tracker, storage_bytes
        pre = list(model.parameters()) + list(model.buffers()) + list(batch.values())
        tracker = Tracker(storage_bytes(pre), {t.untyped_storage().data_ptr() for t in pre if t.numel()},
                          {p.untyped_storage().data_ptr() for p in model.parameters()})
    autocast = (torch.autocast(device_type="cpu" if dry else "cuda", dtype=torch.bfloat16)
                if run.method == "qlora" else contextlib.nullcontext())
    now = (lambda: tracker.pre + tracker.live) if dry else torch.cuda.memory_allocated
    moments, times, history, before = {}, [], None, 0
    with warnings.catch_warnings(), (tracker if tracker is not None else contextlib.nullcontext()):
        warnings.simplefilter("ignore")
        for step in range(steps):
            last = step == steps - 1
            if step == 1:
                reset_peak(tracker)
            if last and not dry:
                torch.cuda.synchronize()
                before = torch.cuda.memory_allocated()
                torch.cuda.memory._record_memory_history(max_entries=2_000_000, stacks="python")
            t0 = time.perf_counter()
            with autocast:
                out = model(**batch)
            loss = out["loss"]
            del out                                  # the Trainer keeps only the loss
            moments["after forward"] = now()
            loss.backward()
            moments["after backward"] = now()
            opt.step()
            opt.zero_grad(set_to_none=True)
            moments["after optimizer step"] = now()
            del loss
            if not dry:
                torch.cuda.synchronize()
            if last and not dry:
                history = torch.cuda.memory._snapshot()
                torch.cuda.memory._record_memory_history(enabled=None)
            times.append(time.perf_counter() - t0)
    allocated = tracker.peak if dry else torch.cuda.max_memory_allocated()
    reserved = None if dry else torch.cuda.max_memory_reserved()
    del model, opt, batch
    import gc
    gc.collect()
    if not dry:
        torch.cuda.empty_cache()
    est = estimate(setup_for(shape, run, world))
    result = {"run": run.name, "model": shape.id,
              "measured": {"allocated_gib": allocated / GIB,
                           "reserved_gib": None if reserved is None else reserved / GIB,
                           "moments_gib": {k: v / GIB for k, v in moments.items()},
                           "step_s": sorted(times)[len(times) // 2]},
              "estimate": {"allocated_gib": est.allocated_gib, "peak_moment": est.peak_moment,
                           "moments_gib": est.moments, "breakdown": est.breakdown}}
    result["error"] = {"allocated": (est.allocated_gib - result["measured"]["allocated_gib"])
                       / result["measured"]["allocated_gib"]}
    if history is not None:
        result["peak_by_site"] = peak_by_site(history, before, device=torch.cuda.current_device())
    return result


def peak_by_site(snapshot: dict, before: int = 0, top: int = 12, device: int = 0) -> list[dict]:
    """Replay the recorded allocations of ``device`` (the last step) and sum what is alive at their highest point
    by the innermost library frame that allocated it; ``before``: bytes allocated when the recording started
    (sharded weights, optimizer states), constant through the step, so the highest point is the step's peak."""
    traces = snapshot.get("device_traces") or []
    events = traces[device] if device < len(traces) else []
    live: dict[int, tuple[int, str]] = {}
    cur = best = 0
    best_live: dict[int, tuple[int, str]] = {}
    for ev in events:
        action, addr, size = ev.get("action"), ev.get("addr"), ev.get("size", 0)
        if action == "alloc":
            live[addr] = (size, _site(ev.get("frames") or []))
            cur += size
            if cur > best:
                best, best_live = cur, dict(live)
        elif action in ("free_requested",) and addr in live:
            cur -= live.pop(addr)[0]
    sums: dict[str, int] = defaultdict(int)
    for size, site in best_live.values():
        sums[site] += size
    rows = sorted(sums.items(), key=lambda kv: -kv[1])[:top]
    return ([{"site": "(allocated before the step)", "gib": before / GIB}]
            + [{"site": site, "gib": size / GIB} for site, size in rows]
            + [{"site": "(peak: the step's allocations and what was there before)", "gib": (best + before) / GIB}])


def _site(frames: list[dict]) -> str:
    for fr in frames:
        name = fr.get("filename", "")
        if any(s in name for s in SITES):
            tail = name.split("site-packages/")[-1]
            return f"{tail}:{fr.get('line')} {fr.get('name', '')}"
    return "(other)"


def main(args, shape, dry: bool, has_bnb: bool) -> tuple[list[dict], int]:
    """One launch under torchrun: every run on every rank (the single-process runs too, each rank on its own
    GPU, no collective); rank 0 returns the results."""
    import tempfile

    import torch
    import torch.distributed as dist

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    if world < 2:
        raise SystemExit("the fsdp-gap sweep runs under torchrun with two processes: "
                         "torchrun --nproc_per_node 2 bench/accuracy/gpu_measure.py --sweep fsdp-gap ...")
    if not dry:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("gloo" if dry else "nccl")
    plan = [r for r in gap_runs(dry, has_bnb) if not args.only or args.only in r.name]
    results = []
    # QLoRA loads a saved random model back in 4 bit: one directory every rank sees (rank 0 writes it)
    shared = Path(tempfile.gettempdir()) / f"oomdoctor_fsdp_gap_{os.environ.get('TORCHELASTIC_RUN_ID', 'run')}"
    shared.mkdir(parents=True, exist_ok=True)
    try:
        for run in plan:
            if rank == 0:
                print(f"{run.name} ...", flush=True)
            try:
                r = measure(shape, run, args.steps, dry, shared, rank, world)
            except Exception as exc:  # noqa: BLE001 - an OOM is a result too; keep the other runs
                r = {"run": run.name, "error_message": f"{type(exc).__name__}: {exc}"[:500]}
                if not dry:
                    torch.cuda.empty_cache()
            if "error_message" in r:
                print(f"rank {rank}: {r['error_message']}", flush=True)
            dist.barrier()
            results.append(r)
            if rank == 0:
                _print(r)
    finally:
        dist.barrier()
        if rank == 0:
            import shutil
            shutil.rmtree(shared, ignore_errors=True)
    dist.destroy_process_group()
    return (results if rank == 0 else []), rank


def _print(r: dict) -> None:
    if "error_message" in r:
        print(f"{r['run']:28} failed: {r['error_message'][:140]}")
        return
    m, e = r["measured"], r["estimate"]
    print(f"{r['run']:28} allocated {m['allocated_gib']:7.3f} GiB  est {e['allocated_gib']:7.3f} "
          f"({100 * r['error']['allocated']:+5.1f}%)  peak at {e['peak_moment']}")
    for site in r.get("peak_by_site", []):
        print(f"    {site['gib']:8.3f} GiB  {site['site']}")
