"""What FSDP keeps beyond one process at the end of the forward pass, on CPU (needs torch; two gloo ranks).

A tiny Llama in bf16 with LoRA on q/k/v/o (peft's FSDP wrap policy, FULL_SHARD,
bf16 MixedPrecision as accelerate sets it) runs one forward with Hugging Face's
gradient checkpointing, once in one process and once on each of two ranks.
``instrument.Tracker`` counts the storages created during the forward that are
still alive at its end, at their current size (FSDP frees a gathered unit by
resizing its storage to zero, so the size at creation would overstate it).
The difference between the two is what FSDP itself holds; the estimator says
it is the root unit (embeddings, final norm, lm_head), gathered in bf16 and not
resharded after forward (``oomdoctor/estimate/sharding.py``).

``--backward`` asks the same question at the loss's peak, the start of
backward, with the loss computed inside the FSDP root as transformers 4.45
(the version of the published FSDP runs) computed it: the logits upcast to
fp32 in the model and returned in its output, the shifted logits copied,
cross-entropy over them; the output dropped before ``backward`` as the Trainer
drops it.  It runs two sequence lengths: what FSDP holds beyond one process
there is a constant (the root unit), not something that grows with the tokens.

``--mixed-units`` wraps by decoder layer only (accelerate's TRANSFORMER_BASED_WRAP
without peft's policy) with ``use_orig_params=True`` (``accelerate launch``'s
default), so each unit mixes frozen weights and LoRA adapters, everything in
bf16.  FSDP1 then hands the frozen weights to autograd as views of a flat
parameter that requires grad (``_flat_param.py``, ``_use_unsharded_views``):
their gradients are computed, reduce-scattered, and kept as the sharded flat
gradient (``_use_sharded_grad_views`` exposes only the trainable part) until
``zero_grad``, the "higher than expected gradient memory usage" the FSDP
docstring warns of.  The probe reports the gradient bytes alive after backward
and the backward peak at two lengths, FSDP against one process.

Usage::

    python bench/accuracy/fsdp_probe.py [--json] [--reentrant 0|1] [--qlora 1] [--backward] [--mixed-units]

It starts ``torch.distributed.run`` for the two-rank half itself.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import ROOT  # noqa: E402,F401  (puts the repository on sys.path)

BATCH, SEQ = 2, 256
SHAPE = dict(hidden_size=256, intermediate_size=688, num_attention_heads=8, num_key_value_heads=2,
             num_hidden_layers=4, vocab_size=1000)



def _sharded(model, wrap_from, mixed_units: bool = False):
    """`model` under FSDP1 on the CPU as the PEFT FSDP recipes run it: fully sharded, bf16 compute and
    reduction, one unit per decoder layer (peft's policy, read off `wrap_from`); ``mixed_units``: decoder
    layers only, ``use_orig_params=True``, no mixed precision (the model is bf16 throughout)."""
    import functools

    import torch
    from peft.utils.other import fsdp_auto_wrap_policy
    from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision, ShardingStrategy

    half = torch.bfloat16
    if mixed_units:
        from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer

        policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})
        return FullyShardedDataParallel(model, auto_wrap_policy=policy, device_id=torch.device("cpu"),
                                        sharding_strategy=ShardingStrategy.FULL_SHARD, use_orig_params=True)
    return FullyShardedDataParallel(model, auto_wrap_policy=fsdp_auto_wrap_policy(wrap_from),
                                    device_id=torch.device("cpu"), sharding_strategy=ShardingStrategy.FULL_SHARD,
                                    mixed_precision=MixedPrecision(param_dtype=half, reduce_dtype=half, buffer_dtype=half))


def _batch(seq: int) -> dict:
    """The same token ids on every rank and run, labels the inputs."""
    import torch

    ids = torch.randint(0, SHAPE["vocab_size"], (BATCH, seq), generator=torch.Generator().manual_seed(1))
    return {"input_ids": ids, "labels": ids.clone()}

def _model(reentrant: bool, quantized_from: str | None = None):
    """The tiny Llama with LoRA; ``quantized_from``: a saved bf16 copy to load back in NF4 (QLoRA)."""
    import peft
    import torch
    import transformers

    if quantized_from:
        # bitsandbytes quantises on load, the 4-bit codes stored as bf16 so that FSDP can flatten them
        bnb = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                              bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16,
                                              bnb_4bit_quant_storage=torch.bfloat16)
        model = transformers.AutoModelForCausalLM.from_pretrained(quantized_from, quantization_config=bnb,
                                                                  dtype=torch.bfloat16, attn_implementation="sdpa",
                                                                  device_map={"": "cpu"})
    else:
        cfg = transformers.LlamaConfig(**SHAPE)
        cfg._attn_implementation = "sdpa"
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.config.use_cache = False
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    model.enable_input_require_grads()
    return peft.get_peft_model(model, peft.LoraConfig(r=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                                                      lora_dropout=0.1, task_type="CAUSAL_LM"))


def _save_source(directory: Path) -> str:
    """The bf16 model saved once, before any rank starts (transformers saves only on rank 0 in a process group)."""
    import torch
    import transformers

    cfg = transformers.LlamaConfig(**SHAPE)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(directory)
    return str(directory)


def kept_after_forward(fsdp: bool, reentrant: bool, quantized_from: str | None = None) -> int:
    """Bytes created in the forward pass and alive at its end (this rank)."""
    import torch

    from instrument import Tracker, cuda_like_dropout, storage_bytes

    model = _model(reentrant, quantized_from)
    if fsdp:
        model = _sharded(model, wrap_from=model)
    model.train()
    batch = _batch(SEQ)
    pre = list(model.parameters()) + list(model.buffers()) + list(batch.values())
    tracker = Tracker(storage_bytes(pre), {t.untyped_storage().data_ptr() for t in pre if t.numel()},
                      {p.untyped_storage().data_ptr() for p in model.parameters()})
    with cuda_like_dropout(), tracker:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(**batch).loss
        kept = sum(ref().nbytes() for ref, _, _ in tracker._refs.values() if ref() is not None)
        loss.backward()
    return kept


def _with_loss_in_model(model):
    """The causal LM's head and loss inside the module FSDP wraps, as transformers 4.45 computed them."""
    import torch
    import torch.nn.functional as F
    from transformers.modeling_outputs import CausalLMOutputWithPast

    class Causal445(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, labels):
            base = self.inner.get_base_model()
            logits = base.lm_head(base.model(input_ids=input_ids).last_hidden_state).float()
            shifted = logits[..., :-1, :].contiguous()
            loss = F.cross_entropy(shifted.view(-1, shifted.size(-1)), labels[..., 1:].contiguous().view(-1))
            return CausalLMOutputWithPast(loss=loss, logits=logits)

    return Causal445(model)


def peak_in_backward(fsdp: bool, reentrant: bool, seq: int, mixed_units: bool = False):
    """The highest live bytes in backward beyond what existed before the step (this rank); with
    ``mixed_units`` also the gradient bytes alive after backward (distinct storages)."""
    import torch

    from instrument import Tracker, cuda_like_dropout, storage_bytes

    peft_model = _model(reentrant)
    if mixed_units:
        # one dtype per flat parameter: the adapters in bf16 with the base (in one process too)
        for p in peft_model.parameters():
            p.data = p.data.to(torch.bfloat16)
    model = _with_loss_in_model(peft_model)
    if fsdp:
        model = _sharded(model, wrap_from=peft_model, mixed_units=mixed_units)
    model.train()
    batch = _batch(seq)
    pre = list(model.parameters()) + list(model.buffers()) + list(batch.values())
    peak = 0
    for _ in range(2):
        tracker = Tracker(storage_bytes(pre), {t.untyped_storage().data_ptr() for t in pre if t.numel()},
                          {p.untyped_storage().data_ptr() for p in model.parameters()})
        with cuda_like_dropout(), tracker:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = model(**batch)
            loss = out["loss"]
            del out                     # the Trainer keeps only the loss
            tracker.phase = "bwd"
            tracker.reset_peak()
            loss.backward()
            peak = tracker.peak - tracker.pre
        grads = {p.grad.untyped_storage().data_ptr(): p.grad.untyped_storage().nbytes()
                 for p in model.parameters() if p.grad is not None}
        for p in model.parameters():
            p.grad = None
    return {"peak": peak, "grads": sum(grads.values())} if mixed_units else peak


def _rank_main(reentrant: bool, quantized_from: str | None, out: str, seqs: list[int],
               mixed_units: bool = False) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo")
    # Every length in the one launch: starting two ranks (each importing torch, transformers and peft) costs
    # more than the probe itself. Each call builds its own model and counts only what it creates.
    kept = ([peak_in_backward(True, reentrant, seq, mixed_units) for seq in seqs] if seqs
            else kept_after_forward(True, reentrant, quantized_from))
    if dist.get_rank() == 0:
        Path(out).write_text(json.dumps({"kept": kept}))
    dist.destroy_process_group()


def _two_ranks(reentrant: bool, source: str | None, tmp: str, seqs: tuple[int, ...] = (),
               mixed_units: bool = False) -> int | list:
    out = Path(tmp) / "rank0.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
               "--master_port", str(29500 + (os.getpid() + sum(seqs)) % 1000), __file__, "--rank-main",
               "--reentrant", str(int(reentrant)), "--quantized-from", source or "", "--out", str(out),
               "--seqs", ",".join(map(str, seqs))] + (["--mixed-units"] if mixed_units else [])
    ranks = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if not out.exists():
        raise RuntimeError("the two-rank run failed:\n" + (ranks.stderr or ranks.stdout)[-3000:])
    return json.loads(out.read_text())["kept"]


