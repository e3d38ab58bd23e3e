"""Ground truth on CPU for the step's memory mechanisms beyond the plain Trainer path (issue #13).

Each case runs a tiny random-weight Llama (``common.FAMILIES["llama"]``) for
two steps under ``instrument.Tracker`` and compares what it measures with the
estimator's figure for the same ``Setup``:

* ``chunked``: the loss computed the way torchtune's ``CEWithChunkedOutputLoss``
  does it (the final hidden states through lm_head in C chunks along the
  sequence, each chunk upcast and put through ``cross_entropy`` on its own,
  summed and divided by the label count; the chunk list dropped before
  backward).  Measured: the vocabulary-sized tensors alive at the end of the
  forward pass, the loss's working set in the forward pass, and at the start
  of backward (``logits(..., loss="chunked")``'s kept, forward, backward).
* ``offload``: the forward pass under ``torch.autograd.graph.save_on_cpu``'s
  pack hook for every saved tensor of at least 1024 bytes that is not a
  parameter (torchtune ``OffloadActivations``' rule); on this CPU-only machine
  its ``pin_memory=True`` branch still copies into a new tensor, as it does
  into pinned memory beside a GPU, so the original storage is freed when
  nothing else holds it.  Measured: the bytes copied ("host") and what stays
  ("device") at the end of the forward pass, with and without checkpointing,
  against ``Activations.in_layers`` (moved) and ``kept - in_layers`` (stays).
* ``optimizer_in_backward``: full fine-tuning with one ``torch.optim.AdamW``
  (foreach) per parameter stepped from ``register_post_accumulate_grad_hook``
  and its gradient freed there, with the full loss and with the chunked one
  (lm_head called once per chunk, tied and untied).  Measured: the largest
  gradient bytes alive at once and the step's peak, against the estimate's
  allocated peak.

* ``compiled``: every decoder layer put through ``torch.compile`` (inductor,
  as torchtune's ``compile: True`` does layer by layer), no checkpointing.
  Measured: what the autograd graph behind the final hidden state holds for
  backward (``instrument.graph_saved``, which sees inside compiled graphs),
  once eager and once compiled; the difference against the estimate's kept
  activations with ``compiled`` off and on.
* ``compiled_chunked``: torchtune's chunked loss with its per-chunk upcast and
  cross-entropy compiled (``compile_loss`` compiles ``compute_cross_entropy``).
  Measured: the vocabulary-sized tensors the loss's graph holds for backward,
  against ``logits(..., loss="chunked", compiled=True).kept``.

* ``qlora`` (``--qlora``; needs bitsandbytes, whose CPU backend runs here):
  the tiny Llama saved in bf16 and loaded back in NF4 (double quantisation,
  bf16 compute), LoRA on q, k, v, o with dropout 0.1, bf16 autocast, with and
  without peft's ``prepare_model_for_kbit_training`` (the fp32 upcast), and
  after it TRL's ``peft_module_casting_to_bf16`` (embeddings and lm_head back
  to bf16, norms fp32), as TRL 0.11's SFTTrainer prepares a k-bit model on one
  GPU.  Without checkpointing: the bytes a middle decoder layer saves for
  backward per token, against ``Activations.per_layer``.  With checkpointing
  (reentrant and not) and a vocabulary of 64, so that the recomputed layer and
  not the loss makes the backward peak: how far the backward pass rises above
  what is alive when it starts, against the recomputed layer's peak
  (``max(recompute, recompute - recompute_tail + backward_working)``).
  Written to ``data/qlora.json``, with ``moe_loop``:
* ``moe_loop``: a sparse MoE block computed the way transformers 4's Mixtral
  did (``MixtralSparseMoeBlock.forward``: one ``nn.Linear`` MLP per expert,
  looped over, each expert's output scaled by its routing weight and
  ``index_add_``-ed into the result), frozen experts, a fp32 input that needs
  a gradient.  Measured: how far backward rises above what is alive when it
  starts, against one expert's three MLP gradients over its share of the
  routed tokens (``k·T/E``), which is what ``activations`` counts for
  unfused experts; all experts at once would be E times more.

Context parallelism needs no run: a rank of a context-parallel group holds
what one rank running ``seq / cp`` tokens holds, so the grid's measured
single-rank cells are the ground truth (``tests/test_accuracy.py`` checks the
estimate at ``cp × seq`` against them).

Usage::

    .venv/bin/python bench/accuracy/measure_mechanisms.py [--no-write]
    PYTHONPATH=<bitsandbytes> .venv/bin/python bench/accuracy/measure_mechanisms.py --qlora

Writes ``bench/accuracy/data/mechanisms.json`` (``data/qlora.json`` with ``--qlora``).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import warnings
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import Cell, hf_config, setup_for_cell, shape_for  # noqa: E402

DATA = HERE / "data" / "mechanisms.json"
QLORA_DATA = HERE / "data" / "qlora.json"
MIN_OFFLOAD = 1024          # torchtune OffloadActivations(min_offload_size=1024)

CASES = [
    {"name": "chunked/fp32/b2s64", "kind": "chunked", "cell": Cell("llama", "full", batch=2, seq=64), "chunks": 8},
    {"name": "chunked/lora/fp32/b1s128", "kind": "chunked",
     "cell": Cell("llama", "lora", batch=1, seq=128), "chunks": 4},
    {"name": "chunked/bf16/b2s64", "kind": "chunked", "cell": Cell("llama", "full", dtype="bf16", batch=2, seq=64),
     "chunks": 8},
    {"name": "offload/full/b2s64", "kind": "offload", "cell": Cell("llama", "full", batch=2, seq=64)},
    {"name": "offload/lora/b2s64", "kind": "offload", "cell": Cell("llama", "lora", batch=2, seq=64)},
    {"name": "offload/full/b2s64/gc", "kind": "offload",
     "cell": Cell("llama", "full", batch=2, seq=64, grad_checkpointing=True)},
    {"name": "offload/lora/b1s128/gc", "kind": "offload",
     "cell": Cell("llama", "lora", batch=1, seq=128, grad_checkpointing=True)},
    {"name": "compiled/full/bf16/b2s128", "kind": "compiled",
     "cell": Cell("llama", "full", dtype="bf16", batch=2, seq=128)},
    {"name": "compiled/lora/bf16/b2s128", "kind": "compiled",
     "cell": Cell("llama", "lora", dtype="bf16", batch=2, seq=128)},
    {"name": "compiled_chunked/bf16/b2s64", "kind": "compiled_chunked",
     "cell": Cell("llama", "full", dtype="bf16", batch=2, seq=64), "chunks": 8},
    {"name": "optimizer_in_backward/full/b2s64", "kind": "optim_bwd", "cell": Cell("llama", "full", batch=2, seq=64)},
    {"name": "optimizer_in_backward/chunked/full/b2s64", "kind": "optim_bwd",
     "cell": Cell("llama", "full", batch=2, seq=64), "chunks": 4},
    {"name": "optimizer_in_backward/chunked/full/tied/bf16/b2s64", "kind": "optim_bwd",
     "cell": Cell("qwen2", "full", dtype="bf16", batch=2, seq=64), "chunks": 8},
    {"name": "optimizer_in_backward/full/b1s64/gc", "kind": "optim_bwd",
     "cell": Cell("llama", "full", batch=1, seq=64, grad_checkpointing=True)},
]


def build(cell: Cell):
    import torch
    import transformers

    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    cfg = hf_config(cell.family)
    model_type = cfg.pop("model_type")
    config = transformers.AutoConfig.for_model(model_type, **cfg)
    config.use_cache = False
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=cell.attention,
                                                          dtype=dtypes[cell.dtype])
    if cell.method == "lora":
        import peft
        model = peft.get_peft_model(model, peft.LoraConfig(r=cell.lora_rank, lora_alpha=2 * cell.lora_rank,
                                                            target_modules=list(cell.lora_targets),
                                                            task_type="CAUSAL_LM"))
    if cell.grad_checkpointing:
        model.gradient_checkpointing_enable()
    model.train()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, config.vocab_size, (cell.batch, cell.seq), generator=g)
    return model, config, {"input_ids": ids, "labels": ids.clone()}


def tracker_for(model, batch):
    from instrument import Tracker, storage_bytes

    params = list(model.parameters())
    pre = params + list(model.buffers()) + list(batch.values())
    return Tracker(storage_bytes(pre), {t.untyped_storage().data_ptr() for t in pre if t.numel()},
                   {p.untyped_storage().data_ptr() for p in params})


def chunked_loss(model, batch, chunks: int, tracker, on_grad=None):
    """torchtune's chunked cross-entropy over the model's final hidden states (labels already aligned)."""
    import torch
    import torch.nn.functional as F

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    hidden = base.model(input_ids=batch["input_ids"]).last_hidden_state
    tracker.scope = "loss"
    tracker.open("loss_fwd")
    head = base.get_output_embeddings()
    outputs = [head(part) for part in hidden.chunk(chunks, dim=1)]
    if on_grad is not None:
        for out in outputs:
            out.register_hook(on_grad)
    labels = [part.reshape(-1) for part in batch["labels"].chunk(chunks, dim=1)]
    count = batch["labels"].numel()
    total = 0.0
    for out, lab in zip(outputs, labels):
        total = total + F.cross_entropy(out.reshape(-1, out.size(-1)).float(), lab, reduction="sum")
    del outputs
    loss = total / count
    return loss, tracker.close("loss_fwd")


def run_chunked(case) -> dict:
    import torch

    from oomdoctor.estimate import anatomy
    from oomdoctor.estimate.activations import compute_dtypes
    from oomdoctor.estimate.logits import logits

    cell, C = case["cell"], case["chunks"]
    model, config, batch = build(cell)
    tracker = tracker_for(model, batch)
    V, T = config.vocab_size, cell.batch * cell.seq
    out = {}
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-4, foreach=True)
    with warnings.catch_warnings(), tracker:
        warnings.simplefilter("ignore")
        for step in range(2):
            tracker.phase, tracker.scope = "fwd", "outside"
            state = {"seen": 0}

            def on_grad(grad):
                # a hook on lm_head's output runs as its backward starts; every chunk's loss backward runs before
                # any lm_head backward (autograd takes the most recently created ready node first, and the losses
                # were created after every lm_head call), so the first call closes the loss's window
                state["seen"] += 1
                if state["seen"] == 1:
                    state["bwd"] = tracker.close("loss_bwd")

            loss, fwd = chunked_loss(model, batch, C, tracker, on_grad)
            kept = sum(n for n, label in tracker.live_storages(lambda lab: lab == "fwd:loss") if n >= T * V // C)
            tracker.phase = "bwd"
            tracker.open("loss_bwd")
            loss.backward()
            del loss
            tracker.phase = "opt"
            opt.step()
            opt.zero_grad(set_to_none=True)
            out = {"kept": kept, "forward": fwd, "backward": state.get("bwd", 0) + kept}
    setup = setup_for_cell(cell)
    p, _, _ = compute_dtypes(setup)
    est = logits(T, anatomy.dims(setup.model).vocab, p, loss="chunked", chunks=C)
    return {"measured": out, "estimate": {"kept": est.kept, "forward": est.forward, "backward": est.backward}}


def run_offload(case) -> dict:
    import torch

    from oomdoctor.estimate.activations import activations

    cell = case["cell"]
    model, config, batch = build(cell)
    tracker = tracker_for(model, batch)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    soc = torch.autograd.graph.save_on_cpu(pin_memory=True)

    head = (model.get_base_model() if hasattr(model, "get_base_model") else model).get_output_embeddings()
    head.register_forward_pre_hook(lambda m, a: setattr(tracker, "scope", "head"))
    head.register_forward_hook(lambda m, a, o: setattr(tracker, "scope", "loss"))

    def pack(t):
        # torchtune's rule: parameters, tensors under 1 KiB and the output projection's (NoOpManager) stay
        if (t.numel() and t.untyped_storage().data_ptr() in params) or tracker.scope == "head" \
                or t.element_size() * t.nelement() < MIN_OFFLOAD:
            return ("kept", t)
        scope = tracker.scope
        tracker.scope = "host"
        try:
            return ("moved", soc.pack_hook(t))
        finally:
            tracker.scope = scope

    def unpack(packed):
        kind, payload = packed
        return payload if kind == "kept" else soc.unpack_hook(payload)

    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4, foreach=True)
    out = {}
    with warnings.catch_warnings(), tracker:
        warnings.simplefilter("ignore")
        for step in range(2):
            tracker.phase, tracker.scope = "fwd", "outside"
            with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
                logits = model(**batch).logits
            tracker.scope = "loss"
            loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)).float(),
                                                     batch["labels"][:, 1:].reshape(-1))
            del logits
            live = tracker.live_storages(lambda lab: lab.startswith("fwd:"))
            host = sum(n for n, lab in live if lab == "fwd:host")
            device = sum(n for n, lab in live if lab not in ("fwd:host", "fwd:loss"))    # the logits are the loss's
            tracker.phase = "bwd"
            loss.backward()
            del loss
            tracker.phase = "opt"
            opt.step()
            opt.zero_grad(set_to_none=True)
            out = {"host": host, "device": device}
    setup = setup_for_cell(replace(cell, padded=False))
    acts = activations(setup, cell.batch)
    batch_bytes = 2 * 8 * cell.batch * cell.seq      # input_ids and labels (not saved tensors: existed before)
    moved = acts.in_layers + acts.outside_saved
    # host: each save is copied on its own, so a tensor several ops save is copied several times (see offload.py)
    return {"measured": out, "estimate": {"host": moved, "device": acts.kept - moved - batch_bytes}}


def run_optimizer_in_backward(case) -> dict:
    import torch

    from oomdoctor.estimate import estimate
    from oomdoctor.estimate.dtypes import GIB

    cell = case["cell"]
    model, config, batch = build(cell)
    tracker = tracker_for(model, batch)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizers = {p: torch.optim.AdamW([p], lr=1e-4, foreach=True) for p in trainable}
    alive = {"grads": 0, "max": 0}

    def step(p):
        alive["grads"] = sum(q.grad.untyped_storage().nbytes() for q in trainable if q.grad is not None)
        alive["max"] = max(alive["max"], alive["grads"])
        optimizers[p].step()
        optimizers[p].zero_grad(set_to_none=True)

    for p in trainable:
        p.register_post_accumulate_grad_hook(step)
    with warnings.catch_warnings(), tracker:
        warnings.simplefilter("ignore")
        for s in range(2):
            if s == 1:
                tracker.reset_peak()
                alive["max"] = 0
            tracker.phase, tracker.scope = "fwd", "outside"
            if case.get("chunks"):
                loss, _ = chunked_loss(model, batch, case["chunks"], tracker)
            else:
                loss = model(**batch).loss
            tracker.phase = "bwd"
            loss.backward()
            del loss
    setup = replace(setup_for_cell(replace(cell, padded=False)), optimizer_in_backward=True)
    if case.get("chunks"):
        setup = replace(setup, loss="chunked", loss_chunks=case["chunks"])
    est = estimate(setup)
    largest = max(p.numel() * p.element_size() for p in trainable)
    return {"measured": {"grads_at_once": alive["max"], "peak": tracker.peak},
            "estimate": {"grads_at_once": largest, "peak": est.allocated_gib * GIB}}


def _graph_bytes(root, model) -> tuple[int, dict]:
    from instrument import graph_saved

    skip = {t.untyped_storage().data_ptr() for t in list(model.parameters()) + list(model.buffers()) if t.numel()}
    seen = graph_saved(root, skip)
    return sum(v[0] for v in seen.values()), seen


def run_compiled(case) -> dict:
    """Saved for backward behind the final hidden state, eager and with every decoder layer compiled."""
    from oomdoctor.estimate.activations import activations

    cell = case["cell"]
    model, config, batch = build(cell)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    measured = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mode in ("eager", "compiled"):
            if mode == "compiled":
                for layer in base.model.layers:
                    layer.compile(backend="inductor")
            for _ in range(2):          # the first compiled call compiles; the second is the step measured
                hidden = base.model(input_ids=batch["input_ids"]).last_hidden_state
                measured[mode], _ = _graph_bytes(hidden, model)
                hidden.float().pow(2).mean().backward()
                model.zero_grad(set_to_none=True)
                del hidden
    setup = replace(setup_for_cell(cell), packing=True)
    eager, compiled = (activations(replace(setup, compiled=c), cell.batch).kept for c in (False, True))
    return {"measured": {"saved_less": measured["eager"] - measured["compiled"], "eager": measured["eager"],
                         "compiled": measured["compiled"]},
            "estimate": {"saved_less": eager - compiled, "eager": eager, "compiled": compiled}}


def run_compiled_chunked(case) -> dict:
    """The chunked loss with its per-chunk upcast and cross-entropy compiled: what its graph keeps."""
    import torch
    import torch.nn.functional as F

    from oomdoctor.estimate import anatomy
    from oomdoctor.estimate.activations import compute_dtypes
    from oomdoctor.estimate.logits import logits

    cell, C = case["cell"], case["chunks"]
    model, config, batch = build(cell)
    V, T = config.vocab_size, cell.batch * cell.seq

    def chunk_loss(chunk, labels):
        return F.cross_entropy(chunk.float(), labels, reduction="sum")

    chunk_loss = torch.compile(chunk_loss, backend="inductor")
    kept = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            hidden = model.model(input_ids=batch["input_ids"]).last_hidden_state
            _, below = _graph_bytes(hidden, model)
            outputs = [model.lm_head(part) for part in hidden.chunk(C, dim=1)]
            labels = [part.reshape(-1) for part in batch["labels"].chunk(C, dim=1)]
            total = 0.0
            for out, lab in zip(outputs, labels):
                total = total + chunk_loss(out.reshape(-1, V), lab)
            del outputs
            _, every = _graph_bytes(total, model)
            kept = sum(n for ptr, (n, _, _, _) in every.items() if ptr not in below and n >= T * V // C)
            total.backward()
            model.zero_grad(set_to_none=True)
    setup = setup_for_cell(cell)
    p, _, _ = compute_dtypes(setup)
    est = logits(T, anatomy.dims(setup.model).vocab, p, loss="chunked", chunks=C, compiled=True)
    return {"measured": {"kept": kept}, "estimate": {"kept": est.kept}}


FMS_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")     # fms-acceleration's QLoRA rows (published.yaml)


def _qlora_cell(batch: int, seq: int, gc: bool = False) -> Cell:
    return Cell("llama", "lora", dtype="bf16", autocast=True, batch=batch, seq=seq, grad_checkpointing=gc,
                lora_targets=FMS_TARGETS, lora_dropout=0.1)


QLORA_CASES = [
    {"name": f"qlora/{prep}/b2s64", "kind": "qlora", "cell": _qlora_cell(2, 64), "prep": prep}
    for prep in ("none", "kbit", "kbit+trl")
] + [
    {"name": f"qlora/{prep}/b2s128/gc/{'reentrant' if re else 'nonreentrant'}", "kind": "qlora",
     "cell": _qlora_cell(2, 128, gc=True), "prep": prep, "reentrant": re, "vocab": 64}
    for prep in ("none", "kbit+trl") for re in (True, False)
]


QLORA_CASES.append({"name": "moe_loop/e4k2/t1024", "kind": "moe_loop", "cell": Cell("mixtral", "lora"),
                    "experts": 4, "top_k": 2, "hidden": 64, "intermediate": 512, "tokens": 1024})


def run_moe_loop(case) -> dict:
    import torch
    import torch.nn.functional as F

    from instrument import Tracker, storage_bytes

    E, k, h, inter, T = (case[key] for key in ("experts", "top_k", "hidden", "intermediate", "tokens"))
    torch.manual_seed(0)
    gate = torch.randn(E, h)
    experts = [(torch.randn(inter, h), torch.randn(inter, h), torch.randn(h, inter)) for _ in range(E)]

    def block(x):
        weights, chosen = torch.topk(F.softmax(x @ gate.t(), dim=-1, dtype=torch.float32), k, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
        out = torch.zeros_like(x)
        for e, (w_gate, w_up, w_down) in enumerate(experts):
            rows, slot = torch.where(chosen == e)
            routed = x[rows]
            y = (F.silu(routed @ w_gate.t()) * (routed @ w_up.t())) @ w_down.t()
            out.index_add_(0, rows, y * weights[rows, slot, None])
        return out

    x = torch.randn(T, h, requires_grad=True)
    frozen = [gate] + [w for ws in experts for w in ws]
    tracker = Tracker(storage_bytes(frozen + [x]), {t.untyped_storage().data_ptr() for t in frozen + [x]},
                      {t.untyped_storage().data_ptr() for t in frozen})
    with tracker:
        loss = block(x).pow(2).sum()
        start = tracker.live
        tracker.phase = "bwd"
        tracker.reset_peak()
        loss.backward()
    rise = tracker.phase_peak["bwd"] - tracker.pre - start
    return {"measured": {"backward_rise": rise}, "estimate": {"backward_rise": 3 * 4 * inter * T * k / E}}


def qlora_setup(case):
    """The estimator's Setup for a QLoRA case (the tiny shape with the case's vocabulary)."""
    from common import hf_config
    from oomdoctor.catalog import from_hf_config

    cell = case["cell"]
    shape = from_hf_config(dict(hf_config("llama"), vocab_size=case.get("vocab", hf_config("llama")["vocab_size"])),
                           id="tiny-llama")
    return replace(setup_for_cell(cell, shape), method="qlora", load_dtype="nf4", packing=True,
                   kbit_fp32_upcast=case["prep"] != "none", kbit_head_bf16=case["prep"] == "kbit+trl")


def build_qlora(case):
    """The tiny Llama in NF4 through bitsandbytes, prepared as the case says, with LoRA."""
    import tempfile

    import peft
    import torch
    import transformers

    cell = case["cell"]
    cfg = hf_config(cell.family)
    cfg["vocab_size"] = case.get("vocab", cfg["vocab_size"])
    model_type = cfg.pop("model_type")
    config = transformers.AutoConfig.for_model(model_type, **cfg)
    config.use_cache = False
    torch.manual_seed(0)
    plain = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.bfloat16)
    bnb = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                          bnb_4bit_compute_dtype=torch.bfloat16)
    with tempfile.TemporaryDirectory() as tmp:
        plain.save_pretrained(tmp)
        model = transformers.AutoModelForCausalLM.from_pretrained(tmp, quantization_config=bnb, dtype=torch.bfloat16,
                                                                  attn_implementation="sdpa", device_map={"": "cpu"})
    model.config.use_cache = False
    kwargs = {"use_reentrant": case.get("reentrant", True)}
    if case["prep"] != "none":
        model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=cell.grad_checkpointing,
                                                     gradient_checkpointing_kwargs=kwargs)
    elif cell.grad_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        model.enable_input_require_grads()
    model = peft.get_peft_model(model, peft.LoraConfig(r=cell.lora_rank, lora_alpha=2 * cell.lora_rank,
                                                        lora_dropout=cell.lora_dropout,
                                                        target_modules=list(cell.lora_targets), task_type="CAUSAL_LM"))
    if case["prep"] == "kbit+trl":
        # trl/trainer/utils.py peft_module_casting_to_bf16 (TRL up to 0.25, bf16=True)
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.LayerNorm) or "norm" in name:
                module.to(torch.float32)
            elif any(x in name for x in ("lm_head", "embed_tokens")) and hasattr(module, "weight") \
                    and module.weight.dtype == torch.float32:
                module.to(torch.bfloat16)
    model.train()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, config.vocab_size, (cell.batch, cell.seq), generator=g)
    return model, {"input_ids": ids, "labels": ids.clone()}


def _adapter_copies(acts) -> float:
    """The part of ``weight_copies`` that is the adapters' half copies (the derivation line states it)."""
    said = [ln for ln in acts.lines if ln.key.endswith("activations.adapter_copies")]
    return sum(ln.params["bytes"] * ln.params["count"] for ln in said)


