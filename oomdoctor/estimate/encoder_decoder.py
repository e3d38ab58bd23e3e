"""What an encoder-decoder model (T5, Flan-T5, mT5) keeps for backward: the encoder over the source tokens,
the decoder over the target tokens, cross-attention between them (transformers 5 ``modeling_t5``).

Per token and layer, with ``p`` the compute dtype, ``h`` d_model, ``n`` heads × d_kv, ``I`` d_ff, ``a`` heads,
``S`` the source and ``T`` the target length, ``δ`` 1 when the config's ``dropout_rate`` is above 0 (a
dropout keeps a 1-byte mask per element, CUDA's ``native_dropout``):

* each T5LayerNorm: its input in fp32 ``4h`` (the input itself in fp32), the rsqrt (4 B) and, when its weight
  trains, the normalised input; its output is read by the next projections, which keep it when they train
  or carry an adapter (``activations.input_saves``);
* attention (eager, T5's own: scores + the relative position bias, softmax, dropout, no scaling): the query,
  key and value ``3p·n`` (cross-attention: the query over T, key and value over S per decoder layer), the
  softmax output ``p·a·L`` per query token over L keys, with dropout its mask ``δ·a·L`` and the dropped
  probabilities ``p·a·L``, and the output's contiguous copy read by ``o``;
* the feed-forward: ReLU keeps its output ``p·I``; Flan-T5's gated GELU (``gelu_new``, written as tanh
  arithmetic) keeps ``wi_0``'s output, tanh's output, ``0.5·x`` and ``1 + tanh``, its result and ``wi_1``'s
  output ``6p·I``; then dropout's mask and output ``(δ + p)·I`` for ``wo``;
* each sublayer's residual dropout keeps its mask ``δ·h``.

Outside the layers: both embeddings' dropout masks, the final norms, the decoder output scaled by
d_model^-0.5 for the tied lm_head, the position bias tensors ``p·a·L²`` (one per stack, shared by its layers,
kept when the bias trains), and the int64 inputs (source ids and mask; target labels and decoder ids).
"""
from __future__ import annotations

from . import activations as acts
from .derivation import line
from .setup import Setup


def _norm(ctx, width: int) -> float:
    kept = 4 * width + 4
    if ctx.full_layers:
        kept += ctx.pr * width
    return kept


def _reads(ctx, names: tuple[str, ...]) -> list[tuple[str, bool, bool, float]]:
    return [(n, ctx.full_layers, n in ctx.targets, 1.0) for n in names]


def _saved(ctx, width: int, names: tuple[str, ...], x_bytes: int) -> float:
    return sum(b for *_, b in acts.input_saves(ctx, "t5", "input", width, x_bytes, _reads(ctx, names)))


def _attention(ctx, shape, keys: int, cross: bool, dropout: bool) -> tuple[float, float]:
    """(bytes per query token, bytes per key token) of one attention sublayer."""
    p, h, n, a = ctx.p, shape.hidden, shape.q_dim, shape.heads
    per_q = _norm(ctx, h)
    per_q += _saved(ctx, h, ("q",) if cross else ("q", "k", "v"), ctx.pr)
    per_q += p * n * (1 if cross else 3)                 # query (and key, value) kept by the two matmuls
    per_q += p * a * keys * (2 if dropout else 1) + (a * keys if dropout else 0)
    per_q += _saved(ctx, n, ("o",), p) if (ctx.full_layers or "o" in ctx.targets) else 0
    per_q += h if dropout else 0                          # residual dropout mask
    per_k = 0.0
    if cross:
        per_k = 2 * p * n + _saved(ctx, h, ("k", "v"), p) * 0   # the encoder output is counted once, outside
    return per_q, per_k


def _ffn(ctx, shape, dropout: bool) -> float:
    p, h, I = ctx.p, shape.hidden, shape.intermediate
    kept = _norm(ctx, h)
    gated = shape.mlp_gated
    kept += _saved(ctx, h, ("wi_0", "wi_1") if gated else ("wi",), ctx.pr)
    kept += 6 * p * I if gated else p * I
    if dropout:
        kept += I
    kept += _saved(ctx, I, ("wo",), p) if (ctx.full_layers or "wo" in ctx.targets) else 0
    kept += h if dropout else 0
    return kept


def activations(setup: Setup, rows: int) -> acts.Activations:
    ctx = acts.context(setup)
    shape = setup.model
    S = setup.seq_len
    T = target_len(setup)
    dropout = getattr(shape, "dropout", 0.0) > 0
    enc_attn, _ = _attention(ctx, shape, S, False, dropout)
    enc_layer = enc_attn + _ffn(ctx, shape, dropout)
    dec_self, _ = _attention(ctx, shape, T, False, dropout)
    dec_cross_q, dec_cross_k = _attention(ctx, shape, S, True, dropout)
    dec_layer = dec_self + dec_cross_q + _ffn(ctx, shape, dropout)
    L_enc, L_dec = shape.encoder_layers, shape.layers
    p, h, a = ctx.p, shape.hidden, shape.heads
    outside_src = (h if dropout else 0) + _norm(ctx, h) + (h if dropout else 0) + 16      # ids, mask
    # the encoder output, read by every decoder layer's k and v
    outside_src += _saved(ctx, h, ("k", "v"), p) if (ctx.full_layers or {"k", "v"} & ctx.targets) else 0
    outside_tgt = (h if dropout else 0) + _norm(ctx, h) + (h if dropout else 0) + 16      # labels, decoder ids
    if ctx.method == "full":
        outside_tgt += ctx.pr * h                        # the scaled decoder output kept by lm_head
    bias = 0.0
    if ctx.full_layers:
        bias = p * a * (S * S + T * T)                   # relative position biases, one per stack
    kept = rows * (S * (L_enc * enc_layer + L_dec * dec_cross_k + outside_src)
                   + T * (L_dec * dec_layer + outside_tgt)) + bias
    recompute = 0.0
    if setup.grad_checkpointing:
        layer_in = ctx.pr * h
        kept = rows * (S * (L_enc * layer_in + outside_src) + T * (L_dec * layer_in + outside_tgt)) + bias
        recompute = rows * max(S * enc_layer, T * dec_layer + S * dec_cross_k)
    said = line("activations.encoder_decoder", enc_layers=L_enc, src=rows * S, enc=enc_layer, dec_layers=L_dec,
                tgt=rows * T, dec=dec_layer, cross=dec_cross_k)
    working = rows * max(S, T) * (2 * ctx.pr * h + 3 * p * shape.intermediate)
    transient = rows * max(S * S, T * T, T * S) * p * a
    # What offloading moves (``offload``): everything kept but the int64 inputs; one layer's set stays resident.
    inputs = rows * 16 * (S + T)
    if setup.grad_checkpointing:
        one = rows * max(S, T) * ctx.pr * h
    else:
        one = rows * max(S * enc_layer, T * dec_layer + S * dec_cross_k)
    return acts.Activations(kept, recompute, transient, working, 0.0, enc_layer, (said,), kept - inputs, one, 0.0)


def target_len(setup: Setup) -> int:
    """Target tokens per example: stated, or the source length (an assumption the estimate states)."""
    return getattr(setup, "target_len", None) or setup.seq_len