def probe_backward(reentrant: bool = True, seqs: tuple[int, ...] = (SEQ // 2, SEQ)) -> dict:
    """What FSDP holds beyond one process at the backward peak, at each sequence length."""
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        on_two_ranks = _two_ranks(reentrant, None, tmp, seqs)
    for seq, fsdp in zip(seqs, on_two_ranks):
        single = peak_in_backward(False, reentrant, seq)
        rows.append({"tokens": BATCH * seq, "single_bytes": single, "fsdp_bytes": fsdp, "fsdp_extra_bytes": fsdp - single})
    return {"reentrant": reentrant, "vocab": SHAPE["vocab_size"], "rows": rows}


def probe_mixed_units(reentrant: bool = True, seqs: tuple[int, ...] = (SEQ // 2, SEQ)) -> dict:
    """Decoder-layer units mixing frozen weights and adapters under ``use_orig_params=True``: the gradient
    bytes alive after backward and the backward peak, FSDP rank 0 against one process, at each length."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        on_two_ranks = _two_ranks(reentrant, None, tmp, seqs, mixed_units=True)
    rows = []
    for seq, fsdp in zip(seqs, on_two_ranks):
        single = peak_in_backward(False, reentrant, seq, mixed_units=True)
        rows.append({"tokens": BATCH * seq, "single": single, "fsdp": fsdp})
    return {"reentrant": reentrant, "rows": rows, "decoder_param_bytes": _decoder_param_bytes()}


def _decoder_param_bytes() -> int:
    """bf16 bytes of every decoder layer's weights with the LoRA adapters on q/k/v/o (r = 16)."""
    h, i, heads, kv = SHAPE["hidden_size"], SHAPE["intermediate_size"], SHAPE["num_attention_heads"], \
        SHAPE["num_key_value_heads"]
    kvd = h // heads * kv
    base = 2 * h * h + 2 * h * kvd + 3 * h * i + 2 * h
    lora = 16 * (h + h) * 2 + 16 * (h + kvd) * 2
    return 2 * SHAPE["num_hidden_layers"] * (base + lora)


def probe(reentrant: bool, qlora: bool = False) -> dict:
    import tempfile

    from oomdoctor.catalog import shape_from_config
    from oomdoctor.estimate import anatomy

    with tempfile.TemporaryDirectory() as tmp:
        source = _save_source(Path(tmp) / "source") if qlora else None
        single = kept_after_forward(False, reentrant, source)
        fsdp = _two_ranks(reentrant, source, tmp)
    shape = shape_from_config({"model_type": "llama", **SHAPE})
    return {"reentrant": reentrant, "qlora": qlora, "tokens": BATCH * SEQ, "single_bytes": single, "fsdp_bytes": fsdp,
            "fsdp_extra_bytes": fsdp - single, "estimated_root_bytes": anatomy.root_params(shape) * 2}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--reentrant", type=int, choices=(0, 1))
    ap.add_argument("--qlora", type=int, choices=(0, 1), default=0,
                    help="1: the base in NF4 through bitsandbytes (installed separately; its CPU backend will do)")
    ap.add_argument("--backward", action="store_true",
                    help="at the loss's backward peak, transformers-4.45 loss in the model, two sequence lengths")
    ap.add_argument("--mixed-units", action="store_true",
                    help="decoder-layer units mixing frozen weights and adapters, use_orig_params=True")
    ap.add_argument("--seqs", default="", help=argparse.SUPPRESS)
    ap.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--quantized-from", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rank_main:
        _rank_main(bool(args.reentrant), args.quantized_from or None, args.out,
                   [int(n) for n in args.seqs.split(",") if n], args.mixed_units)
        return 0
    modes = [bool(args.reentrant)] if args.reentrant is not None else [True, False]
    if args.mixed_units:
        results = [probe_mixed_units(r) for r in modes]
        if args.json:
            print(json.dumps(results))
            return 0
        for r in results:
            for row in r["rows"]:
                s1, f2 = row["single"], row["fsdp"]
                print(f"mixed units, reentrant={r['reentrant']!s:5} {row['tokens']:>5} tokens  gradients after "
                      f"backward: one process {s1['grads']:>10,} B, FSDP rank 0 {f2['grads']:>10,} B (half of the "
                      f"decoder layers' {r['decoder_param_bytes']:,} B: {r['decoder_param_bytes'] // 2:,}); "
                      f"backward peak {s1['peak']:>11,} B / {f2['peak']:>11,} B")
        return 0
    if args.backward:
        results = [probe_backward(r) for r in modes]
        if args.json:
            print(json.dumps(results))
            return 0
        for r in results:
            for row in r["rows"]:
                print(f"backward peak, reentrant={r['reentrant']!s:5} {row['tokens']:>5} tokens  one process "
                      f"{row['single_bytes']:>11,} B  FSDP rank 0 {row['fsdp_bytes']:>11,} B  FSDP holds "
                      f"{row['fsdp_extra_bytes']:>11,} B more")
        return 0
    results = [probe(r, bool(args.qlora)) for r in modes]
    if args.json:
        print(json.dumps(results))
        return 0
    for r in results:
        print(f"{'QLoRA' if r['qlora'] else 'LoRA'} reentrant={r['reentrant']!s:5}  one process {r['single_bytes']:>10,} B  FSDP rank 0 "
              f"{r['fsdp_bytes']:>10,} B  FSDP holds {r['fsdp_extra_bytes']:>10,} B more; the estimator's root unit "
              f"{r['estimated_root_bytes']:>10,} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