def run_qlora(case) -> dict:
    import torch

    from instrument import cuda_like_dropout
    from oomdoctor.estimate.activations import activations

    cell = case["cell"]
    model, batch = build_qlora(case)
    acts = activations(qlora_setup(case), cell.batch)
    tokens = cell.batch * cell.seq
    if not cell.grad_checkpointing:
        params = list(model.parameters()) + list(model.buffers()) + list(batch.values())
        skip = {t.untyped_storage().data_ptr() for t in params if t.numel()}
        layers = model.base_model.model.model.layers
        where = ["outside"]
        saved: dict[int, tuple[int, str]] = {}
        # autocast's half copies of the fp32 adapters are weight copies (``weight_copies``), not activations:
        # 2-D tensors of an adapter weight's shape, which no activation here has
        adapter_shapes = {tuple(q.shape) for q in model.parameters() if q.requires_grad}
        head_shape = tuple(model.get_output_embeddings().weight.shape)

        def pack(t):
            if t.numel() and not (t.dim() == 2 and tuple(t.shape) in adapter_shapes):
                st = t.untyped_storage()
                if st.data_ptr() not in skip and st.data_ptr() not in saved:
                    head = where[0] == "outside" and tuple(t.shape) in (head_shape, head_shape[::-1])
                    saved[st.data_ptr()] = (st.nbytes(), "lm_head copy" if head else where[0])
            return t
        for i, layer in enumerate(layers):
            layer.register_forward_pre_hook(lambda m, a, i=i: where.__setitem__(0, f"layer{i}"))
            layer.register_forward_hook(lambda m, a, o: where.__setitem__(0, "outside"))
        with cuda_like_dropout(), torch.autocast("cpu", dtype=torch.bfloat16), \
                torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(**batch)
        middle = f"layer{len(layers) - 1}"        # not the first: its input needs a gradient only with checkpointing
        per_layer = sum(n for n, w in saved.values() if w == middle) / tokens
        # lm_head's half copy, saved by autocast's matmul while lm_head is fp32 (no other tensor has its shape)
        head_copy = sum(n for n, w in saved.values() if w == "lm_head copy")
        return {"measured": {"per_layer": per_layer, "lm_head_copy": head_copy},
                "estimate": {"per_layer": acts.per_layer, "lm_head_copy": acts.weight_copies - _adapter_copies(acts)}}
    tracker = tracker_for(model, batch)
    params = list(model.parameters())
    with cuda_like_dropout(), tracker:
        for _ in range(2):
            tracker.phase = "fwd"
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(**batch).loss
            tracker.phase = "bwd"
            start = tracker.live
            tracker.reset_peak()
            loss.backward()
            del loss
            rise = tracker.phase_peak.get("bwd", 0) - tracker.pre - start
            for prm in params:
                prm.grad = None
    layer_peak = max(acts.recompute, acts.recompute - acts.recompute_tail + acts.backward_working)
    return {"measured": {"backward_rise": rise}, "estimate": {"backward_rise": layer_peak}}


