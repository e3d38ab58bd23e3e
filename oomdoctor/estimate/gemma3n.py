"""What Gemma 3n's decoder layer keeps for backward, op by op as transformers 5.24 builds it
(``modeling_gemma3n.Gemma3nTextDecoderLayer`` and ``Gemma3nTextModel``).

Notation as in ``activations`` (bytes per token): ``h`` hidden, ``A`` AltUp streams, ``P`` per-layer input width,
``r`` LAuReL rank, ``I`` feed-forward width, ``q``/``kv`` query and key/value widths, ``a``/``g`` query and
key/value heads, ``p`` compute dtype, ``pr`` residual dtype.

Gemma 3n's RMSNorm computes in fp32 and raises the mean square to the power -0.5 (``torch.pow``, which keeps its
base and its result: 8 B a row) before ``x * w``: a norm keeps its input upcast to fp32 ``4·width`` (in fp32 the
input itself; when that input is a view of a stream stack, the whole stack), 8 B a row, and the normalised fp32
input ``4·width`` when its weight trains.  v_norm has no weight.

A layer: AltUp's prediction (router norm on stream 0, the modality router's input, tanh's fp32 output ``4A``, the
prediction coefficients' input, the ``A²`` coefficients and the stream stack ``A·h`` that the batched matmul
keeps), the input norm (in fp32 its input is a view of the predictions stack: ``A·h``), LAuReL (its rank-wide
middle and its norm), attention with q/k/v norms (a KV-sharing layer has no k/v norms and its keys and values are
the storing layer's), the post-attention, pre- and post-feed-forward norms, the GELU-gated feed-forward (a sparse
layer keeps the gate output for ``std`` and the top-k's ``relu`` output besides), AltUp's correction (the router
again, the innovation repeated over the streams ``A·h`` and its coefficients ``A``), the scaled first stream and
the per-layer input's gate, GELU, product and projection, and the norm after it.

Outside the layers: the per-layer inputs' projection norm over ``L·P``, the magnitude-matched projections into the
streams before the first layer and out of them after the last (each keeps its output and the scaled output), and
the last layer's stream stack.  Measured on CPU with ``bench/accuracy/measure_grid.py`` (``gemma3n_text`` cells).
"""
from __future__ import annotations

from . import anatomy

Item = tuple[str, str, float]


def _norm(ctx, label: str, width: int, rows: int, as_is: bool, weight: bool = True) -> list[Item]:
    """A Gemma 3n RMSNorm over ``width`` values in ``rows`` rows a token; ``as_is``: its fp32 input is kept by
    another op already (a view of a stack counted elsewhere)."""
    items: list[Item] = []
    if not as_is:
        items.append(("norms", f"{label}: input upcast to fp32", 4 * width))
    items.append(("norms", f"{label}: mean square and its power -0.5 (fp32)", 8 * rows))
    if weight and ctx.full_layers:
        items.append(("norms", f"{label}: normalised input for the weight's gradient", 4 * width))
    return items


def _linear_in(ctx, group: str, tensor: str, width: int, x_bytes: int, names: tuple[str, ...],
               shared: bool = True) -> list[Item]:
    from .activations import input_saves
    consumers = [(b.name, ctx.full_layers, b.name in ctx.targets, 1.0) for b in ctx.blocks if b.name in names]
    items = input_saves(ctx, group, tensor, width, x_bytes, consumers)
    return items if shared else [it for it in items if "shared" not in it[1]]


