"""Parallelism beyond data parallel: tensor parallelism splits each layer, context parallelism each sequence.

Tensor parallelism (transformers' ``tp_plan="auto"``: ``base_model_tp_plan``
of the Llama family and those that copy it) splits q/k/v and gate/up by
output columns and o/down by input rows over ``tp`` ranks, so every rank
holds ``1/tp`` of each decoder layer's linear weights and of the tensors
between them (the attention heads, the MLP's inner width), while the hidden
states between the layers, the norms and the embeddings stay whole;
``lm_head`` is split by columns (``colwise_rep``) and its output gathered, so
each rank still sees the whole vocabulary's logits.  A tensor-parallel rank is
estimated as the same model with ``heads / tp``, ``kv_heads / tp`` and
``intermediate / tp``: ``sharded`` builds that shape.

Context (sequence) parallelism splits each sequence over ``cp`` ranks: ring
attention (torch ``context_parallel``, as accelerate's ``cp_size`` and TRL
expose it) and DeepSpeed Ulysses (``sequence_parallel_size``) both leave each
rank holding its ``seq / cp`` tokens of every activation and of the logits,
what one rank running ``seq / cp`` tokens holds; attention's inputs are
exchanged in transit (ring: the next rank's keys and values, double
buffered; Ulysses: all-to-all copies of q, k and v), one layer at a time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import anatomy

# Projections whose output columns are split (the rest of a layer's linears are split by input rows).
COLUMN_ROLES = {anatomy.ATTN_IN, anatomy.MLP_IN}


@dataclass(frozen=True)
class _Linear:
    name: str
    d_in: int
    d_out: int
    count: int
    bias: bool
    kind: str | None = None


class TensorShard:
    """One tensor-parallel rank's share of a model shape (the ``anatomy`` protocol)."""

    def __init__(self, shape: Any, tp: int):
        self._shape, self._tp = shape, tp
        self.layers = shape.layers
        self.hidden = shape.hidden
        self.head_dim = shape.head_dim
        self.heads = max(1, shape.heads // tp)
        self.kv_heads = max(1, (getattr(shape, "kv_heads", shape.heads) or shape.heads) // tp)
        self.q_dim = self.heads * self.head_dim
        self.kv_dim = self.kv_heads * self.head_dim
        self.intermediate = max(1, shape.intermediate // tp)
        self.vocab = shape.vocab
        for name in ("tied_embeddings", "experts", "experts_active", "n_moe_layers", "norms_per_layer", "qk_norm",
                     "model_type"):
            if hasattr(shape, name):
                setattr(self, name, getattr(shape, name))
        for name in ("moe_intermediate", "shared_expert_intermediate"):
            if getattr(shape, name, 0):
                setattr(self, name, max(1, getattr(shape, name) // tp))

    def linear_layers(self) -> list[_Linear]:
        out = []
        for lin, block in zip(self._shape.linear_layers(), anatomy.blocks(self._shape)):
            kind = getattr(lin, "kind", None)
            role = block.role
            if role == anatomy.ROUTER:
                out.append(_Linear(lin.name, lin.d_in, lin.d_out, lin.count, bool(lin.bias), kind))
            elif role in COLUMN_ROLES:
                out.append(_Linear(lin.name, lin.d_in, max(1, lin.d_out // self._tp), lin.count, bool(lin.bias), kind))
            else:
                out.append(_Linear(lin.name, max(1, lin.d_in // self._tp), lin.d_out, lin.count, bool(lin.bias), kind))
        return out

    def embedding_params(self) -> int:
        return self._shape.embedding_params()

    def lm_head_params(self) -> int:
        return self._shape.lm_head_params() // self._tp

    def norm_params(self) -> int:
        return self._shape.norm_params()

    def param_count(self) -> int:
        linear = sum((lin.d_in * lin.d_out + (lin.d_out if lin.bias else 0)) * lin.count
                     for lin in self.linear_layers())
        return linear + self.embedding_params() + self.lm_head_params() + self.norm_params()


def sharded(shape: Any, tp: int) -> Any:
    """The shape one of ``tp`` tensor-parallel ranks holds (the shape itself when ``tp`` is 1)."""
    return shape if tp <= 1 else TensorShard(shape, tp)


def local_seq_len(seq_len: int, cp: int) -> int:
    """Tokens of each sequence one of ``cp`` context-parallel ranks holds."""
    return -(-seq_len // cp)


def exchange_bytes(tokens: int, kv_dim: int, p: int) -> float:
    """Keys and values in transit for one layer (ring attention: the next rank's pair while the current one
    computes; Ulysses: the all-to-all's copies), on top of the layer being computed."""
    return 2 * 2 * p * kv_dim * tokens
