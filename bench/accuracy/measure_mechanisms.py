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

Context parallelism needs no run: a rank of a context-parallel group holds
what one rank running ``seq / cp`` tokens holds, so the grid's measured
single-rank cells are the ground truth (``tests/test_accuracy.py`` checks the
estimate at ``cp × seq`` against them).

Usage::

    .venv/bin/python bench/accuracy/measure_mechanisms.py [--no-write]

Writes ``bench/accuracy/data/mechanisms.json``.
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


RUNNERS = {"chunked": run_chunked, "offload": run_offload, "optim_bwd": run_optimizer_in_backward,
           "compiled": run_compiled, "compiled_chunked": run_compiled_chunked}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--only", help="cases whose name contains this")
    args = ap.parse_args(argv)
    rows = []
    for case in CASES:
        if args.only and args.only not in case["name"]:
            continue
        result = RUNNERS[case["kind"]](case)
        errors = {k: (result["estimate"][k] - v) / v if v else None for k, v in result["measured"].items()}
        rows.append({"name": case["name"], "kind": case["kind"], "cell": case["cell"].as_dict(),
                     "chunks": case.get("chunks"), **result, "error": errors})
        print(f"{case['name']:40}" + "".join(
            f"  {k} {result['measured'][k]:>10,.0f} est {result['estimate'][k]:>10,.0f} ({100 * e:+.1f}%)"
            if e is not None else f"  {k} -" for k, e in errors.items()))
    if not args.no_write and not args.only:
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