def layer_items(ctx, shape, sparse: bool, kv_shared: bool) -> list[Item]:
    d, p, pr = ctx.d, ctx.p, ctx.pr
    h, A, P, r = d.hidden, d.streams, shape.per_layer_input, shape.laurel_rank
    I, q, kv = d.intermediate, d.q_dim, d.kv_dim
    fp32 = pr == 4
    items: list[Item] = []
    # AltUp's prediction
    items.append(("AltUp", "the streams stack, kept by the coefficients' matmul", p * A * h))
    for step in ("prediction", "correction"):
        if step == "prediction":
            items += _norm(ctx, "router norm", h, 1, as_is=fp32 and p == 4)
        else:
            items += _norm(ctx, "router norm (correction)", h, 1, as_is=False)
        items += _linear_in(ctx, "AltUp", f"modality router input ({step})", h, pr, ("modality_router",))
        items.append(("AltUp", f"tanh output ({step}, fp32)", 4 * A))
        if step == "prediction":
            # in fp32 the modalities are tanh's output itself: only casts and adapters are new
            items += _linear_in(ctx, "AltUp", "modalities", A, pr, ("prediction_coefs",), shared=not fp32)
            items.append(("AltUp", "prediction coefficients (contiguous for the matmul)", p * A * A))
        elif ctx.full_layers and not fp32:
            # correct() calls F.linear with the clamped weight: no module, so no adapter; it keeps the modalities
            items.append(("AltUp", "modalities for the correction coefficients", (p if ctx.autocast else pr) * A))
    items += _norm(ctx, "input norm", h, 1, as_is=False) if not fp32 else [
        ("norms", "input norm: its input, a view of the predictions stack (fp32)", 4 * A * h),
        ("norms", "input norm: mean square and its power -0.5 (fp32)", 8)] + (
        [("norms", "input norm: normalised input for the weight's gradient", 4 * h)] if ctx.full_layers else [])
    attn_in = tuple(b.name for b in ctx.blocks if b.role == anatomy.ATTN_IN) + ("linear_left",)
    items += _linear_in(ctx, "attention", "input norm output", h, pr, attn_in)
    # LAuReL
    items += _linear_in(ctx, "LAuReL", "low-rank middle", r, p, ("linear_right",))
    items += _norm(ctx, "LAuReL norm", h, 1, as_is=False)
    # attention
    items += _norm(ctx, "q norm", q, d.heads, as_is=False)
    if not kv_shared:
        items += _norm(ctx, "k norm", kv, d.kv_heads, as_is=False)
        items += _norm(ctx, "v norm", kv, d.kv_heads, as_is=False, weight=False)
    kv_width = d.q_dim if ctx.expand_kv else d.kv_dim
    items.append(("attention", "rotated query", p * q))
    if not kv_shared or ctx.expand_kv:
        items.append(("attention", "keys and values" + (" expanded by repeat_kv" if ctx.expand_kv else ""),
                      2 * p * kv_width))
    o_names = tuple(b.name for b in ctx.blocks if b.role == anatomy.ATTN_OUT)
    if ctx.attention == "eager":
        items += _linear_in(ctx, "attention", "attention output (contiguous copy)", q, p, o_names)
    else:
        items.append(("attention", "attention output", p * q))
        items.append(("attention", "softmax logsumexp (fp32)", 4 * d.heads))
        items += _linear_in(ctx, "attention", "attention output", q, p, o_names, shared=False)
    items += _norm(ctx, "post-attention norm", h, 1, as_is=False)
    # the feed-forward
    items += _norm(ctx, "pre-MLP norm", h, 1, as_is=False)
    items += _linear_in(ctx, "MLP", "pre-MLP norm output", h, pr, ("gate_proj", "up_proj"))
    mp = ctx.mlp_p
    items.append(("MLP", "gate, up and GELU outputs", 3 * mp * I))
    if sparse:
        items.append(("MLP", "top-k: the gate output kept by std, and std (fp32 per row)", mp * I + 4))
    items += _linear_in(ctx, "MLP", "MLP product", I, mp, ("down_proj",))
    items += _norm(ctx, "post-MLP norm", h, 1, as_is=False)
    # AltUp's correction: the innovation over every stream and its coefficients
    items.append(("AltUp", "innovation repeated over the streams", pr * A * h))
    items.append(("AltUp", "correction coefficients", 4 * A))
    # the per-layer input
    if ctx.full_layers:
        items.append(("per-layer input", "first stream, kept by the output scale", pr * h))
    items += _linear_in(ctx, "per-layer input", "scaled first stream", h, pr, ("per_layer_input_gate",))
    items.append(("per-layer input", "gate output, kept by GELU", p * P))
    if _per_layer_inputs_need_grad(ctx):
        items.append(("per-layer input", "GELU output, kept by the product", p * P))
    items += _linear_in(ctx, "per-layer input", "product", P, p, ("per_layer_projection",))
    items += _norm(ctx, "per-layer input norm", h, 1, as_is=False)
    return items


