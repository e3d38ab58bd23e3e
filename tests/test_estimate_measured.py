"""The activation and logits formulas against what torch really saves (runs where torch is installed).

Builds a tiny LlamaForCausalLM from a config (random weights, nothing downloaded),
runs one forward under ``torch.autograd.graph.saved_tensors_hooks`` and counts the
storages each decoder layer saves for backward (parameters left out, each
storage once).  Layer 1 is compared: layer 0 also holds tensors shared by all
layers (rotary cos/sin) and, under LoRA, saves less because its input needs no
gradient.
"""
from __future__ import annotations

import contextlib

import pytest

from conftest import require

torch = require("torch")
transformers = require("transformers")

from oomdoctor.estimate import Setup  # noqa: E402
from oomdoctor.estimate import activations as acts  # noqa: E402
from test_estimate import TINY  # noqa: E402

B, S = 2, 64


def saved_per_token(layer_index: int, *, dtype, attn, method="full", targets=("q_proj", "v_proj"),
                    autocast=False) -> float:
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=TINY.hidden, intermediate_size=TINY.intermediate,
                                   num_attention_heads=TINY.heads, num_key_value_heads=TINY.kv_heads,
                                   num_hidden_layers=TINY.layers, vocab_size=TINY.vocab)
    cfg._attn_implementation = attn
    model = transformers.LlamaForCausalLM(cfg).to(dtype)
    model.train()
    if method == "lora":
        peft = pytest.importorskip("peft")
        model = peft.get_peft_model(model, peft.LoraConfig(r=8, target_modules=list(targets), lora_dropout=0.0))
    skip = {p.untyped_storage().data_ptr() for p in model.parameters()}
    skip |= {b.untyped_storage().data_ptr() for b in model.buffers()}
    layers = [m for m in model.modules() if type(m).__name__ == "LlamaDecoderLayer"]
    where = ["model"]

    def enter(index):
        def hook(module, args):
            where.append(index)
        return hook

    def leave(module, args, out):
        where.pop()

    for i, layer in enumerate(layers):
        layer.register_forward_pre_hook(enter(i))
        layer.register_forward_hook(leave)
    per_layer: dict = {}
    seen = set()
    # Autocast's half copies of weights are parameters' copies, counted apart by the estimator.
    weight_shapes = {tuple(p.shape) for p in model.parameters() if p.dim() == 2}
    weight_shapes |= {shape[::-1] for shape in weight_shapes}   # linear saves the transposed copy

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in skip and st.data_ptr() not in seen:
            seen.add(st.data_ptr())
            if not (autocast and tuple(t.shape) in weight_shapes):
                per_layer[where[-1]] = per_layer.get(where[-1], 0) + st.nbytes()
        return t

    ids = torch.randint(0, TINY.vocab, (B, S))
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), ctx:
        model(input_ids=ids, labels=ids)
    return per_layer[layer_index] / (B * S)


def formula(**kw) -> float:
    s = Setup(model=TINY, batch_size=B, seq_len=S, lora_dropout=0.0, **kw)
    c = acts.context(s)
    return sum(b for *_, b in acts.layer_items(c)) + acts.attention_per_position(c) * S


@pytest.mark.parametrize("measure, model", [
    # SDPA without a padding mask runs grouped-query attention unexpanded, as the estimator's "flash".
    (dict(dtype="bf16", attn="sdpa"), dict(method="full", load_dtype="bf16", precision="fp32", attention="flash")),
    (dict(dtype="bf16", attn="eager"), dict(method="full", load_dtype="bf16", precision="fp32", attention="eager")),
    (dict(dtype="fp32", attn="sdpa"), dict(method="full", load_dtype="fp32", precision="fp32", attention="flash")),
    (dict(dtype="fp32", attn="sdpa", autocast=True),
     dict(method="full", load_dtype="fp32", precision="bf16", attention="flash")),
    (dict(dtype="bf16", attn="sdpa", method="lora", autocast=True),
     dict(method="lora", load_dtype="bf16", precision="bf16", attention="flash")),
    (dict(dtype="bf16", attn="sdpa", method="lora"),
     dict(method="lora", load_dtype="bf16", precision="fp32", attention="flash")),
])
def test_saved_tensors_per_layer(measure, model):
    dtypes = {"bf16": torch.bfloat16, "fp32": torch.float32}
    measure = dict(measure, dtype=dtypes[measure["dtype"]])
    assert saved_per_token(1, **measure) == pytest.approx(formula(**model), rel=0.002)


def test_logits_peak_twelve_bytes_per_token_and_vocab():
    mem = pytest.importorskip("torch.distributed._tools.mem_tracker")
    b, s, V = 4, 256, 32000
    cfg = transformers.LlamaConfig(hidden_size=16, intermediate_size=32, num_attention_heads=4,
                                   num_key_value_heads=4, num_hidden_layers=1, vocab_size=V)
    model = transformers.LlamaForCausalLM(cfg)
    model.train()
    ids = torch.randint(0, V, (b, s))
    tracker = mem.MemTracker()
    tracker.track_external(model)
    with tracker:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
    snap = next(iter(tracker.get_tracker_snapshot("peak").values()))
    other = sum(v for k, v in snap.items() if any(w in str(k) for w in ("PARAM", "BUFFER", "GRAD")))
    peak = snap["Total"] - other
    assert peak / (b * s * V) == pytest.approx(12, rel=0.02)
