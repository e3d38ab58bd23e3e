"""What the estimator reads from a model shape, and which tensor each linear layer reads.

The shape comes from ``oomdoctor.catalog`` (``ModelShape``) but only this
protocol is used, so any object with these attributes works: ``layers``,
``hidden``, ``heads``, ``kv_heads``, ``head_dim``, ``intermediate``, ``vocab``,
``tied_embeddings``, optional MoE fields (``experts``, ``experts_active``,
``moe_intermediate``, ``shared_expert_intermediate``), ``param_count()``,
``embedding_params()``, ``lm_head_params()``, ``norm_params()`` and
``linear_layers()`` returning objects with ``name, d_in, d_out, count, bias``
(and optionally ``kind``).

A linear layer's memory during training depends on the tensor it reads: the
query/key/value projections share the first norm's output, the output
projection reads the attention output, gate/up share the second norm's output
and down reads the SwiGLU product.  ``role`` names those four inputs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

ATTN_IN, ATTN_OUT, MLP_IN, MLP_OUT, ROUTER = "attn_in", "attn_out", "mlp_in", "mlp_out", "router"
# Multi-head latent attention: the projections that read the compressed query and key-value latents.
Q_LATENT, KV_LATENT = "q_latent", "kv_latent"
LATENT_ROLES = {"q_b_proj": Q_LATENT, "kv_b_proj": KV_LATENT}

# HF module names of projections that read the attention output / the MLP's inner product.
ATTN_OUT_NAMES = {"o_proj", "dense", "wo", "out_proj", "c_proj", "o", "proj"}
MLP_OUT_NAMES = {"down_proj", "w2", "dense_4h_to_h", "fc2", "experts.down_proj", "wo"}
ATTN_NAMES = {"q_proj", "k_proj", "v_proj", "qkv_proj", "query_key_value", "W_pack", "wqkv", "c_attn",
              "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "q", "k", "v", "qkv"} | ATTN_OUT_NAMES
EXPERT_KINDS = {"expert"}


@dataclass(frozen=True)
class Block:
    """One linear layer kind as the estimator sees it."""

    name: str
    d_in: int
    d_out: int
    count: int          # instances in the whole model
    bias: bool
    role: str
    expert: bool

    @property
    def weights(self) -> int:
        return self.d_in * self.d_out * self.count

    @property
    def params(self) -> int:
        return (self.d_in * self.d_out + (self.d_out if self.bias else 0)) * self.count


@dataclass(frozen=True)
class Dims:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    q_dim: int
    kv_dim: int
    intermediate: int
    vocab: int
    tied: bool
    experts: int
    experts_active: int
    moe_intermediate: int
    shared_intermediate: int
    moe_layers: int
    norms_per_layer: int
    qk_norm: bool
    model_type: str = ""
    gemma_norm: bool = False        # Gemma RMSNorm: ``(x * rsqrt) * (1 + w)`` computed in fp32
    attn_softcap: bool = False      # Gemma 2: tanh soft-capping of the attention scores (eager keeps tanh's output)
    logit_softcap: bool = False     # Gemma 2: tanh soft-capping of the final logits
    fused_qkv: bool = False         # one projection produces q, k and v (Phi-3 qkv_proj, ChatGLM, Baichuan W_pack)
    streams: int = 1                # Gemma 3n: AltUp carries the hidden state as this many streams between layers
    # Multi-head latent attention (DeepSeek-V2/V3, Kimi K2): 0 for every other attention
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0


# Gemma 2 configs set attn_logit_softcapping=50 and final_logit_softcapping=30 (transformers Gemma2Config
# defaults, kept by every released checkpoint); Gemma 3 dropped both for QK-norm.
SOFTCAP_TYPES = {"gemma2"}
# Gemma 3n soft-caps the final logits only (final_logit_softcapping=30, Gemma3nTextConfig's default and E4B's).
LOGIT_SOFTCAP_TYPES = SOFTCAP_TYPES | {"gemma3n_text"}
GEMMA_NORM_TYPES = {"gemma", "gemma2", "gemma3", "gemma3_text"}
FUSED_QKV_NAMES = {"qkv_proj", "query_key_value", "W_pack", "wqkv", "c_attn", "qkv"}


def dims(shape: Any) -> Dims:
    heads, head_dim = shape.heads, shape.head_dim
    kv_heads = getattr(shape, "kv_heads", heads) or heads
    experts = getattr(shape, "experts", 0) or 0
    model_type = str(getattr(shape, "model_type", "") or "")
    moe_layers = getattr(shape, "n_moe_layers", None)
    if moe_layers is None:
        moe_layers = shape.layers if experts else 0
    return Dims(
        layers=shape.layers, hidden=shape.hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
        q_dim=getattr(shape, "q_dim", heads * head_dim), kv_dim=getattr(shape, "kv_dim", kv_heads * head_dim),
        intermediate=shape.intermediate, vocab=shape.vocab, tied=bool(getattr(shape, "tied_embeddings", False)),
        experts=experts, experts_active=getattr(shape, "experts_active", 0) or 0,
        moe_intermediate=getattr(shape, "moe_intermediate", 0) or shape.intermediate,
        shared_intermediate=getattr(shape, "shared_expert_intermediate", 0) or 0,
        moe_layers=moe_layers, norms_per_layer=getattr(shape, "norms_per_layer", 2) or 2,
        qk_norm=bool(getattr(shape, "qk_norm", False)), model_type=model_type,
        gemma_norm=model_type in GEMMA_NORM_TYPES, attn_softcap=model_type in SOFTCAP_TYPES,
        logit_softcap=model_type in LOGIT_SOFTCAP_TYPES, streams=int(getattr(shape, "altup_streams", 0) or 1),
        fused_qkv=any(lin.name in FUSED_QKV_NAMES for lin in shape.linear_layers()),
        q_lora_rank=int(getattr(shape, "q_lora_rank", 0) or 0), kv_lora_rank=int(getattr(shape, "kv_lora_rank", 0) or 0),
        qk_rope_head_dim=int(getattr(shape, "qk_rope_head_dim", 0) or 0),
        v_head_dim=int(getattr(shape, "v_head_dim", 0) or 0),
    )


def _role(name: str, kind: str | None, d_in: int, hidden: int, d_out: int) -> str:
    if kind == "router":
        return ROUTER
    attention = kind == "attn" if kind else name in ATTN_NAMES
    if attention:
        if name in LATENT_ROLES:
            return LATENT_ROLES[name]
        return ATTN_OUT if name in ATTN_OUT_NAMES else ATTN_IN
    # the width it reads decides; a name only where both widths equal the hidden size (Qwen (1)'s w2 reads
    # the hidden state although Mixtral's w2 reads the product)
    if d_in != hidden or (name in MLP_OUT_NAMES and d_out == hidden):
        return MLP_OUT
    return MLP_IN


def blocks(shape: Any) -> list[Block]:
    hidden = shape.hidden
    out = []
    for lin in shape.linear_layers():
        kind = getattr(lin, "kind", None)
        out.append(Block(lin.name, lin.d_in, lin.d_out, lin.count, bool(getattr(lin, "bias", False)),
                         _role(lin.name, kind, lin.d_in, hidden, lin.d_out), kind in EXPERT_KINDS))
    return out


def total_params(shape: Any) -> int:
    return int(shape.param_count())


def quantized_blocks(shape: Any) -> list[Block]:
    """The linear layers bitsandbytes quantises: ``nn.Linear`` modules only (transformers'
    ``replace_with_bnb_linear``), so not the routed experts transformers 5 keeps in 3-D parameters,
    nor a router that is a custom module."""
    from .adapters import module_names
    modules = set(module_names(shape))
    fused = getattr(shape, "experts_fused", True)
    return [b for b in blocks(shape) if (not b.expert or not fused) and b.name in modules]


def linear_weights(shape: Any) -> int:
    """Weights of the linear layers bitsandbytes quantises (lm_head, experts and custom routers excluded)."""
    return sum(b.weights for b in quantized_blocks(shape))


def layer_params(shape: Any) -> int:
    """Parameters of one decoder layer (norms included), averaged over layers."""
    final_norm = shape.hidden
    return (sum(b.params for b in blocks(shape)) + shape.norm_params() - final_norm) // shape.layers


def root_params(shape: Any) -> int:
    """Parameters outside the decoder layers: embeddings, the final norm and lm_head (FSDP's root unit)."""
    in_layers = sum(b.params for b in blocks(shape)) + shape.norm_params() - shape.hidden
    return total_params(shape) - in_layers


def all_linear_names(shape: Any) -> list[str]:
    """What peft's ``target_modules="all-linear"`` selects: every nn.Linear but the output layer
    (transformers 5 keeps routed experts in 3-D parameters, and most routers are not nn.Linear)."""
    from .adapters import module_names
    return module_names(shape)


def resolve_targets(shape: Any, targets: Iterable[str]) -> tuple[set[str], list[str]]:
    """The nn.Linear names that get a LoRA adapter, and the requested names the model lacks
    (peft matches a target as the final component of a module's dotted name; see ``adapters``)."""
    from .adapters import place
    p = place(shape, targets, 1)
    return set(p.modules), list(p.missing)