def _per_layer_inputs_need_grad(ctx) -> bool:
    """The per-layer inputs come from the embeddings and per_layer_model_projection: they need a gradient when
    either trains or carries an adapter."""
    return ctx.full_layers or "per_layer_model_projection" in ctx.targets


def layer_kinds(shape) -> list[tuple[int, bool, bool]]:
    """(count, sparse, kv_shared) for the layers of a Gemma 3n shape."""
    L, S, K = shape.layers, shape.sparse_mlp_layers, shape.kv_shared_layers
    kinds: dict[tuple[bool, bool], int] = {}
    for i in range(L):
        key = (i < S, i >= L - K)
        kinds[key] = kinds.get(key, 0) + 1
    return [(n, sparse, shared) for (sparse, shared), n in kinds.items()]


def outside_items(ctx, shape) -> list[Item]:
    """Per token, outside the layers, beyond what ``activations.model_items`` counts."""
    d, pr = ctx.d, ctx.pr
    h, A, L, P = d.hidden, d.streams, d.layers, shape.per_layer_input
    items: list[Item] = []
    into = ctx.full_layers or "altup_projections" in ctx.targets or ctx.first_input_grad
    if _per_layer_inputs_need_grad(ctx):
        items += _linear_in(ctx, "per-layer input", "embeddings, read by the per-layer projection", h, pr,
                            ("per_layer_model_projection",))
        items += _norm(ctx, "per-layer projection norm", L * P, L, as_is=False)
    if into:
        items.append(("AltUp", "target magnitude of the embeddings", 8))
        items += [("AltUp", f"{A - 1} projections into the streams: output and scaled output", (A - 1) * (2 * pr * h + 8))]
    # every layer's product with its slice keeps the slice: a view of the one [tokens, L, P] tensor
    items.append(("per-layer input", "the per-layer inputs, every layer's slice", pr * L * P))
    items.append(("AltUp", "the last layer's streams stack, kept for the target magnitude", pr * A * h + 8))
    items += [("AltUp", f"{A - 1} projections out of the streams: output and scaled output", (A - 1) * (2 * pr * h + 8))]
    return items


def checkpoint_extras(ctx, shape, rows: int) -> float:
    """Per token, what gradient checkpointing keeps beyond each layer's input: the keys and values the last
    layer of each attention kind before the KV-sharing layers hands them (``shared_kv_states``, alive until the
    forward ends), and the second attention kind's rotary cos and sin."""
    d = ctx.d
    stored = 2 * 2 * ctx.p * d.kv_dim if shape.kv_shared_layers else 0
    return stored + 2 * ctx.pr * d.head_dim / rows


def norm_weight_copies(ctx, shape, layers_held: float) -> float:
    """Values of the fp32 copies Gemma 3n's RMSNorms make of 16-bit weights (``self.weight.float()``), saved by
    the multiply for its input's gradient: per layer eight of the hidden width (the router norm runs twice) and
    the q and k norms (no k norm in a KV-sharing layer); outside, the final norm and the per-layer projection norm.
    fp32 weights are their own copy."""
    if ctx.pr == 4:
        return 0.0
    d = ctx.d
    L, K = d.layers, shape.kv_shared_layers
    per_layer = 8 * d.hidden + d.head_dim + d.head_dim * (L - K) / L
    return per_layer * layers_held + d.hidden + shape.per_layer_input
