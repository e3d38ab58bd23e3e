"""Peak GPU memory of a few real fine-tuning steps, against the estimator (needs an NVIDIA GPU; --dry-run on CPU).

Builds a small model from its config (random weights, nothing downloaded; by
default Qwen2.5-0.5B's shape from oomdoctor's catalog), trains it for a few
steps the way the Hugging Face Trainer does (AdamW from torch with its CUDA
default, bf16 autocast over a bf16 model or, for full fine-tuning, also fp32
weights, ``zero_grad(set_to_none=True)``, gradient checkpointing through
``gradient_checkpointing_enable``) and records, from the second step on,
``torch.cuda.max_memory_allocated``, ``torch.cuda.max_memory_reserved`` and the
device's used memory (``mem_get_info``: reserved plus the CUDA context, what
nvidia-smi shows).  Runs full fine-tuning, LoRA (peft) and, when bitsandbytes
is installed, QLoRA, each with gradient checkpointing off and on, and an
evaluation that keeps every step's logits as ``Trainer.evaluate`` does with
``compute_metrics`` (held against the estimate's evaluation moment).  Writes
``bench/accuracy/data/gpu_<name>.json`` (GPU name, library versions, every run
with its Setup, the measurement and the estimate) and prints estimator vs
measured.

``--dry-run`` does everything but CUDA: a two-layer version of the model on the
CPU, the tensor-level peak from ``instrument.Tracker`` in place of
``max_memory_allocated``, no QLoRA, and nothing written unless ``--name`` is given.

``--sweep qlora-prep`` runs fms-acceleration's single-GPU QLoRA set-up (Mistral-7B,
4 × 4096 tokens) with the base prepared three ways: no upcast, peft's
``prepare_model_for_kbit_training``, and that followed by TRL 0.11's bf16 head
(``qlora_prep_runs``).

``--sweep qlora-context`` runs the QLoRA long-context cases instead (issue #13):
one row of 1k to 32k tokens (``--model llama-2-7b`` is the published sweeps'
model), LoRA r16 on every linear layer, gradient checkpointing reentrant (the
transformers 4.x default) and not (5.x), the NF4 base from bitsandbytes, each
held against the estimate.  If the estimate is low and the gap grows with the
tokens on the GPU while it is not on the CPU (``--dry-run``, bitsandbytes'
CPU backend, 64 to 512 tokens), the missing bytes are in bitsandbytes' CUDA
path; the JSON keeps the library versions, since bitsandbytes before 0.43.2
held each 4-bit matmul's input (``MatMul4Bit.forward``: ``ctx.tensors = (A, B)``,
removed in bitsandbytes#1270), outside ``save_for_backward`` and so outside
non-reentrant checkpointing's hooks.

``--sweep fsdp-gap`` (under ``torchrun --nproc_per_node 2``, two GPUs) runs
fms-acceleration's FSDP LoRA and QLoRA set-ups at 2 and 4 × 4096 tokens a GPU,
in one process and as FSDP over the two ranks, and prints what was alive at
each run's allocated peak, by allocating site (``fsdp_gap.py`` says why and how).

Usage::

    torchrun --nproc_per_node 2 bench/accuracy/gpu_measure.py --sweep fsdp-gap --model mistral-7b-v0.1 --steps 3
    python bench/accuracy/gpu_measure.py [--model qwen2.5-0.5b] [--name h200] [--steps 3] [--only lora]
    python bench/accuracy/gpu_measure.py --sweep qlora-context --model llama-2-7b --steps 2
    python bench/accuracy/gpu_measure.py --sweep qlora-prep --model mistral-7b-v0.1 --steps 3
    python bench/accuracy/gpu_measure.py --dry-run [--sweep qlora-context]
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import gc
import json
import platform
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import ROOT  # noqa: E402,F401  (puts the repository on sys.path)
from oomdoctor.catalog import ModelShape, get_model, to_hf_config  # noqa: E402
from oomdoctor.estimate import Setup, estimate  # noqa: E402

GIB = 1024 ** 3


@dataclass(frozen=True)
class Run:
    method: str                 # full | lora | qlora
    load_dtype: str             # fp32 | bf16 | nf4
    batch: int
    seq: int
    grad_checkpointing: bool
    attention: str = "sdpa"
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = ("all-linear",)
    eval_steps: int = 0         # > 0: an evaluation that keeps every step's logits (compute_metrics), no training
    reentrant: bool = False     # gradient checkpointing's use_reentrant (transformers 4.x defaulted to True)
    prep: str = "kbit"          # QLoRA: none | kbit (peft's fp32 upcast) | kbit+trl (then TRL 0.11's bf16 head)
    lora_dropout: float = 0.05

    @property
    def name(self) -> str:
        return (f"{self.method}/{self.load_dtype}/{self.attention}/b{self.batch}s{self.seq}"
                + ("/gc" if self.grad_checkpointing else "") + ("-reentrant" if self.reentrant else "")
                + (f"/eval{self.eval_steps}" if self.eval_steps else "")
                + (f"/{self.prep}" if self.method == "qlora" and self.prep != "kbit" else ""))


def runs(dry: bool) -> list[Run]:
    b, s = (1, 64) if dry else (4, 1024)
    out = []
    for gc_on in (False, True):
        out.append(Run("full", "bf16", b, s, gc_on))
        out.append(Run("lora", "bf16", b, s, gc_on))
        out.append(Run("qlora", "nf4", b, s, gc_on))
    out.append(Run("full", "fp32", b, s, True))                   # Trainer bf16=True without torch_dtype
    out.append(Run("lora", "bf16", 1, 4 * s, True))               # a long single row
    out.append(Run("lora", "bf16", b, s, False, eval_steps=4))    # Trainer.evaluate with compute_metrics
    return out


def qlora_context_runs(dry: bool) -> list[Run]:
    """QLoRA at growing context lengths, one row, checkpointing reentrant and not (see the module docstring)."""
    lengths = (64, 128, 256, 512) if dry else (1024, 2048, 4096, 8192, 16384, 32768)
    return [Run("qlora", "nf4", 1, n, True, reentrant=reentrant) for n in lengths for reentrant in (False, True)]


def qlora_prep_runs(dry: bool) -> list[Run]:
    """fms-acceleration's single-GPU QLoRA rows (published.yaml) at one row: LoRA r16 on q, k, v, o with dropout
    0.1, reentrant checkpointing, prepared three ways.  What they settle on a GPU: that the MLP's saved tensors are
    fp32 after the upcast (bitsandbytes' CUDA path returns its input's dtype as the CPU path does), that the
    recomputed layer peaks as ``bench/accuracy/data/qlora.json`` measured on CPU, and how much the caching
    allocator reserves beyond the allocated peak (the nvidia-smi rows are 10-12 % above the estimate)."""
    seq = 256 if dry else 4096
    return [Run("qlora", "nf4", 1 if dry else 4, seq, True, lora_targets=("q_proj", "k_proj", "v_proj", "o_proj"),
                reentrant=True, prep=prep, lora_dropout=0.1) for prep in ("none", "kbit", "kbit+trl")]


SWEEPS = {"qlora-context": qlora_context_runs, "qlora-prep": qlora_prep_runs, "fsdp-gap": None}  # fsdp_gap.py


def setup_for(shape: ModelShape, run: Run) -> Setup:
    evaluation = dict(eval_batch_size=run.batch, eval_compute_metrics=True,
                      eval_samples=run.batch * run.eval_steps) if run.eval_steps else {}
    return Setup(model=shape, method=run.method, load_dtype=run.load_dtype, precision="bf16",
                 optimizer="adamw", batch_size=run.batch, seq_len=run.seq,
                 grad_checkpointing=run.grad_checkpointing, attention=run.attention, lora_rank=run.lora_rank,
                 lora_targets=run.lora_targets, lora_dropout=run.lora_dropout, packing=True,
                 kbit_fp32_upcast=run.method == "qlora" and run.prep != "none",
                 kbit_head_bf16=run.method == "qlora" and run.prep == "kbit+trl", **evaluation)


def versions() -> dict[str, str]:
    import torch
    import transformers
    out = {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version()}
    for name in ("peft", "bitsandbytes", "flash_attn"):
        try:
            out[name] = __import__(name).__version__
        except Exception:       # noqa: BLE001 - optional
            pass
    return out


def build(shape: ModelShape, run: Run, device: str, tmp: Path):
    import torch
    import transformers

    cfg = to_hf_config(shape)
    cfg.setdefault("max_position_embeddings", 32768)
    if not cfg.get("max_position_embeddings"):
        cfg["max_position_embeddings"] = 32768
    model_type = cfg.pop("model_type")
    config = transformers.AutoConfig.for_model(model_type, **cfg)
    config.use_cache = False
    torch.manual_seed(0)
    dtype = torch.float32 if run.load_dtype == "fp32" else torch.bfloat16
    if run.method == "qlora":
        # bitsandbytes quantises on load: save the random model once, load it back in 4 bit
        path = tmp / f"{shape.id}-bf16"
        if not path.exists():
            transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).save_pretrained(path)
        bnb = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                              bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16)
        model = transformers.AutoModelForCausalLM.from_pretrained(path, quantization_config=bnb, dtype=torch.bfloat16,
                                                                  attn_implementation=run.attention,
                                                                  device_map={"": device})
    else:
        with torch.device(device):
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype,
                                                                  attn_implementation=run.attention)
    if run.method in ("lora", "qlora"):
        import peft
        if run.method == "qlora" and run.prep != "none":
            model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=run.grad_checkpointing)
        targets = "all-linear" if run.lora_targets == ("all-linear",) else list(run.lora_targets)
        model = peft.get_peft_model(model, peft.LoraConfig(r=run.lora_rank, lora_alpha=2 * run.lora_rank,
                                                           lora_dropout=run.lora_dropout, target_modules=targets,
                                                           task_type="CAUSAL_LM"))
        if run.method == "qlora" and run.prep == "kbit+trl":
            # TRL 0.11's SFTTrainer with bf16=True (trl/trainer/utils.py, peft_module_casting_to_bf16)
            for name, module in model.named_modules():
                if any(x in name for x in ("lm_head", "embed_tokens")) and hasattr(module, "weight") \
                        and module.weight.dtype == torch.float32:
                    module.to(torch.bfloat16)
    if run.grad_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": run.reentrant})
        if run.method in ("lora", "qlora"):
            # reentrant checkpointing gives the adapters no gradient unless the embedding output needs one (the
            # Trainer and TRL call this for PEFT models; prepare_model_for_kbit_training does too)
            model.enable_input_require_grads()
    model.train()
    return model, config.vocab_size


def measure(shape: ModelShape, run: Run, steps: int, dry: bool, tmp: Path) -> dict:
    import torch

    device = "cpu" if dry else "cuda"
    if not dry:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    model, vocab = build(shape, run, device, tmp)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-5, weight_decay=0.0)    # foreach on CUDA, the Trainer's default
    g = torch.Generator(device="cpu").manual_seed(1)
    ids = torch.randint(0, vocab, (run.batch, run.seq), generator=g).to(device)
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}
    tracker = None
    if dry:
        from instrument import Tracker, storage_bytes
        pre = list(model.parameters()) + list(model.buffers()) + list(batch.values())
        ptrs = {t.untyped_storage().data_ptr() for t in pre if t.numel()}
        tracker = Tracker(storage_bytes(pre), ptrs, {p.untyped_storage().data_ptr() for p in model.parameters()})
    autocast = torch.autocast(device_type=device, dtype=torch.bfloat16)
    times = []
    if run.eval_steps:
        with warnings.catch_warnings(), (tracker if tracker is not None else contextlib.nullcontext()):
            warnings.simplefilter("ignore")
            times = _evaluate(model, batch, run.eval_steps, autocast, dry)
        steps = 0
    with warnings.catch_warnings(), (tracker if tracker is not None else contextlib.nullcontext()):
        warnings.simplefilter("ignore")
        for step in range(steps):
            if step == 1:
                reset_peak(tracker)
            t0 = time.perf_counter()
            with autocast:
                loss = model(**batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del loss
            if not dry:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    if dry:
        allocated = reserved = tracker.peak
        used = None
    else:
        allocated = torch.cuda.max_memory_allocated()
        reserved = torch.cuda.max_memory_reserved()
        free, total = torch.cuda.mem_get_info()
        used = total - free          # reserved now plus the context: nvidia-smi's figure, after the step
    del model, opt, batch, trainable
    gc.collect()
    if not dry:
        torch.cuda.empty_cache()
    est = estimate(setup_for(shape, run))
    meas = {"allocated_gib": allocated / GIB, "reserved_gib": reserved / GIB,
            "used_gib": None if used is None else used / GIB, "step_s": sorted(times)[len(times) // 2]}
    estd = {"allocated_gib": est.allocated_gib, "reserved_gib": est.reserved_gib, "per_gpu_gib": est.per_gpu_gib,
            "peak_moment": est.peak_moment, "breakdown": est.breakdown}
    if run.eval_steps:
        # nothing trained: the evaluation moment is what was measured (its optimizer share is the untouched
        # LoRA states', a few MiB, which this run never allocates)
        allocated_est = est.moments["evaluation"]
        estd.update(allocated_gib=allocated_est, reserved_gib=allocated_est * est.reserved_gib / est.allocated_gib,
                    peak_moment="evaluation")
    return {"run": run.name, "setup": {k: v for k, v in vars(setup_for(shape, run)).items() if k != "model"},
            "model": shape.id, "measured": meas, "estimate": estd,
            "error": {"allocated": (estd["allocated_gib"] - meas["allocated_gib"]) / meas["allocated_gib"],
                      "reserved": (estd["reserved_gib"] - meas["reserved_gib"]) / meas["reserved_gib"]}}


def reset_peak(tracker) -> None:
    """Start the peak over from here: the CPU tracker's in a dry run (``tracker`` given), CUDA's otherwise."""
    if tracker is not None:
        tracker.reset_peak()
        return
    import torch
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()


def _evaluate(model, batch: dict, steps: int, autocast, dry: bool) -> list[float]:
    """What Trainer.evaluate does with compute_metrics: a no-grad forward per step, its logits and labels
    concatenated onto what is kept (transformers' EvalLoopContainer, one process)."""
    import torch

    model.eval()
    kept_logits = kept_labels = None
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        with torch.no_grad(), autocast:
            logits = model(**batch).logits
        labels = batch["labels"]
        kept_logits = logits if kept_logits is None else torch.cat((kept_logits, logits))
        kept_labels = labels if kept_labels is None else torch.cat((kept_labels, labels))
        del logits
        if not dry:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-0.5b", help="oomdoctor catalog id (random weights from its config)")
    ap.add_argument("--name", help="output name: data/gpu_<name>.json (default: the GPU's name)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--only", help="runs whose name contains this")
    ap.add_argument("--dry-run", action="store_true", help="CPU only, two layers, no CUDA")
    ap.add_argument("--sweep", choices=sorted(SWEEPS), help="run a sweep instead of the standard runs")
    args = ap.parse_args(argv)

    import torch

    warnings.filterwarnings("ignore", category=FutureWarning)
    dry = args.dry_run
    if not dry and not torch.cuda.is_available():
        print("no CUDA device: use --dry-run to exercise the script on CPU", file=sys.stderr)
        return 2
    shape = get_model(args.model)
    if dry:
        shape = replace(shape, layers=2, max_position=4096)
    # bitsandbytes' CPU backend (0.49 and later) runs NF4 on the CPU too
    has_bnb = _has("bitsandbytes") and (not dry or _bnb_on_cpu())
    if args.sweep == "fsdp-gap":
        return _fsdp_gap(args, shape, dry, has_bnb)
    plan = [r for r in (SWEEPS[args.sweep](dry) if args.sweep else runs(dry)) if (r.method != "qlora" or has_bnb)]
    if args.sweep and not plan:
        print("this sweep needs bitsandbytes (on CPU: 0.49 or later)", file=sys.stderr)
        return 2
    if args.only:
        plan = [r for r in plan if args.only in r.name]
    gpu = "cpu (dry run)" if dry else torch.cuda.get_device_name(0)
    total = None if dry else torch.cuda.get_device_properties(0).total_memory / GIB
    print(f"{gpu}; model {shape.id} ({shape.param_count() / 1e9:.2f}B params); {len(plan)} runs")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in plan:
            try:
                r = measure(shape, run, args.steps, dry, Path(tmp))
            except Exception as exc:  # noqa: BLE001 - keep the other runs; an OOM is a result too
                results.append({"run": run.name, "error_message": f"{type(exc).__name__}: {exc}"[:500]})
                print(f"{run.name:40} failed: {type(exc).__name__}: {str(exc)[:120]}")
                if not dry:
                    torch.cuda.empty_cache()
                continue
            results.append(r)
            m, e = r["measured"], r["estimate"]
            print(f"{run.name:40} allocated {m['allocated_gib']:7.2f} GiB est {e['allocated_gib']:7.2f} "
                  f"({100 * r['error']['allocated']:+5.1f}%)  reserved {m['reserved_gib']:7.2f} est "
                  f"{e['reserved_gib']:7.2f} ({100 * r['error']['reserved']:+5.1f}%)  peak at {e['peak_moment']}")
    if dry and not args.name:
        print("dry run: nothing written (give --name to write)")
        return 0
    name = args.name or gpu.replace("NVIDIA ", "").replace(" ", "_").lower()
    if args.sweep and not args.name:
        name += "_" + args.sweep
    out = HERE / "data" / f"gpu_{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"about": "bench/accuracy/gpu_measure.py", "date": _dt.date.today().isoformat(),
                               "gpu": gpu, "gpu_memory_gib": total, "dry_run": dry, "versions": versions(),
                               "steps": args.steps, "runs": results}, indent=1, default=str) + "\n")
    print(f"wrote {out.relative_to(HERE.parents[1])}")
    return 0


