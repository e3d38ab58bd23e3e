"""What multi-head latent attention keeps for backward (transformers 5 ``DeepseekV3Attention``, also DeepSeek-V2
and Kimi K2), per token and layer; see ``activations`` for the notation.

The query goes through a low-rank latent (``q_a_proj`` → ``q_a_layernorm`` →
``q_b_proj``, or one ``q_proj``); keys and values through another
(``kv_a_proj_with_mqa`` gives the ``kv_lora_rank`` latent and one shared rotary
key part, ``kv_a_layernorm``, then ``kv_b_proj`` expands the latent to every
head's non-rotary key and value).  Kept: each latent norm's input upcast to fp32
(in fp32 the key-value norm reads a view of the whole ``kv_a_proj_with_mqa``
output, rotary part included), its rsqrt and, when its weight trains, the
normalised input; the latents themselves where ``q_b_proj``/``kv_b_proj`` save
them; the query and the key assembled from the non-rotary and rotary parts
(``torch.cat`` and ``expand_kv``'s copies, ``p·heads·qk_head`` each); the values,
a view of ``kv_b_proj``'s output that holds all of it (``p·heads·(nope + v)``; eager
attention's matmul keeps a contiguous copy of the values alone instead);
and the attention output (``heads·v_head_dim`` wide).
"""
from __future__ import annotations

from . import anatomy


def attention_items(ctx, items_from, norm, input_saves, consumers) -> list:
    """The attention half of one layer for an MLA model (the helpers are ``activations``' own)."""
    d, p = ctx.d, ctx.p
    heads, qk = d.heads, d.head_dim
    v_head = d.v_head_dim
    nope = qk - d.qk_rope_head_dim
    items = list(items_from)
    if d.q_lora_rank:
        items += norm(ctx, "query latent norm", d.q_lora_rank)
        items += input_saves(ctx, "attention", "query latent", d.q_lora_rank, p, consumers(ctx, anatomy.Q_LATENT, False))
    items += norm(ctx, "key-value latent norm", d.kv_lora_rank)
    if p == 4:
        items.append(("attention", "the rotary key part, held by the latent norm's view", 4 * d.qk_rope_head_dim))
    items += input_saves(ctx, "attention", "key-value latent", d.kv_lora_rank, p, consumers(ctx, anatomy.KV_LATENT, False))
    items.append(("attention", "query (non-rotary and rotated parts concatenated)", p * heads * qk))
    items.append(("attention", "key (expanded from the latent, rotary part copied in)", p * heads * qk))
    if ctx.attention == "eager":
        # matmul makes the strided value view contiguous and keeps that copy
        items.append(("attention", "values (contiguous copy)", p * heads * v_head))
    else:
        items.append(("attention", "values: a view that holds kv_b_proj's whole output", p * heads * (nope + v_head)))
    o_consumers = consumers(ctx, anatomy.ATTN_OUT, False)
    if ctx.attention == "eager":
        items += input_saves(ctx, "attention", "attention output (contiguous copy)", heads * v_head, p, o_consumers)
    else:
        items.append(("attention", "attention output", p * heads * v_head))
        items.append(("attention", "softmax logsumexp (fp32)", 4 * heads))
        items += [it for it in input_saves(ctx, "attention", "attention output", heads * v_head, p, o_consumers)
                  if "shared" not in it[1]]
    return items
