"""Tensors autograd keeps for the backward pass, per token and decoder layer.

Derived op by op from Hugging Face's Llama-style decoder layer (transformers
``modeling_llama``) and the tensors each op saves for its backward; the sums
were checked against the storages caught by
``torch.autograd.graph.saved_tensors_hooks`` on a tiny LlamaForCausalLM (torch
2.13, transformers 5.24, peft 0.21; ``tests/test_estimate_measured.py`` repeats
the check wherever torch is installed).  Notation, bytes per token: ``h`` hidden,
``q`` = heads·head_dim, ``kv`` = kv_heads·head_dim, ``I`` MLP width, ``a`` heads,
``s`` sequence length, ``p`` the compute dtype (2 for bf16/fp16, 4 for fp32),
``pr`` the residual stream's dtype (4 when the weights are fp32 and autocast
computes in half precision, else ``p``).

One layer keeps:

* each RMSNorm: its input upcast to fp32 (``pow`` saves it) ``4h``, the fp32
  ``rsqrt`` (4 B), and, when the norm weight trains, the normalised input
  ``pr·h`` that ``weight * x`` saves for the weight's gradient;
* a linear layer saves its input only when its weight trains (``mm`` saves
  ``self`` only if ``mat2`` needs a gradient).  Under autocast with a fp32
  input, each trained linear saves its own half-precision cast of it;
* peft LoRA: ``x.to(adapter dtype)`` then dropout then ``lora_A``: what
  ``lora_A`` saves is autocast's half cast (``p·d_in``), or the fp32 copy
  without autocast (``4·d_in``), or nothing new when dtypes match and there is
  no dropout; dropout adds its bool mask (1 B per element, CUDA's
  ``native_dropout``); ``lora_B`` saves ``lora_A``'s output (``r`` values);
* attention: rotated query ``p·q``; keys and values ``2p·kv``, or ``2p·q`` when
  ``repeat_kv`` has materialised them for every query head (eager always;
  SDPA in transformers that call ``repeat_kv`` before it, i.e. before 4.48 or
  with a padding mask); SDPA / flash-attention also keep their output ``p·q``
  (shared with ``o_proj``'s input) and the fp32 logsumexp ``4a``; eager keeps
  the fp32 softmax output ``4·a·s`` and its half copy ``p·a·s`` instead, and
  ``o_proj``'s input is a fresh contiguous copy;
* SwiGLU: gate output, up output and SiLU output ``3p·I`` always (SiLU and
  the product need them to pass gradients down); the product ``p·I`` only when
  ``down_proj`` trains or carries an adapter.

Measured per layer on h=256, q=256, kv=64, I=688, a=8, bf16, SDPA, Llama
block: full fine-tuning 10,920 B/token = 16h + 8 + 4q + 4kv + 4a + 8I; LoRA
q,v with autocast 8,552 B/token = 8h + 8 + 4h + 4r + 4q + 4kv + 4a + 6I (plus
104 B of autocast's half copies of the adapters).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import anatomy
from .dtypes import FLOAT_BYTES
from .setup import Setup
from .trainable import adapter_bytes

Item = tuple[str, str, float]   # (group, what, bytes per token)


@dataclass(frozen=True)
class Context:
    """The facts about a set-up that decide what autograd keeps."""

    d: anatomy.Dims
    p: int
    pr: int
    autocast: bool
    method: str
    adapter: int
    rank: int
    dropout: bool
    targets: frozenset[str]
    attention: str
    expand_kv: bool
    padding_mask: bool
    blocks: tuple[anatomy.Block, ...]
    trained_layers: int
    weights_fp32: bool
    router_trainable: bool

    @property
    def full_layers(self) -> bool:
        return self.method in ("full", "freeze")


def compute_dtypes(setup: Setup) -> tuple[int, int, bool]:
    """(p, pr, autocast) for a set-up; see the module docstring."""
    half = setup.precision in ("bf16", "fp16")
    autocast = half and setup.strategy != "deepspeed"
    if setup.strategy == "deepspeed" and half:
        return 2, 2, False
    if setup.quantized:
        return 2, (4 if setup.kbit_fp32_upcast else 2), autocast
    stored = FLOAT_BYTES[setup.load_dtype]
    if stored == 4 and setup.strategy == "fsdp" and half:
        return 2, 2, autocast           # FSDP MixedPrecision gathers the weights in half precision
    if stored == 4:
        return (2 if half else 4), 4, autocast
    return 2, 2, autocast


def context(setup: Setup) -> Context:
    d = anatomy.dims(setup.model)
    p, pr, autocast = compute_dtypes(setup)
    targets, _ = anatomy.resolve_targets(setup.model, setup.lora_targets) if setup.adapters else (set(), [])
    trained = d.layers if setup.method != "freeze" else min(setup.freeze_trainable_layers, d.layers)
    blocks = tuple(anatomy.blocks(setup.model))
    router_trainable = setup.method in ("full", "freeze") or any(
        b.role == anatomy.ROUTER and b.name in targets for b in blocks)
    sdpa_padded = setup.attention == "sdpa" and not setup.packing and setup.batch_size > 1
    return Context(
        d=d, p=p, pr=pr, autocast=autocast, method=setup.method, adapter=adapter_bytes(setup),
        rank=setup.lora_rank, dropout=setup.adapters and setup.lora_dropout > 0, targets=frozenset(targets),
        attention=setup.attention, expand_kv=setup.attention in ("eager", "sdpa"),
        padding_mask=setup.attention == "eager" or sdpa_padded, blocks=blocks, trained_layers=trained,
        weights_fp32=pr == 4 and p == 2 and not setup.quantized,
        router_trainable=router_trainable,
    )


def _consumers(ctx: Context, role: str, expert: bool) -> list[tuple[str, bool, bool, float]]:
    """(name, weight trains, carries LoRA, instances per layer per token-copy) reading one tensor."""
    return [(b.name, ctx.full_layers, b.name in ctx.targets, 1.0)
            for b in ctx.blocks if b.role == role and b.expert == expert]


def input_saves(ctx: Context, group: str, tensor: str, width: int, x_bytes: int,
                consumers: list[tuple[str, bool, bool, float]]) -> list[Item]:
    """What the linear layers reading one tensor keep of it (see the module docstring)."""
    items: list[Item] = []
    shared = False
    for name, trains, lora, n in consumers:
        if trains:
            if ctx.autocast and x_bytes != ctx.p:
                items.append((group, f"{name}: autocast's half copy of {tensor}", ctx.p * width * n))
            else:
                shared = True
        if lora:
            new_tensor = ctx.adapter != x_bytes or ctx.dropout
            if ctx.autocast and ctx.adapter != ctx.p:
                items.append(("LoRA", f"{name}: autocast's half copy of its input", ctx.p * width * n))
            elif new_tensor:
                items.append(("LoRA", f"{name}: input in the adapter dtype", ctx.adapter * width * n))
            else:
                shared = True
            if ctx.dropout:
                items.append(("LoRA", f"{name}: dropout mask", 1 * width * n))
            items.append(("LoRA", f"{name}: lora_A output", ctx.rank * (ctx.p if ctx.autocast else ctx.adapter) * n))
    if shared:
        items.append((group, f"{tensor}, shared by the layers reading it", x_bytes * width))
    return items


def _norm(ctx: Context, label: str, width: int) -> list[Item]:
    items = [("norms", f"{label}: input upcast to fp32", 4 * width), ("norms", f"{label}: rsqrt", 4)]
    if ctx.full_layers:
        items.append(("norms", f"{label}: normalised input for the weight's gradient", ctx.pr * width))
    return items


def attention_items(ctx: Context) -> list[Item]:
    d, p = ctx.d, ctx.p
    items = _norm(ctx, "input norm", d.hidden)
    items += input_saves(ctx, "attention", "input norm output", d.hidden, ctx.pr,
                         _consumers(ctx, anatomy.ATTN_IN, False))
    if d.qk_norm:
        items.append(("norms", "q/k norms: inputs upcast to fp32", 4 * (d.q_dim + d.kv_dim)))
    kv_width = d.q_dim if ctx.expand_kv else d.kv_dim
    items.append(("attention", "rotated query", p * d.q_dim))
    items.append(("attention", "keys and values" + (" expanded by repeat_kv" if ctx.expand_kv else ""),
                  2 * p * kv_width))
    o_consumers = _consumers(ctx, anatomy.ATTN_OUT, False)
    if ctx.attention == "eager":
        items += input_saves(ctx, "attention", "attention output (contiguous copy)", d.q_dim, p, o_consumers)
    else:
        items.append(("attention", "attention output", p * d.q_dim))
        items.append(("attention", "softmax logsumexp (fp32)", 4 * d.heads))
        # o_proj reads the attention output kernel's own storage: only casts and LoRA copies are new.
        items += [it for it in input_saves(ctx, "attention", "attention output", d.q_dim, p, o_consumers)
                  if "shared" not in it[1]]
    return items


def attention_per_position(ctx: Context) -> float:
    """Bytes per token per layer that grow with the sequence (eager's s² probabilities), per unit of s."""
    if ctx.attention != "eager":
        return 0.0
    return (4 + ctx.p) * ctx.d.heads


def _swiglu(ctx: Context, width: int, expert: bool, label: str) -> list[Item]:
    p = ctx.p
    items = [("MLP", f"{label}: gate, up and SiLU outputs", 3 * p * width)]
    items += input_saves(ctx, "MLP", f"{label} product", width, p, _consumers(ctx, anatomy.MLP_OUT, expert))
    return items


def mlp_items(ctx: Context, moe: bool) -> list[Item]:
    d = ctx.d
    items = _norm(ctx, "post-attention norm", d.hidden)
    if not moe:
        items += input_saves(ctx, "MLP", "post-attention norm output", d.hidden, ctx.pr,
                             _consumers(ctx, anatomy.MLP_IN, False))
        return items + _swiglu(ctx, d.intermediate, False, "MLP")
    k = d.experts_active
    router = [c for c in _consumers(ctx, anatomy.ROUTER, False)]
    shared_in = _consumers(ctx, anatomy.MLP_IN, False) if d.shared_intermediate else []
    items += input_saves(ctx, "MLP", "post-attention norm output", d.hidden, ctx.pr, router + shared_in)
    items.append(("MLP", "router probabilities (fp32)", 4 * d.experts))
    expert_in = input_saves(ctx, "MLP", "routed copy of the input", d.hidden, ctx.pr,
                            _consumers(ctx, anatomy.MLP_IN, True))
    items += [(g, f"{k} experts × {name}", k * b) for g, name, b in expert_in]
    items += [(g, f"{k} experts × {name}", k * b) for g, name, b in _swiglu(ctx, d.moe_intermediate, True, "expert")]
    if ctx.router_trainable:
        items.append(("MLP", f"{k} experts × output kept for the routing weight's gradient", k * ctx.p * d.hidden))
    if d.shared_intermediate:
        items += _swiglu(ctx, d.shared_intermediate, False, "shared expert")
    return items


def layer_items(ctx: Context, moe: bool = False) -> list[Item]:
    return attention_items(ctx) + mlp_items(ctx, moe)


def model_items(ctx: Context, seq_len: int) -> list[Item]:
    """Per token, outside the decoder layers (the logits are accounted separately)."""
    d = ctx.d
    items = _norm(ctx, "final norm", d.hidden)
    lm_head_trains = ctx.method == "full"
    if lm_head_trains:
        items += input_saves(ctx, "head", "final norm output", d.hidden, ctx.pr, [("lm_head", True, False, 1.0)])
    items.append(("head", "rotary cos and sin", 2 * ctx.p * d.head_dim))
    items.append(("head", "input ids, labels (int64)", 16))
    if ctx.padding_mask:
        items.append(("head", "4-D attention mask", ctx.p * seq_len))
    return items


@dataclass(frozen=True)
class Activations:
    kept: float                  # bytes held at the end of the forward pass (all layers or checkpoints)
    recompute: float             # one layer recomputed during backward (gradient checkpointing)
    forward_transient: float     # the largest temporary inside one layer's forward
    backward_working: float      # gradients flowing through one layer during backward
    weight_copies: float         # autocast's half copies of fp32 weights, held for backward
    per_layer: float             # bytes per token per layer (dense layers, sequence-independent part)
    lines: tuple[str, ...] = field(default_factory=tuple)


def _sum(items: list[Item]) -> float:
    return sum(b for _, _, b in items)


def activations(setup: Setup, rows: int) -> Activations:
    """Activations for ``rows`` sequences of ``setup.seq_len`` tokens on one GPU.

    Without checkpointing every trained layer's tensors stay until its backward.
    With Hugging Face's gradient checkpointing (``GradientCheckpointingLayer``)
    only each layer's input ``pr·h`` is kept and one layer at a time is
    recomputed, so the backward pass adds one layer's full set.  In freeze
    tuning the frozen layers below the trained ones keep nothing: no tensor
    there requires a gradient.
    """
    ctx = context(setup)
    d, s = ctx.d, setup.seq_len
    T = rows * s
    dense = layer_items(ctx, moe=False)
    moe = layer_items(ctx, moe=True) if d.experts else []
    dense_layers = d.layers - d.moe_layers
    frac = ctx.trained_layers / d.layers
    per_pos = attention_per_position(ctx) * s
    dense_b, moe_b = _sum(dense) + per_pos, (_sum(moe) + per_pos if moe else 0.0)
    layers_b = frac * (dense_layers * dense_b + d.moe_layers * moe_b)
    model_b = _sum(model_items(ctx, s))
    one_layer = max(dense_b, moe_b)
    lines = []
    summary = _summary(dense, ctx)
    if setup.grad_checkpointing:
        kept = T * (ctx.trained_layers * ctx.pr * d.hidden + model_b)
        recompute = T * one_layer
        lines.append(f"activations: gradient checkpointing keeps each layer's input, {ctx.trained_layers} layers × "
                     f"{T:,} tokens × {ctx.pr * d.hidden:,} B, plus one layer recomputed in backward: "
                     f"{T:,} × {one_layer:,.0f} B ({summary})")
    else:
        kept = T * (layers_b + model_b)
        recompute = 0.0
        lines.append(f"activations: {ctx.trained_layers} layers × {T:,} tokens × {one_layer:,.0f} B per token "
                     f"({summary}) + {model_b:,.0f} B/token outside the layers")
    if per_pos:
        lines.append(f"activations: eager attention keeps fp32 softmax + half copy, (4+{ctx.p})·{d.heads} heads·"
                     f"{s} = {per_pos:,.0f} B per token per layer")
    # Eager: the half scores and softmax's fp32 upcast of them exist together, (p + 4)·a·s per token.
    transient = T * per_pos
    mlp_width = d.moe_intermediate * d.experts_active if d.experts else d.intermediate
    attn_bwd = (8 * d.heads * s) if ctx.attention == "eager" else ctx.p * (d.q_dim + 2 * d.kv_dim) + 4 * d.q_dim
    working = T * (2 * ctx.pr * d.hidden + max(3 * ctx.p * mlp_width, attn_bwd))
    copies = 0.0
    if ctx.weights_fp32 and ctx.autocast:
        linear_w = sum(b.weights for b in ctx.blocks)
        held = linear_w * frac if not setup.grad_checkpointing else linear_w / d.layers
        copies = ctx.p * (held + d.vocab * d.hidden)
        lines.append(f"weights: autocast's half copies of the fp32 weights, saved for backward: "
                     f"{ctx.p} B × {held + d.vocab * d.hidden:,.0f}")
    return Activations(kept, recompute, transient, working, copies, dense_b, tuple(lines))


def _summary(items: list[Item], ctx: Context) -> str:
    groups: dict[str, float] = {}
    for group, _, b in items:
        groups[group] = groups.get(group, 0.0) + b
    return ", ".join(f"{k} {v:,.0f}" for k, v in groups.items())