RUNNERS = {"chunked": run_chunked, "offload": run_offload, "optim_bwd": run_optimizer_in_backward,
           "compiled": run_compiled, "compiled_chunked": run_compiled_chunked, "qlora": run_qlora,
           "moe_loop": run_moe_loop}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--only", help="cases whose name contains this")
    ap.add_argument("--qlora", action="store_true", help="the QLoRA cases (needs bitsandbytes); data/qlora.json")
    args = ap.parse_args(argv)
    rows = []
    for case in (QLORA_CASES if args.qlora else CASES):
        if args.only and args.only not in case["name"]:
            continue
        result = RUNNERS[case["kind"]](case)
        errors = {k: (result["estimate"][k] - v) / v if v else None for k, v in result["measured"].items()}
        extra = {k: v for k, v in case.items() if k not in ("name", "kind", "cell", "chunks")}
        rows.append({"name": case["name"], "kind": case["kind"], "cell": case["cell"].as_dict(),
                     "chunks": case.get("chunks"), **extra, **result, "error": errors})
        print(f"{case['name']:40}" + "".join(
            f"  {k} {result['measured'][k]:>10,.0f} est {result['estimate'][k]:>10,.0f} ({100 * e:+.1f}%)"
            if e is not None else f"  {k} -" for k, e in errors.items()))
    if not args.no_write and not args.only and args.qlora:
        import bitsandbytes
        import peft
        import torch
        import transformers
        QLORA_DATA.write_text(json.dumps({
            "about": "bench/accuracy/measure_mechanisms.py --qlora: bitsandbytes NF4 with LoRA on CPU, with and "
                     "without prepare_model_for_kbit_training, against the estimator",
            "date": _dt.date.today().isoformat(),
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "peft": peft.__version__, "bitsandbytes": bitsandbytes.__version__},
            "cases": rows}, indent=1) + "\n")
        print(f"wrote {QLORA_DATA.relative_to(HERE.parents[1])}")
    elif not args.no_write and not args.only:
        import peft
        import torch
        import transformers
        DATA.write_text(json.dumps({
            "about": "bench/accuracy/measure_mechanisms.py: chunked loss, activation offloading, optimizer in "
                     "backward and compiled layers measured on CPU against the estimator",
            "date": _dt.date.today().isoformat(),
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "peft": peft.__version__},
            "cases": rows}, indent=1) + "\n")
        print(f"wrote {DATA.relative_to(HERE.parents[1])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
