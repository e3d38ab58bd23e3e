"""Tensors autograd keeps for the backward pass, per token and decoder layer.

Derived op by op from Hugging Face's decoder layers (transformers
``modeling_llama`` and the families that copy it: Mistral, Qwen2, Phi-3 with
its fused projections, Gemma 2 with four norms and soft-capping, Mixtral's
grouped-GEMM experts) and the tensors each op saves for its backward, and
checked storage by storage against a CPU run of every family (torch 2.13,
transformers 5.24, peft 0.21): ``bench/accuracy/measure_grid.py`` counts what
``torch.autograd.graph.saved_tensors_hooks`` catches and what is still alive
at the end of the forward pass, ``bench/accuracy/data/grid.json`` holds the
result and ``tests/test_accuracy.py`` keeps every cell within 10 %.
Notation, bytes per token: ``h`` hidden, ``q`` = heads·head_dim, ``kv`` =
kv_heads·head_dim, ``I`` MLP width, ``a`` heads, ``s`` sequence length, ``p``
the compute dtype (2 for bf16/fp16, 4 for fp32), ``pr`` the residual stream's
dtype (4 when the weights are fp32 and autocast computes in half precision,
else ``p``).

One layer keeps:

* each RMSNorm: its input upcast to fp32 (``pow`` saves it; in fp32 that is
  the input itself) ``4h``, the fp32 ``rsqrt`` (4 B), and, when the norm weight
  trains, the normalised input that ``weight * x`` saves for the weight's
  gradient: ``pr·h`` (Llama: ``weight * x.to(input_dtype)``) or ``4h`` (Gemma:
  ``x * (1 + weight.float())`` stays fp32).  Llama-style layers have two norms;
  Gemma 2/3 four, the two "post" norms reading the attention and MLP outputs;
* a linear layer saves its input only when its weight trains (``mm`` saves
  ``self`` only if ``mat2`` needs a gradient).  Under autocast with a fp32
  input, each trained linear saves its own half-precision cast of it;
* peft LoRA: ``x.to(adapter dtype)`` then dropout then ``lora_A``: what
  ``lora_A`` saves is autocast's half cast (``p·d_in``), or the fp32 copy
  without autocast (``4·d_in``), or nothing new when dtypes match and there is
  no dropout; dropout adds its bool mask (1 B per element, CUDA's
  ``native_dropout``); ``lora_B`` saves ``lora_A``'s output (``r`` values);
* attention: rotated query ``p·q``; keys and values ``2p·kv``, or ``2p·q`` when
  ``repeat_kv`` has materialised them for every query head: eager always,
  SDPA only with a padding mask (transformers >= 4.48 passes ``enable_gqa``
  to SDPA when there is no mask; with one, or before 4.48, it repeats).  A
  fused qkv projection (Phi-3) hands the value over as a view of its output,
  so unless ``repeat_kv`` copied it the whole ``p·(q + 2kv)`` output stays
  (``p·(q + kv)`` more).  SDPA / flash-attention also keep their output
  ``p·q`` (shared with ``o_proj``'s input) and the fp32 logsumexp ``4a``, and
  SDPA with a padding mask the float mask, ``p·s``; eager keeps the fp32
  softmax output ``4·a·s``, its half copy ``p·a·s`` (none in fp32, where
  ``.to(fp32)`` returns the same tensor) and, with Gemma 2's soft-capping,
  tanh's output ``p·a·s``; its mask is not saved, and ``o_proj``'s input is a
  fresh contiguous copy;
* SwiGLU / GeGLU: gate output, up output and activation output ``3p·I``
  always (a fused gate_up output is the same ``2p·I``); the product ``p·I``
  only when ``down_proj`` trains or carries an adapter;
* MoE (transformers 5 grouped GEMM): the router's fp32 probabilities ``4E``,
  the top-k weights and four int64 index tensors (``8·4k + 4·2k + 4`` B), per
  routed copy (``k`` per token) the gathered input when the experts train,
  the gate/up/activation outputs, the product when ``down`` trains, and the
  expert output that the routing-weight multiply saves ``k·p·h`` (the routing
  weights need a gradient whenever the layer's input does).

Compiled layers (``torch.compile`` on each decoder layer, as torchtune's
``compile: True`` and transformers' ``torch_compile`` do): inductor's default
partitioner (``torch/_functorch/partitioners.py``,
``min_cut_rematerialization_partition``) recomputes cheap pointwise ops in
backward and saves the smallest set of tensors it can rebuild them from.  A
RMSNorm then keeps its 16-bit input and the fp32 ``rsqrt`` (the fp32 upcast and
the normalised copy are recomputed), and SwiGLU the gate and up outputs (SiLU's
output is recomputed): what Liger's kernels keep.  Attention and the linear
layers keep what they keep in eager mode.  Measured on CPU by
``bench/accuracy/measure_mechanisms.py`` (``compiled`` cases): per layer
``8h + 2I`` less than eager in full fine-tuning.

Outside the layers: the final norm, lm_head's input when it trains, rotary
cos and sin ``2·pr·head_dim`` per position (shared by the batch's rows), the
batch's int64 ``input_ids``, ``attention_mask`` and ``labels`` and the loss's
shifted labels (32 B), and SDPA's padding mask.  With adapters and no
gradient checkpointing the first layer's input needs no gradient: its input
norm keeps nothing and eager attention keeps neither operand of ``q·kᵀ``
whose partner needs no gradient.  Hugging Face's gradient checkpointing makes
the embedding output require a gradient (``enable_input_require_grads``).

Measured per layer on h=256, q=256, kv=64, I=688, a=8, bf16, SDPA, Llama
block: full fine-tuning 10,920 B/token = 16h + 8 + 4q + 4kv + 4a + 8I; LoRA
q,v with autocast 8,552 B/token = 8h + 8 + 4h + 4r + 4q + 4kv + 4a + 6I (plus
104 B of autocast's half copies of the adapters).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from . import anatomy, mla
from .derivation import Line, line
from .dtypes import FLOAT_BYTES, GIB
from .adapters import as_loaded
from .experts import Wrapped, merged_line, wrapped
from .setup import Setup
from .trainable import EMBEDDING_NAMES, adapter_bytes

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
    padding_mask: bool              # SDPA is handed a padding mask (and saves it)
    blocks: tuple[anatomy.Block, ...]
    trained_layers: int
    weights_fp32: bool
    router_trainable: bool
    first_input_grad: bool = True   # the first trained layer's input needs a gradient
    liger: bool = False             # Liger's RMSNorm and SwiGLU kernels replace transformers' modules
    compiled: bool = False          # torch.compile'd layers: inductor recomputes the norms' upcast and SiLU
    fused_head: bool = False        # a fused loss (Liger, Cut Cross-Entropy) calls lm_head itself (see ``logits``)
    wrapped: Wrapped = Wrapped()    # LoRA on fused expert weights (peft ParamWrapper; see ``experts``)
    mlp_out: int = 0                # dtype of the dense MLP's gate/up/SiLU outputs and product (0: ``p``)
    expert_out: int = 0             # the same for the routed experts (0: ``p``)
    # FSDP units mixing frozen weights and adapters (``Setup.mixes_units``): every weight of a layer is a view of
    # a flat parameter that requires grad, so the layers keep what full fine-tuning keeps; bitsandbytes' 4-bit
    # matmul still saves no input for its weight (``MatMul4Bit.forward`` keeps only the packed weight).
    frozen_grads: bool = False
    quantized_linears: bool = False

    @property
    def mlp_p(self) -> int:
        return self.mlp_out or self.p

    @property
    def expert_p(self) -> int:
        return self.expert_out or self.p

    @property
    def full_layers(self) -> bool:
        return self.method in ("full", "freeze") or self.frozen_grads

    @property
    def linears_train(self) -> bool:
        """The frozen linear weights need a gradient, so each keeps its input."""
        return self.full_layers and not (self.frozen_grads and self.quantized_linears)


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
    router_trainable = setup.method in ("full", "freeze") or setup.mixes_units or any(
        b.role == anatomy.ROUTER and b.name in targets for b in blocks)
    # An unpacked batch of several rows carries padding, so transformers builds a 4-D mask; with none
    # (one row, or packing) SDPA runs causal and grouped-query attention without repeat_kv.
    sdpa_padded = setup.attention == "sdpa" and not setup.packing and setup.batch_size > 1
    # Prefix tuning's keys outnumber the queries, so transformers builds an explicit 4-D mask even for one row:
    # SDPA then runs without grouped-query attention (repeat_kv) and saves the mask (measured on CPU, peft 0.21).
    sdpa_padded = sdpa_padded or (setup.attention == "sdpa" and setup.method == "prefix")
    grouped = d.heads > d.kv_heads
    # torchtune's attention (torchtune/modules/attention.py) expands keys and values to every query head
    # before the kernel (expand + flatten: a copy), and hands packed rows a block mask, never a dense one.
    torchtune = setup.model_code == "torchtune"
    if torchtune:
        sdpa_padded = False
    # The first layer's input needs a gradient when the embeddings train, or when gradient checkpointing
    # made it (transformers' enable_input_require_grads); adapters and freeze tuning leave it without one.
    embeddings_train = setup.method == "full" or any(
        m.split(".")[-1] in EMBEDDING_NAMES for m in setup.modules_to_save)
    frozen_below = setup.method == "freeze" and trained < d.layers
    first_input_grad = embeddings_train or (setup.grad_checkpointing and not frozen_below)
    return Context(
        d=d, p=p, pr=pr, autocast=autocast, method=setup.method, adapter=adapter_bytes(setup),
        rank=setup.lora_rank, dropout=setup.adapters and setup.lora_dropout > 0, targets=frozenset(targets),
        attention=setup.attention, expand_kv=grouped and (setup.attention == "eager" or sdpa_padded or torchtune),
        padding_mask=sdpa_padded, blocks=blocks, trained_layers=trained,
        weights_fp32=pr == 4 and p == 2 and not setup.quantized,
        router_trainable=router_trainable, first_input_grad=first_input_grad, liger=setup.liger_kernels,
        compiled=setup.compiled,
        fused_head=setup.loss in ("fused_linear", "cce"), wrapped=wrapped(setup),
        mlp_out=quantized_output(setup, pr, expert=False), expert_out=quantized_output(setup, pr, expert=True),
        frozen_grads=setup.mixes_units, quantized_linears=setup.quantized,
    )


def quantized_output(setup: Setup, pr: int, expert: bool) -> int:
    """Bytes per value of what a bitsandbytes-quantised MLP projection returns, or 0 for the compute dtype.

    ``bnb.nn.Linear4bit.forward`` (bitsandbytes 0.43 to 0.50) casts its input to the compute dtype, multiplies,
    and returns ``out.to(inp_dtype)``: the dtype it was handed.  After peft's ``prepare_model_for_kbit_training``
    the norms are fp32 (TRL's ``peft_module_casting_to_bf16`` keeps them so), so a norm's output, and with it
    gate_proj's and up_proj's outputs, SiLU's and the product, are fp32 under autocast too: ``4·I`` each where
    plain LoRA keeps ``2·I``.  Attention is not affected: SDPA and flash-attention cast q, k and v to the
    compute dtype and save those.  Measured on CPU with bitsandbytes' CPU backend
    (``bench/accuracy/measure_mechanisms.py``, ``qlora_upcast`` cases).  MLP_IN linears only when bitsandbytes
    quantised them: not transformers 5's fused 3-D experts.  LLM.int8's ``Linear8bitLt`` casts back the same way.
    """
    if not (setup.quantized and pr == 4):
        return 0
    if expert:
        loaded = as_loaded(setup.model, True)
        if getattr(loaded, "experts_fused", True):
            return 0
    return 4


def _consumers(ctx: Context, role: str, expert: bool) -> list[tuple[str, bool, bool, float]]:
    """(name, weight trains, carries LoRA, instances per layer per token-copy) reading one tensor."""
    # A ParamWrapper makes the expert (or router) weight itself need a gradient: its input is kept as if it trained.
    wrapped = (expert and ctx.wrapped.experts) or (role == anatomy.ROUTER and ctx.wrapped.router)
    return [(b.name, ctx.linears_train or wrapped, b.name in ctx.targets, 1.0)
            for b in ctx.blocks if b.role == role and b.expert == expert]


def input_saves(ctx: Context, group: str, tensor: str, width: int, x_bytes: int,
                consumers: list[tuple[str, bool, bool, float]]) -> list[Item]:
    """What the linear layers reading one tensor keep of it (see the module docstring)."""
    items: list[Item] = []
    shared = False
    # A compiled graph computes one cast of a tensor however many adapters read it (common subexpressions are
    # merged); with dropout each adapter's input is its own (dropout comes after the cast).
    one_cast = ctx.compiled and not ctx.dropout
    cast_counted = False
    for name, trains, lora, n in consumers:
        if trains:
            if ctx.autocast and x_bytes != ctx.p:
                items.append((group, f"{name}: autocast's half copy of {tensor}", ctx.p * width * n))
            else:
                shared = True
        if lora:
            new_tensor = ctx.adapter != x_bytes or ctx.dropout
            if (ctx.autocast and ctx.adapter != ctx.p or new_tensor) and one_cast and cast_counted:
                pass
            elif ctx.autocast and ctx.adapter != ctx.p:
                items.append(("LoRA", f"{name}: autocast's half copy of its input", ctx.p * width * n))
                cast_counted = True
            elif new_tensor:
                items.append(("LoRA", f"{name}: input in the adapter dtype", ctx.adapter * width * n))
                cast_counted = True
            else:
                shared = True
            if ctx.dropout:
                items.append(("LoRA", f"{name}: dropout mask", 1 * width * n))
            items.append(("LoRA", f"{name}: lora_A output", ctx.rank * (ctx.p if ctx.autocast else ctx.adapter) * n))
    if shared:
        items.append((group, f"{tensor}, shared by the layers reading it", x_bytes * width))
    return items


def _norm_as_is(ctx: Context) -> bool:
    """A norm that keeps its input as it is (no fp32 copy): Liger's kernel, or a compiled layer."""
    return ctx.liger or ctx.compiled


def _norm(ctx: Context, label: str, width: int) -> list[Item]:
    if _norm_as_is(ctx):
        # LigerRMSNormFunction saves its input as it is and the fp32 rstd per row (liger_kernel/ops/rms_norm.py,
        # save_for_backward(X, W, RSTD)); the weight's gradient is computed from them.  A compiled layer keeps
        # the same two: inductor recomputes the fp32 upcast and the normalised input from them in backward.
        how = "saved by Liger's kernel" if ctx.liger else "saved as is (compiled)"
        return [("norms", f"{label}: input, {how}", ctx.pr * width), ("norms", f"{label}: rstd", 4)]
    items = [("norms", f"{label}: input upcast to fp32", 4 * width), ("norms", f"{label}: rsqrt", 4)]
    if ctx.full_layers:
        kept = 4 if ctx.d.gemma_norm else ctx.pr
        items.append(("norms", f"{label}: normalised input for the weight's gradient", kept * width))
    return items


def _qkv_grads(ctx: Context) -> tuple[bool, bool, bool]:
    """Whether q, k and v need a gradient in a layer whose input needs none (adapters only)."""
    if ctx.full_layers:
        return True, True, True
    rq = rk = rv = False
    if ctx.method == "prefix":
        rk = rv = True                  # every layer's keys and values are concatenated with trained prefixes
    for b in ctx.blocks:
        if b.role == anatomy.ATTN_IN and b.name in ctx.targets:
            if b.name in ("k_proj",):
                rk = True
            elif b.name in ("v_proj",):
                rv = True
            elif b.name in ("q_proj", "q_a_proj", "q_b_proj"):
                rq = True
            else:                       # fused or latent projections produce all three
                rq = rk = rv = True
    return rq, rk, rv


def first_layer_unsaved(ctx: Context, seq_len: int) -> float:
    """Bytes per token the first trained layer does not keep when its input needs no gradient.

    Its input norm saves nothing (no gradient flows into it); in eager attention
    ``q·kᵀ`` saves each operand only for the other's gradient, and the
    probabilities' half copy only for the values' gradient.  SDPA saves all its
    inputs whatever needs a gradient.
    """
    if ctx.first_input_grad:
        return 0.0
    d, p = ctx.d, ctx.p
    unsaved = _sum(_norm(ctx, "input norm", d.hidden)) if not ctx.full_layers else 4 * d.hidden + 4
    if ctx.attention == "eager" and not ctx.full_layers:
        rq, rk, rv = _qkv_grads(ctx)
        kv_width = d.q_dim if ctx.expand_kv else d.kv_dim
        if not rk:
            unsaved += p * d.q_dim
        if not rq:
            unsaved += p * kv_width
        if not (rq or rk):
            unsaved += p * kv_width + 4 * d.heads * seq_len
        if not rv and p < 4:
            unsaved += p * d.heads * seq_len
    return unsaved


def attention_items(ctx: Context) -> list[Item]:
    d, p = ctx.d, ctx.p
    items = _norm(ctx, "input norm", d.hidden)
    items += input_saves(ctx, "attention", "input norm output", d.hidden, ctx.pr,
                         _consumers(ctx, anatomy.ATTN_IN, False))
    if d.mla:
        return mla.attention_items(ctx, items, _norm, input_saves, _consumers)
    if d.qk_norm:
        items.append(("norms", "q/k norms: inputs upcast to fp32", 4 * (d.q_dim + d.kv_dim)))
        items.append(("norms", "q/k norms: rsqrt, one per head", 4 * (d.heads + d.kv_heads)))
        if ctx.full_layers:
            kept = 4 if d.gemma_norm else ctx.pr
            items.append(("norms", "q/k norms: normalised inputs for the weights' gradient", kept * (d.q_dim + d.kv_dim)))
    kv_width = d.q_dim if ctx.expand_kv else d.kv_dim
    items.append(("attention", "rotated query", p * d.q_dim))
    items.append(("attention", "keys and values" + (" expanded by repeat_kv" if ctx.expand_kv else ""),
                  2 * p * kv_width))
    if d.fused_qkv and not ctx.expand_kv:
        items.append(("attention", "fused qkv output, held whole by the value's view", p * (d.q_dim + d.kv_dim)))
    o_consumers = _consumers(ctx, anatomy.ATTN_OUT, False)
    if ctx.attention == "eager":
        items += input_saves(ctx, "attention", "attention output (contiguous copy)", d.q_dim, p, o_consumers)
    else:
        items.append(("attention", "attention output", p * d.q_dim))
        items.append(("attention", "softmax logsumexp (fp32)", 4 * d.heads))
        # o_proj reads the attention output kernel's own storage: only casts and LoRA copies are new.
        items += [it for it in input_saves(ctx, "attention", "attention output", d.q_dim, p, o_consumers)
                  if "shared" not in it[1]]
    if d.norms_per_layer >= 4:
        items += _norm(ctx, "post-attention norm", d.hidden)
    return items


def attention_per_position(ctx: Context) -> float:
    """Bytes per token per layer that grow with the sequence (eager's s² probabilities), per unit of s:
    softmax's fp32 output, its half copy (not in fp32) and Gemma 2's tanh output."""
    if ctx.attention != "eager":
        return 0.0
    p = ctx.p
    return (4 + (p if p < 4 else 0) + (p if ctx.d.attn_softcap else 0)) * ctx.d.heads


def _swiglu(ctx: Context, width: int, expert: bool, label: str) -> list[Item]:
    p = ctx.expert_p if expert else ctx.mlp_p
    if (ctx.liger or ctx.compiled) and not expert:
        # LigerSiLUMulFunction saves the gate and up outputs and recomputes SiLU in backward (ops/swiglu.py);
        # inductor's partitioner makes the same cut in a compiled layer.
        how = "Liger SwiGLU" if ctx.liger else "compiled: SiLU recomputed"
        items = [("MLP", f"{label}: gate and up outputs ({how})", 2 * p * width)]
    else:
        items = [("MLP", f"{label}: gate, up and SiLU outputs", 3 * p * width)]
    items += input_saves(ctx, "MLP", f"{label} product", width, p, _consumers(ctx, anatomy.MLP_OUT, expert))
    return items


def mlp_items(ctx: Context, moe: bool) -> list[Item]:
    d = ctx.d
    items = _norm(ctx, "pre-MLP norm", d.hidden)
    post = _norm(ctx, "post-MLP norm", d.hidden) if d.norms_per_layer >= 4 else []
    if not moe:
        items += input_saves(ctx, "MLP", "pre-MLP norm output", d.hidden, ctx.pr,
                             _consumers(ctx, anatomy.MLP_IN, False))
        return items + _swiglu(ctx, d.intermediate, False, "MLP") + post
    k = d.experts_active
    router = [c for c in _consumers(ctx, anatomy.ROUTER, False)]
    shared_in = _consumers(ctx, anatomy.MLP_IN, False) if d.shared_intermediate else []
    items += input_saves(ctx, "MLP", "pre-MLP norm output", d.hidden, ctx.pr, router + shared_in)
    items.append(("MLP", "router probabilities (fp32)", 4 * d.experts))
    items.append(("MLP", "routing: top-k weights (fp32) and four int64 index tensors", 8 * 4 * k + 4 * 2 * k + 4))
    expert_in = input_saves(ctx, "MLP", "routed copy of the input", d.hidden, ctx.pr,
                            _consumers(ctx, anatomy.MLP_IN, True))
    items += [(g, f"{k} experts × {name}", k * b) for g, name, b in expert_in]
    items += [(g, f"{k} experts × {name}", k * b) for g, name, b in _swiglu(ctx, d.moe_intermediate, True, "expert")]
    # The routing weights need a gradient whenever the layer's input does, so their multiply keeps the output.
    items.append(("MLP", f"{k} experts × output kept for the routing weights' gradient",
                  k * ctx.expert_p * d.hidden))
    if d.shared_intermediate:
        items += _swiglu(ctx, d.shared_intermediate, False, "shared expert")
    return items + post


def layer_items(ctx: Context, moe: bool = False) -> list[Item]:
    return attention_items(ctx) + mlp_items(ctx, moe)


# Gemma 2 and 3 alternate sliding-window and global layers: transformers builds one mask of each kind.
TWO_MASK_TYPES = {"gemma2", "gemma3", "gemma3_text"}


def model_items(ctx: Context, seq_len: int, rows: int = 1, checkpointing: bool = False) -> list[Item]:
    """Per token, outside the decoder layers (the logits are accounted separately).

    Under gradient checkpointing the masks handed to each checkpointed layer
    stay referenced until its recomputation: eager's float masks (the residual
    dtype) or SDPA's bool padding mask, one per kind of layer; SDPA's own float
    copy of the mask is then made inside the recomputed layer instead.
    """
    d = ctx.d
    # the final norm is outside the compiled decoder layers (torchtune compiles layer by layer), and in FSDP's
    # root unit, whose weights stay frozen when the layers' units mix frozen weights and adapters
    items = _norm(replace(ctx, compiled=False, frozen_grads=False), "final norm", d.hidden)
    lm_head_trains = ctx.method == "full" and not ctx.fused_head
    if lm_head_trains:
        items += input_saves(ctx, "head", "final norm output", d.hidden, ctx.pr, [("lm_head", True, False, 1.0)])
    # cos and sin are computed per position (position_ids of shape 1 × s) in the residual stream's dtype.
    items.append(("head", "rotary cos and sin, shared by the rows", 2 * ctx.pr * d.head_dim / rows))
    items.append(("head", "input_ids, attention_mask, labels and the shifted labels (int64)", 32))
    kinds = 2 if ctx.d.model_type in TWO_MASK_TYPES else 1
    if checkpointing and ctx.attention == "eager":
        items.append(("head", f"{kinds} eager 4-D mask(s) held for the recomputation", kinds * ctx.pr * seq_len))
    elif checkpointing and ctx.padding_mask:
        items.append(("head", f"{kinds} bool 4-D padding mask(s) held for the recomputation", kinds * seq_len))
    elif ctx.padding_mask:
        items.append(("head", "SDPA's 4-D padding mask (float)", ctx.p * seq_len))
    return items


@dataclass(frozen=True)
class Activations:
    kept: float                  # bytes held at the end of the forward pass (all layers or checkpoints)
    recompute: float             # one layer recomputed during backward (gradient checkpointing)
    forward_transient: float     # the largest temporary inside one layer's forward
    backward_working: float      # gradients flowing through one layer during backward
    weight_copies: float         # autocast's half copies of fp32 weights, held for backward
    per_layer: float             # bytes per token per layer (dense layers, sequence-independent part)
    lines: tuple[Line, ...] = field(default_factory=tuple)
    in_layers: float = 0.0       # the part of ``kept`` held by the trained layers (what offloading moves)
    one_layer: float = 0.0       # what one layer holds: its input under checkpointing, else its saved set
    outside_saved: float = 0.0   # saved outside the layers, less the batch's ids and lm_head's input
    recompute_tail: float = 0.0  # the part of ``recompute`` alive only when the recomputation stops (see below)
    head_copy: float = 0.0       # the part of ``weight_copies`` that is lm_head's: freed by lm_head's backward


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
    if getattr(setup.model, "encoder_layers", 0):
        from .encoder_decoder import activations as encoder_decoder_activations
        return encoder_decoder_activations(setup, rows)
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
    model_b = _sum(model_items(ctx, s, rows, setup.grad_checkpointing))
    one_layer = max(dense_b, moe_b)
    if d.streams > 1:
        # Gemma 3n: AltUp, LAuReL and per-layer inputs; sparse feed-forwards first, KV-sharing layers last
        from . import gemma3n
        kinds = [(n, gemma3n.layer_items(ctx, setup.model, sparse, shared))
                 for n, sparse, shared in gemma3n.layer_kinds(setup.model)]
        dense = max(kinds, key=lambda k: k[0])[1]
        sizes = [(n, _sum(items) + per_pos) for n, items in kinds]
        dense_b = sum(n * b for n, b in sizes) / d.layers
        layers_b = frac * d.layers * dense_b
        one_layer = max(b for _, b in sizes)
        model_b += _sum(gemma3n.outside_items(ctx, setup.model))
    # what a checkpointed layer keeps of its input: the hidden state (Gemma 3n: every AltUp stream)
    carried = ctx.pr * d.hidden * d.streams
    if setup.grad_checkpointing and ctx.padding_mask:
        one_layer += ctx.p * s        # each recomputed SDPA call makes and saves its own float mask
    lines = []
    summary = _summary(dense, ctx)
    if setup.grad_checkpointing:
        kept = T * (ctx.trained_layers * carried + model_b)
        if d.streams > 1:
            from . import gemma3n
            kept += T * gemma3n.checkpoint_extras(ctx, setup.model, rows)
        # The recomputed layer's saved set, less its input (the kept checkpoint, which a fp32 norm saves as is),
        # plus the tensor that is alive when torch's early stop ends the recomputation: the MLP product when
        # down_proj keeps nothing, else down_proj's output.
        mlp_width = d.moe_intermediate * d.experts_active if d.experts else d.intermediate
        down_saves = any(b.role == anatomy.MLP_OUT and (ctx.linears_train or b.name in ctx.targets)
                         for b in ctx.blocks)
        tail_p = ctx.expert_p if d.experts else ctx.mlp_p       # a quantised down_proj returns its input's dtype
        tail = tail_p * (d.hidden if down_saves else mlp_width)
        as_is = ctx.pr * d.hidden if _norm_as_is(ctx) else (4 * d.hidden if ctx.pr == 4 else 0)
        if d.streams > 1:
            # Gemma 3n's recomputed layer: the streams stack its matmul keeps is the checkpoint itself
            as_is = carried if ctx.p == ctx.pr else 0
        recompute = T * (one_layer - as_is + tail)
        recompute_tail = T * tail
        lines.append(line("activations.checkpointed", layers=ctx.trained_layers, tokens=T,
                          input=carried, layer=one_layer, summary=summary))
    else:
        first = first_layer_unsaved(ctx, s)
        kept = T * (layers_b - first + model_b)
        recompute = recompute_tail = 0.0
        lines.append(line("activations.kept", layers=ctx.trained_layers, tokens=T, layer=one_layer,
                          summary=summary, outside=model_b,
                          first=line("activations.first_layer", bytes=first) if first else ""))
    if ctx.compiled and not ctx.liger:
        lines.append(line("activations.compiled"))
    # Saved beside the language model's layers: what offloading moves with them (``offload``).
    beside = 0.0
    from .vision import tower_activations
    tower = tower_activations(setup, rows)
    if tower is not None:
        kept += tower.kept
        beside += tower.kept - tower.inputs
        recompute = max(recompute, tower.recompute) if setup.grad_checkpointing else recompute
        lines.append(tower.line)
    from .vision import cross_attention
    crossed = cross_attention(setup, rows)
    if crossed is not None:
        kept += crossed[0]
        beside += crossed[0]
        recompute = recompute + crossed[1] if setup.grad_checkpointing else recompute
        lines.append(crossed[2])
    from .experts import load_balancing_bytes
    balancing = load_balancing_bytes(setup, T)
    if balancing:
        kept += balancing
        beside += balancing
        lines.append(line("activations.load_balancing", mib=balancing / 2**20))
    if setup.method == "prefix":
        extra, recomputed, said = prefix_activations(ctx, setup, rows)
        kept += extra
        beside += extra
        recompute += recomputed
        lines.append(said)
    merged = ctx.wrapped.merged_bytes
    if merged:
        held = merged * (0 if setup.grad_checkpointing else frac * d.moe_layers)
        kept += held
        beside += held
        recompute += merged if setup.grad_checkpointing else 0.0
        lines.append(merged_line(ctx.wrapped, d.moe_layers, setup.grad_checkpointing))
    if per_pos:
        probs = [line("activations.softmax_fp32")] + ([line("activations.softmax_half")] if ctx.p < 4 else []) + (
            [line("activations.softcap_tanh")] if d.attn_softcap else [])
        lines.append(line("activations.eager_squared", kept=probs, per=per_pos / s, s=s, bytes=per_pos))
    # Eager: the scores in the compute dtype are still referenced while softmax writes its output (and, with
    # soft-capping, the capped scores beside tanh's output).
    transient = T * ctx.p * d.heads * s * (2 if d.attn_softcap else 1) if ctx.attention == "eager" else 0.0
    if merged and setup.grad_checkpointing:
        transient = max(transient, merged)    # each layer's forward merges its expert stacks again, then drops them
    mlp_width = d.moe_intermediate * d.experts_active if d.experts else d.intermediate
    attn_bwd = (8 * d.heads * s) if ctx.attention == "eager" else ctx.p * (d.q_dim + 2 * d.kv_dim) + 4 * d.q_dim
    mlp_grad_p = ctx.expert_p if d.experts else ctx.mlp_p     # gradients come in the dtype of their tensors
    if d.experts and not getattr(as_loaded(setup.model, setup.quantized), "experts_fused", True):
        # one nn.Linear MLP per expert (transformers 4's MixtralSparseMoeBlock.forward loops over the experts and
        # index_adds each one's output): backward runs one expert at a time, over its share of the routed tokens
        mlp_width = mlp_width / d.experts
    working = T * (2 * carried + max(3 * mlp_grad_p * mlp_width, attn_bwd)) + ctx.wrapped.largest_grad
    if setup.quantized:
        # bitsandbytes multiplies by a dequantised copy of the whole weight (MatMul4Bit.forward and .backward:
        # dequantize_4bit(B).to(A.dtype); MatMul8bitLt.backward: CB.to(A.dtype)), freed right after the matmul.
        # One at a time, the largest one bounds it; a 16-bit copy is cast again for a fp32 input.  In backward it
        # lives inside one projection's backward (its input gradient in the compute dtype, cast back to the
        # input's dtype), not while the MLP's three gradients are alive (measured on CPU, ``qlora_upcast``).
        widest = max((b.d_in * b.d_out for b in ctx.blocks), default=0)
        per_element = ctx.p + (2 if ctx.p == 4 else 0)
        dequant = widest * per_element
        cast_back = mlp_grad_p if mlp_grad_p != ctx.p else 0
        working = max(working, T * (2 * ctx.pr * d.hidden + (ctx.p + cast_back) * mlp_width) + dequant)
        if setup.load_dtype != "int8":
            transient = max(transient, dequant)
        lines.append(line("activations.dequantised", widest=widest, bytes=per_element, gib=dequant / GIB))
    copies = head_copy = 0.0
    share = frac if not setup.grad_checkpointing else 1 / d.layers   # under checkpointing: the recomputed layer
    if ctx.weights_fp32 and ctx.autocast:
        linear_w = sum(b.weights for b in ctx.blocks)
        held = linear_w * share
        copies = ctx.p * (held + d.vocab * d.hidden)
        head_copy = ctx.p * d.vocab * d.hidden
        lines.append(line("activations.weight_copies", bytes=ctx.p, count=held + d.vocab * d.hidden))
    first_in = [b for b in ctx.blocks if b.role == anatomy.ATTN_IN] if not (
        ctx.first_input_grad or setup.grad_checkpointing) else []
    if copies and first_in:
        # the first layer's q/k/v projections read an input that needs no gradient: nothing saves their copies
        copies -= ctx.p * sum(b.weights / b.count * (b.count / d.layers) for b in first_in)
    if setup.quantized and setup.kbit_fp32_upcast and not setup.kbit_head_bf16 and ctx.autocast and ctx.p == 2 \
            and not ctx.fused_head:
        # prepare_model_for_kbit_training leaves lm_head fp32 (bitsandbytes skips it); autocast multiplies by its
        # half copy and saves it, since lm_head's input needs a gradient (measured on CPU, ``qlora`` cases)
        copies += ctx.p * d.vocab * d.hidden
        head_copy = ctx.p * d.vocab * d.hidden
        lines.append(line("activations.kbit_head_copy", bytes=ctx.p, count=d.vocab * d.hidden))
    if ctx.autocast and ctx.adapter == 4 and ctx.p == 2 and setup.adapters:
        r = setup.lora_rank
        # Gemma 3n's AltUp.correct multiplies by correction_coefs' clamped weight with F.linear: the module (and any
        # adapter on it) never runs, so autocast copies nothing of it
        unused = {"correction_coefs"} if d.streams > 1 else set()
        adapter_w = sum(r * (b.d_in + b.d_out) * b.count for b in ctx.blocks
                        if b.name in ctx.targets and b.name not in unused) * share
        # ... nor lora_A's copy there (only its input's gradient would need it)
        adapter_w -= sum(r * b.d_in * b.count / d.layers for b in first_in if b.name in ctx.targets)
        copies += ctx.p * adapter_w
        lines.append(line("activations.adapter_copies", bytes=ctx.p, count=adapter_w))
    if d.streams > 1:
        from . import gemma3n
        count = gemma3n.norm_weight_copies(ctx, setup.model, 1 if setup.grad_checkpointing else frac * d.layers)
        if count:
            copies += 4 * count
            lines.append(line("activations.norm_weight_copies", count=count))
    if ctx.wrapped.cast_bytes:
        held_layers = 1 if setup.grad_checkpointing else frac * d.moe_layers
        copies += ctx.wrapped.cast_bytes * held_layers
        lines.append(line("activations.expert_factor_casts", bytes=ctx.wrapped.cast_bytes))
    if setup.grad_checkpointing:
        in_layers, single = T * ctx.trained_layers * carried, T * carried
    else:
        in_layers, single = T * (layers_b - first_layer_unsaved(ctx, s)), T * one_layer
    head_in = ctx.pr * d.hidden if ctx.method == "full" and not ctx.fused_head else 0
    outside = T * max(model_b - 32 - head_in, 0.0) + beside
    return Activations(kept, recompute, transient, working, copies, dense_b, tuple(lines), in_layers, single,
                       outside, recompute_tail, head_copy)


def prefix_activations(ctx: Context, setup: Setup, rows: int) -> tuple[float, float, Line]:
    """(kept, recomputed, line) that prefix tuning adds: every layer's keys and values grow by the virtual tokens.

    peft hands the prefixes in as a KV cache; each layer's attention concatenates them with its own keys and
    values (``DynamicCache.update``) and saves the concatenation where it saved its keys and values; eager
    attention's probabilities grow from s to s + n columns.  Under gradient checkpointing the prefixes, one
    tensor of n × layers × 2 × kv per row, stay alive the whole step and the recomputed layer grows the same way.
    """
    d, n, s = ctx.d, setup.virtual_tokens, setup.seq_len
    kv_width = d.q_dim if ctx.expand_kv else d.kv_dim
    per_layer = rows * n * 2 * ctx.p * kv_width + rows * s * attention_per_position(ctx) * n
    if setup.grad_checkpointing:
        held = rows * n * d.layers * 2 * d.kv_dim * ctx.p
        return held, per_layer, line("activations.prefix_checkpointed", n=n, layers=d.layers, kv=d.kv_dim,
                                     bytes=ctx.p, rows=rows, mib=(held + per_layer) / 2**20)
    kept = per_layer * ctx.trained_layers
    return kept, 0.0, line("activations.prefix", n=n, layers=ctx.trained_layers, kv=kv_width, bytes=ctx.p,
                           rows=rows, mib=kept / 2**20)


# The groups of a layer's saved tensors, as the derivation names them.
GROUP_KEYS = {"norms": "norms", "attention": "attention", "MLP": "mlp", "LoRA": "lora", "AltUp": "altup",
              "LAuReL": "laurel", "per-layer input": "per_layer_input"}


def _summary(items: list[Item], ctx: Context) -> list[Line]:
    groups: dict[str, float] = {}
    for group, _, b in items:
        groups[group] = groups.get(group, 0.0) + b
    return [line("activations.group", group=line("activations.group_" + GROUP_KEYS.get(k, k.lower())), bytes=v)
            for k, v in groups.items()]