def _fsdp_gap(args, shape, dry: bool, has_bnb: bool) -> int:
    import torch

    import fsdp_gap

    results, rank = fsdp_gap.main(args, shape, dry, has_bnb)
    if rank or (dry and not args.name):
        if rank == 0:
            print("dry run: nothing written (give --name to write)")
        return 0
    gpu = "cpu (dry run)" if dry else torch.cuda.get_device_name(0)
    name = args.name or gpu.replace("NVIDIA ", "").replace(" ", "_").lower() + "_fsdp-gap"
    out = HERE / "data" / f"gpu_{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"about": "bench/accuracy/gpu_measure.py --sweep fsdp-gap (bench/accuracy/fsdp_gap.py)",
                               "date": _dt.date.today().isoformat(), "gpu": gpu, "dry_run": dry,
                               "versions": versions(), "steps": args.steps, "runs": results}, indent=1,
                              default=str) + "\n")
    print(f"wrote {out.relative_to(HERE.parents[1])}")
    return 0


def _bnb_on_cpu() -> bool:
    try:
        import bitsandbytes
        major, minor = (int(x) for x in bitsandbytes.__version__.split(".")[:2])
        return (major, minor) >= (0, 49)
    except Exception:  # noqa: BLE001
        return False


def _has(module: str) -> bool:
    try:
        __import__(module)
        return True
    except Exception:  # noqa: BLE001
        return False


if __name__ == "__main__":
    sys.exit(main())
