"""Model shapes: the numbers that determine parameter count and memory.

A :class:`ModelShape` holds the architecture hyper-parameters of one model (as
found in its ``config.json``) plus the layout facts that matter for counting
parameters exactly the way transformers builds the model: which projections are
fused, which carry a bias, how many norms a layer has, Mixture-of-Experts and
Multi-head-Latent-Attention dimensions, a vision tower (:class:`Tower`) and,
for encoder-decoder models, the encoder.  Everything here is pure Python (no
torch); parameter counts are computed from the shape, never stored.
``oomdoctor.catalog.hf_config`` reads a ``config.json`` into a shape.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = [
    "Linear",
    "ModelShape",
    "Tower",
    "ShapeError",
    "UnsupportedModelType",
    "SUPPORTED_MODEL_TYPES",
    "LAYOUTS",
    "generic",
    "parse_size",
]


# Far beyond any released model (the widest dimension is a vocabulary of ~256k, the largest model ~2T
# parameters); a config.json past them is not a model, and its numbers would overflow float arithmetic.
MAX_DIM = 10_000_000
MAX_PARAMS = 10 ** 14


class ShapeError(ValueError):
    """A shape or a config.json could not be understood."""


class UnsupportedModelType(ShapeError):
    """``from_hf_config`` was given a ``model_type`` it does not know."""


@dataclass(frozen=True)
class Linear:
    """One kind of linear layer in the model.

    ``name`` is the HF module name (what a LoRA ``target_modules`` entry
    matches), ``count`` how many such modules the whole model has (experts
    included), ``kind`` one of ``attn``, ``mlp``, ``expert``,
    ``shared_expert``, ``router``, ``lm_head``, ``vision``, ``projector``.
    Routed experts are not modules in transformers 5: each MoE layer stores
    them as two 3-D parameters, ``experts.gate_up_proj`` and
    ``experts.down_proj``, and a ``Linear`` of kind ``expert`` stands for one
    expert's slice of them (``count`` = MoE layers × experts).
    """

    name: str
    d_in: int
    d_out: int
    count: int
    bias: bool = False
    kind: str = "attn"

    @property
    def params_each(self) -> int:
        return self.d_in * self.d_out + (self.d_out if self.bias else 0)

    @property
    def params(self) -> int:
        return self.params_each * self.count


@dataclass(frozen=True)
class Tower:
    """A vision encoder with the projector that feeds its output to the language model.

    ``params`` is every parameter of the tower and projector, computed from the
    config by ``hf_config``; ``linears`` are its ``nn.Linear`` modules (what
    peft's ``all-linear`` reaches).  Image tokens: ``tokens_per_image`` when the
    model always reads a fixed number (LLaVA, Gemma 3, Mllama); 0 when they
    follow the image's resolution (Qwen2-VL and its successors: one token per
    ``patch·merge`` square of pixels).
    """

    model_type: str
    layers: int
    hidden: int
    heads: int
    intermediate: int
    patch: int
    params: int
    linears: tuple[Linear, ...] = ()
    image_size: int = 0
    merge: int = 1
    temporal_patch: int = 1
    tokens_per_image: int = 0
    tiles: int = 1                  # Mllama: an image is cut into up to this many tiles, each encoded
    global_layers: int = 0          # Mllama: of ``layers``, the gated global layers after the local ones
    # LLaVA-NeXT: the (height, width) resolutions an image is resized to and cut into image_size tiles (anyres)
    grid_pinpoints: tuple[tuple[int, int], ...] = ()
    feature_select: str = "default"  # LLaVA: "default" drops the CLS feature of each view, "full" keeps it
    # What still trains when the tower is frozen (LLaMA-Factory's freeze_vision_tower): the projector (Qwen's
    # visual.merger; its deepstack mergers freeze with the tower) and LLaVA-NeXT's image_newline
    projector_params: int = 0
    # InternVL: an image is cut into between these many image_size tiles by its aspect ratio, plus a thumbnail
    dynamic_tiles: tuple[int, int] = ()
    thumbnail: bool = False
    # LLaVA reads an earlier layer's features (vision_feature_layer -2): the layers after it and the final norm
    # (and a SigLIP pooling head) run for nothing and never get a gradient, though they require one
    idle_layers: int = 0
    idle_params: int = 0

    @property
    def linear_params(self) -> int:
        return sum(l.params for l in self.linears)

    @property
    def tokens_vary(self) -> bool:
        """Whether the image tokens follow the resolution (merged patches, or LLaVA-NeXT's tile grids)."""
        return self.merge > 1 or bool(self.grid_pinpoints) or bool(self.dynamic_tiles)


# Module names per layout.  ``qkv``/``gate_up`` set means the projection is fused; ``gate`` None and
# ``gate_up`` None means a plain two-matrix MLP (``up`` then ``down``).
LAYOUTS: dict[str, dict[str, str | None]] = {
    "llama": dict(q="q_proj", k="k_proj", v="v_proj", qkv=None, o="o_proj",
                  gate="gate_proj", up="up_proj", gate_up=None, down="down_proj"),
    "phi3": dict(q=None, k=None, v=None, qkv="qkv_proj", o="o_proj",
                 gate=None, up=None, gate_up="gate_up_proj", down="down_proj"),
    "glm": dict(q="q_proj", k="k_proj", v="v_proj", qkv=None, o="o_proj",
                gate=None, up=None, gate_up="gate_up_proj", down="down_proj"),
    "chatglm": dict(q=None, k=None, v=None, qkv="query_key_value", o="dense",
                    gate=None, up=None, gate_up="dense_h_to_4h", down="dense_4h_to_h"),
    "baichuan": dict(q=None, k=None, v=None, qkv="W_pack", o="o_proj",
                     gate="gate_proj", up="up_proj", gate_up=None, down="down_proj"),
    "internlm2": dict(q=None, k=None, v=None, qkv="wqkv", o="wo",
                      gate="w1", up="w3", gate_up=None, down="w2"),
    # DeepSeek-V2/V3 multi-head latent attention; MLP names as llama.
    "mla": dict(q="q_proj", k=None, v=None, qkv=None, o="o_proj",
                gate="gate_proj", up="up_proj", gate_up=None, down="down_proj"),
    # GPT-2: Conv1D modules (weights stored transposed; the same parameter count).
    "gpt2": dict(q=None, k=None, v=None, qkv="c_attn", o="c_proj",
                 gate=None, up="c_fc", gate_up=None, down="c_proj"),
    # GPT-NeoX / Pythia, BLOOM, Falcon.
    "neox": dict(q=None, k=None, v=None, qkv="query_key_value", o="dense",
                 gate=None, up="dense_h_to_4h", gate_up=None, down="dense_4h_to_h"),
    "opt": dict(q="q_proj", k="k_proj", v="v_proj", qkv=None, o="out_proj",
                gate=None, up="fc1", gate_up=None, down="fc2"),
    # Qwen (1): one biased c_attn for q, k and v; the MLP multiplies w1's output by silu of w2's (remote code).
    "qwen": dict(q=None, k=None, v=None, qkv="c_attn", o="c_proj",
                 gate="w2", up="w1", gate_up=None, down="c_proj"),
    # GPT-J: separate q/k/v and out_proj without bias, a biased fc_in/fc_out MLP beside the attention.
    "gptj": dict(q="q_proj", k="k_proj", v="v_proj", qkv=None, o="out_proj",
                 gate=None, up="fc_in", gate_up=None, down="fc_out"),
    # StarCoder2: Llama's attention names, a GPT-2-style c_fc/c_proj MLP.
    "starcoder2": dict(q="q_proj", k="k_proj", v="v_proj", qkv=None, o="o_proj",
                       gate=None, up="c_fc", gate_up=None, down="c_proj"),
    # T5: v1.0 has wi/wo, v1.1 and Flan-T5 a gated wi_0/wi_1/wo.
    "t5": dict(q="q", k="k", v="v", qkv=None, o="o", gate="wi_0", up="wi_1", gate_up=None, down="wo"),
}

EXPERT_NAMES = {
    "w123": dict(gate="w1", up="w3", down="w2"),          # Mixtral, PhiMoE (transformers 4 checkpoints)
    "proj": dict(gate="gate_proj", up="up_proj", down="down_proj"),  # Qwen-MoE, DeepSeek
}
# The two 3-D parameters transformers 5 stores each MoE layer's routed experts in.
EXPERTS_GATE_UP = "experts.gate_up_proj"
EXPERTS_DOWN = "experts.down_proj"

# model_type -> (layout, expert naming, norms per layer, qk_norm, norm kind)
_TYPE_DEFAULTS: dict[str, tuple[str, str, int, bool, str]] = {
    "llama": ("llama", "proj", 2, False, "rmsnorm"),
    "mistral": ("llama", "proj", 2, False, "rmsnorm"),
    "mixtral": ("llama", "w123", 2, False, "rmsnorm"),
    "qwen2": ("llama", "proj", 2, False, "rmsnorm"),
    "qwen2_moe": ("llama", "proj", 2, False, "rmsnorm"),
    "qwen3": ("llama", "proj", 2, True, "rmsnorm"),
    "qwen3_moe": ("llama", "proj", 2, True, "rmsnorm"),
    "gemma": ("llama", "proj", 2, False, "rmsnorm"),
    "gemma2": ("llama", "proj", 4, False, "rmsnorm"),
    "gemma3_text": ("llama", "proj", 4, True, "rmsnorm"),
    "gemma3n_text": ("llama", "proj", 4, True, "rmsnorm"),
    "phi3": ("phi3", "proj", 2, False, "rmsnorm"),
    "phimoe": ("llama", "w123", 2, False, "layernorm"),
    "deepseek_v2": ("mla", "proj", 2, False, "rmsnorm"),
    "deepseek_v3": ("mla", "proj", 2, False, "rmsnorm"),
    "glm": ("glm", "proj", 2, False, "rmsnorm"),
    "glm4": ("glm", "proj", 4, False, "rmsnorm"),
    "glm4_moe": ("llama", "proj", 2, False, "rmsnorm"),
    "chatglm": ("chatglm", "proj", 2, False, "rmsnorm"),
    "baichuan": ("baichuan", "proj", 2, False, "rmsnorm"),
    "internlm2": ("internlm2", "proj", 2, False, "rmsnorm"),
    "internlm": ("llama", "proj", 2, False, "rmsnorm"),
    "stablelm": ("llama", "proj", 2, False, "layernorm"),
    "cohere": ("llama", "proj", 1, False, "rmsnorm"),      # one weight-only LayerNorm a layer (parallel block)
    "starcoder2": ("starcoder2", "proj", 2, False, "layernorm"),
    "gptj": ("gptj", "proj", 1, False, "layernorm"),
    "gpt_bigcode": ("gpt2", "proj", 2, False, "layernorm"),
    "qwen": ("qwen", "proj", 2, False, "rmsnorm"),
    "gpt_oss": ("llama", "proj", 2, False, "rmsnorm"),
    "llama4_text": ("llama", "proj", 2, False, "rmsnorm"),
    "mllama_text": ("llama", "proj", 2, False, "rmsnorm"),
    "olmo2": ("llama", "proj", 2, True, "rmsnorm"),
    "smollm3": ("llama", "proj", 2, False, "rmsnorm"),
    "gpt2": ("gpt2", "proj", 2, False, "layernorm"),
    "gpt_neox": ("neox", "proj", 2, False, "layernorm"),
    "bloom": ("neox", "proj", 2, False, "layernorm"),
    "falcon": ("neox", "proj", 1, False, "layernorm"),
    "opt": ("opt", "proj", 2, False, "layernorm"),
    "t5": ("t5", "proj", 3, False, "rmsnorm"),
}

# The router module's name where it is not ``gate``.
ROUTER_NAMES = {"phimoe": "router", "gpt_oss": "router", "llama4_text": "router"}

# Model types whose MLP is two matrices with an activation between (no gate).
PLAIN_MLP_TYPES = frozenset({"gpt2", "gpt_neox", "bloom", "falcon", "opt", "gptj", "starcoder2", "gpt_bigcode"})

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_TYPE_DEFAULTS))


@dataclass(frozen=True)
class ModelShape:
    """Architecture of one model; see the module docstring."""

    id: str
    model_type: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool = False
    attention_bias: bool = False      # bias on q/k/v (or fused qkv)
    o_bias: bool = False              # bias on the attention output projection
    mlp_bias: bool = False
    lm_head_bias: bool = False
    norm: str = "rmsnorm"             # "rmsnorm" (weight) or "layernorm" (weight + bias)
    norms_per_layer: int = 2          # Gemma 2/3: 4 (pre/post attention and feed-forward)
    qk_norm: bool = False             # per-head-dim RMSNorm on q and k (Qwen3, Gemma 3)
    layout: str = "llama"
    # Mixture of experts
    experts: int = 0
    experts_active: int = 0
    moe_intermediate: int = 0
    shared_expert_intermediate: int = 0   # total width of the shared expert MLP
    shared_expert_gate: bool = False      # Qwen2-MoE sigmoid gate Linear(hidden, 1)
    router_bias: bool = False
    expert_naming: str = "proj"
    dense_layers: tuple[int, ...] = ()    # layers with a dense MLP in an MoE model
    # Multi-head latent attention (DeepSeek-V2)
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # metadata
    max_position: int = 0
    family: str = ""
    size: str = ""
    hf_id: str = ""
    names: tuple[str, ...] = ()
    source: str = ""
    notes: str = ""
    assumption: str | None = None
    # Layout details of the families beyond Llama (defaults keep a Llama-style decoder).
    mlp_gated: bool = True            # SwiGLU/GeGLU (three matrices); False: up, activation, down
    qk_norm_full: bool = False        # OLMo 2: q_norm over all heads (q_dim) and k_norm over kv_dim
    pos_embeddings: int = 0           # rows of a learned absolute position table (GPT-2, OPT)
    embed_norm: bool = False          # BLOOM: a LayerNorm right after the word embeddings
    router_name: str = "gate"         # the router module's name ("router" in PhiMoE, gpt-oss, Llama 4)
    expert_bias: bool = False         # gpt-oss: biases on the expert matrices
    extra_params: int = 0             # odd parameters computed from the config (attention sinks, T5's
                                      # relative position biases, projections between embedding widths)
    extra_linears: tuple[Linear, ...] = ()   # linear modules outside the layers (OPT-350m's project_in/out)
    vision: Tower | None = None
    encoder_layers: int = 0           # encoder-decoder models: ``layers`` is the decoder's depth
    source_config: str = ""           # catalog entries: the config.json file under knowledge/model_configs
    checkpoint_format: str = ""       # how the published weights are stored when not plain 16-bit ("mxfp4")
    text_only: bool = False           # the config describes only the language model of a multimodal release
    experts_fused: bool = True        # transformers 5 layout; False: transformers 4's one nn.Linear per expert
    embed_dim: int = 0                # OPT-350m: embeddings narrower than the layers (0: ``hidden``)
    final_norm: bool = True           # OPT-350m has no norm after the last layer
    dropout: float = 0.0              # T5's dropout_rate: dropout layers that keep masks in training
    output_router_logits: bool = False  # MoE: the load-balancing loss is computed (it keeps each layer's routing)
    cross_attention_layers: tuple[int, ...] = ()  # Mllama: layers that attend to the vision tokens, not the text
    kv_shared_layers: int = 0         # Gemma 3n: the last layers reuse an earlier layer's K/V (no k/v_proj, k_norm)
    altup_streams: int = 0            # Gemma 3n: AltUp's streams (the hidden state is carried this many times over)
    laurel_rank: int = 0              # Gemma 3n: LAuReL's low rank
    per_layer_input: int = 0          # Gemma 3n: width of each layer's per-layer input
    sparse_mlp_layers: int = 0        # Gemma 3n: the first layers whose feed-forward keeps a top-k of the gate
    towers_not_counted: tuple[str, ...] = ()  # towers the config describes that no reader models ("vision", "audio")

    def __post_init__(self) -> None:
        ints = ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab")
        for name in ints:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ShapeError(f"{self.id or 'shape'}: {name} must be a positive int, got {v!r}")
            if v > MAX_DIM:
                raise ShapeError(f"{self.id or 'shape'}: {name} = {str(v)[:20]} is beyond any model (at most {MAX_DIM:,})")
        if self.layout not in LAYOUTS:
            raise ShapeError(f"{self.id}: unknown layout {self.layout!r}; known: {sorted(LAYOUTS)}")
        if self.expert_naming not in EXPERT_NAMES:
            raise ShapeError(f"{self.id}: unknown expert_naming {self.expert_naming!r}")
        if self.norm not in ("rmsnorm", "layernorm"):
            raise ShapeError(f"{self.id}: norm must be 'rmsnorm' or 'layernorm', got {self.norm!r}")
        if self.heads % self.kv_heads:
            raise ShapeError(f"{self.id}: heads ({self.heads}) not a multiple of kv_heads ({self.kv_heads})")
        if self.experts:
            if not (0 < self.experts_active <= self.experts):
                raise ShapeError(f"{self.id}: experts_active must be in 1..experts")
            if any(not (0 <= i < self.layers) for i in self.dense_layers):
                raise ShapeError(f"{self.id}: dense_layers out of range")
        elif self.experts_active or self.moe_intermediate or self.shared_expert_intermediate:
            raise ShapeError(f"{self.id}: MoE fields set but experts == 0")
        if self.layout == "mla":
            if not (self.kv_lora_rank and self.qk_rope_head_dim and self.v_head_dim):
                raise ShapeError(f"{self.id}: MLA layout needs kv_lora_rank, qk_rope_head_dim, v_head_dim")
            if self.head_dim != self.qk_nope_head_dim + self.qk_rope_head_dim:
                raise ShapeError(f"{self.id}: MLA head_dim must equal qk_nope_head_dim + qk_rope_head_dim")
        if not 0 <= self.kv_shared_layers < self.layers:
            raise ShapeError(f"{self.id}: kv_shared_layers must lie in 0..layers-1")
        for name in ("pos_embeddings", "extra_params", "encoder_layers", "embed_dim"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_PARAMS:
                raise ShapeError(f"{self.id or 'shape'}: {name} must be a non-negative int, got {v!r}")
        if self.param_count() > MAX_PARAMS:
            raise ShapeError(f"{self.id or 'shape'}: {str(self.param_count())[:20]}… parameters is beyond any model "
                             f"(at most {MAX_PARAMS:.0e})")

    # ------------------------------------------------------------------ dims
    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V, except MLA where V uses ``v_head_dim``): kv_heads * head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def k_dim(self) -> int:
        return self.kv_dim

    @property
    def v_dim(self) -> int:
        return self.kv_heads * (self.v_head_dim if self.layout == "mla" else self.head_dim)

    def kv_cache_values_per_token(self) -> int:
        """K plus V values cached per token over all layers (as transformers' cache stores them; Gemma 3n's
        KV-sharing layers store none of their own)."""
        return (self.layers - self.kv_shared_layers) * (self.k_dim + self.v_dim)

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def is_encoder_decoder(self) -> bool:
        return self.encoder_layers > 0

    @property
    def n_moe_layers(self) -> int:
        return self.layers - len(self.dense_layers) if self.experts else 0

    @property
    def n_dense_mlp_layers(self) -> int:
        return len(self.dense_layers) if self.experts else self.layers + self.encoder_layers

    # ------------------------------------------------------------------ counts
    @property
    def embed_width(self) -> int:
        return self.embed_dim or self.hidden

    def embedding_params(self) -> int:
        return self.vocab * self.embed_width + self.pos_embeddings * self.hidden

    def lm_head_params(self) -> int:
        """0 when the output projection is tied to the input embedding."""
        if self.tied_embeddings:
            return 0
        return self.vocab * self.embed_width + (self.vocab if self.lm_head_bias else 0)

    def lm_head_linear(self) -> Linear:
        """The output projection (present, if tied, as the embedding's shared weight)."""
        return Linear("lm_head", self.hidden, self.vocab, 1, self.lm_head_bias, "lm_head")

    def _norm_width(self, dim: int) -> int:
        return dim * (2 if self.norm == "layernorm" else 1)

    def norm_params(self) -> int:
        per_layer = self.norms_per_layer * self._norm_width(self.hidden)
        if self.qk_norm_full:
            per_layer += self.q_dim + self.kv_dim
        elif self.qk_norm:
            per_layer += 2 * self.head_dim
        if self.layout == "mla":
            per_layer += self.kv_lora_rank + (self.q_lora_rank or 0)
        outside = self._norm_width(self.hidden) * (int(self.final_norm) + int(self.embed_norm))
        if self.encoder_layers:
            # T5: the encoder's layers have two norms (attention, feed-forward), and it has its own final norm
            outside += self.encoder_layers * 2 * self._norm_width(self.hidden) + self._norm_width(self.hidden)
        # a KV-sharing layer (Gemma 3n) has a q_norm but no k_norm
        shared_k_norms = self.kv_shared_layers * self.head_dim if self.qk_norm and not self.qk_norm_full else 0
        return self.layers * per_layer + outside - shared_k_norms

    def linear_layers(self) -> list[Linear]:
        """Every linear layer kind of the language model except lm_head, with its whole-model count
        (a vision tower's are in ``vision.linears``)."""
        L = self.layers
        names = LAYOUTS[self.layout]
        out: list[Linear] = []
        # attention
        if self.layout == "mla":
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                out.append(Linear("q_a_proj", self.hidden, self.q_lora_rank, L, self.attention_bias))
                out.append(Linear("q_b_proj", self.q_lora_rank, self.heads * qk_head, L, False))
            else:
                out.append(Linear("q_proj", self.hidden, self.heads * qk_head, L, False))
            out.append(Linear("kv_a_proj_with_mqa", self.hidden,
                              self.kv_lora_rank + self.qk_rope_head_dim, L, self.attention_bias))
            out.append(Linear("kv_b_proj", self.kv_lora_rank,
                              self.heads * (self.qk_nope_head_dim + self.v_head_dim), L, False))
            out.append(Linear("o_proj", self.heads * self.v_head_dim, self.hidden, L, self.o_bias))
        else:
            # T5: the encoder's self-attention, the decoder's self-attention and its cross-attention
            blocks = self.encoder_layers + 2 * L if self.encoder_layers else L
            if names["qkv"]:
                out.append(Linear(names["qkv"], self.hidden, self.q_dim + 2 * self.kv_dim, blocks,
                                  self.attention_bias))
            else:
                out.append(Linear(names["q"], self.hidden, self.q_dim, blocks, self.attention_bias))
                kv_blocks = blocks - self.kv_shared_layers
                out.append(Linear(names["k"], self.hidden, self.kv_dim, kv_blocks, self.attention_bias))
                out.append(Linear(names["v"], self.hidden, self.kv_dim, kv_blocks, self.attention_bias))
            out.append(Linear(names["o"], self.q_dim, self.hidden, blocks, self.o_bias))
        # dense MLPs
        nd = self.n_dense_mlp_layers
        if nd:
            out.extend(self._mlp(names, self.intermediate, nd, "mlp"))
        # MoE blocks: the router, the routed experts (two 3-D parameters a layer), the shared experts
        nm = self.n_moe_layers
        if nm:
            out.append(Linear(self.router_name, self.hidden, self.experts, nm, self.router_bias, "router"))
            width = self.moe_intermediate or self.intermediate
            cnt = nm * self.experts
            if self.experts_fused:
                out.append(Linear(EXPERTS_GATE_UP, self.hidden, 2 * width, cnt, self.expert_bias, "expert"))
                out.append(Linear(EXPERTS_DOWN, width, self.hidden, cnt, self.expert_bias, "expert"))
            else:
                en = EXPERT_NAMES[self.expert_naming]
                out.append(Linear(en["gate"], self.hidden, width, cnt, self.expert_bias, "expert"))
                out.append(Linear(en["up"], self.hidden, width, cnt, self.expert_bias, "expert"))
                out.append(Linear(en["down"], width, self.hidden, cnt, self.expert_bias, "expert"))
            if self.shared_expert_intermediate:
                sw = self.shared_expert_intermediate
                out.append(Linear("gate_proj", self.hidden, sw, nm, self.mlp_bias, "shared_expert"))
                out.append(Linear("up_proj", self.hidden, sw, nm, self.mlp_bias, "shared_expert"))
                out.append(Linear("down_proj", sw, self.hidden, nm, self.mlp_bias, "shared_expert"))
            if self.shared_expert_gate:
                out.append(Linear("shared_expert_gate", self.hidden, 1, nm, False, "router"))
        out.extend(self.extra_linears)
        return out

    def _mlp(self, names: Mapping[str, str | None], width: int, count: int, kind: str) -> list[Linear]:
        out = []
        if names["gate_up"]:
            out.append(Linear(names["gate_up"], self.hidden, 2 * width, count, self.mlp_bias, kind))
        elif self.mlp_gated and names["gate"]:
            out.append(Linear(names["gate"], self.hidden, width, count, self.mlp_bias, kind))
            out.append(Linear(names["up"], self.hidden, width, count, self.mlp_bias, kind))
        else:
            up = "wi" if self.layout == "t5" else names["up"]
            out.append(Linear(up, self.hidden, width, count, self.mlp_bias, kind))
        out.append(Linear(names["down"], width, self.hidden, count, self.mlp_bias, kind))
        return out

    def linear_params(self) -> int:
        return sum(l.params for l in self.linear_layers())

    def vision_params(self) -> int:
        return self.vision.params if self.vision is not None else 0

    def param_count(self) -> int:
        """Total parameters, exact (tied weights counted once), vision tower included."""
        return (self.embedding_params() + self.lm_head_params() + self.norm_params() + self.linear_params()
                + self.extra_params + self.vision_params())

    def active_param_count(self) -> int:
        """Parameters used per token: only ``experts_active`` routed experts (equals
        ``param_count`` for dense models).  Embedding and lm_head are included."""
        if not self.experts:
            return self.param_count()
        total = self.param_count()
        routed = sum(l.params for l in self.linear_layers() if l.kind == "expert")
        return total - routed + routed * self.experts_active // self.experts

    def params_billion(self) -> float:
        return self.param_count() / 1e9

    def lora_targets(self) -> list[str]:
        """Distinct names of the language model's nn.Linear modules (routers and experts left out)."""
        seen: list[str] = []
        for l in self.linear_layers():
            if l.kind not in ("router", "expert") and l.name not in seen:
                seen.append(l.name)
        return seen

    def replace(self, **changes: Any) -> "ModelShape":
        return dataclasses.replace(self, **changes)


# ---------------------------------------------------------------------- generic sizes
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([bBmM])?\s*$")


def parse_size(size: str | float | int) -> float:
    """``"13B"``, ``"13b"``, ``"500M"``, ``13`` -> billions of parameters."""
    if isinstance(size, bool):
        raise ShapeError(f"not a model size: {size!r}")
    if isinstance(size, (int, float)):
        value = float(size)
    else:
        m = _SIZE_RE.match(str(size))
        if not m:
            raise ShapeError(f"not a model size: {size!r} (expected e.g. '7B', '13b', '500M')")
        value = float(m.group(1)) / (1000.0 if (m.group(2) or "b").lower() == "m" else 1.0)
    if not (0.01 <= value <= 2000):
        raise ShapeError(f"model size {value}B is out of the plausible range 0.01B-2000B")
    return value


# Llama-family reference shapes (hidden, heads, kv_heads, intermediate, vocab) by scale.
_GENERIC_TEMPLATES: tuple[tuple[float, int, int, int, int, int, str], ...] = (
    (0.3, 1024, 16, 16, 2816, 32000, "a small Llama-style model"),
    (1.5, 2048, 16, 16, 5632, 32000, "TinyLlama-1.1B-like width"),
    (4.0, 3200, 32, 32, 8640, 32000, "OpenLLaMA-3B-like width"),
    (10.0, 4096, 32, 32, 11008, 32000, "Llama-2-7B width"),
    (20.0, 5120, 40, 40, 13824, 32000, "Llama-2-13B width"),
    (50.0, 8192, 64, 8, 22016, 32000, "CodeLlama-34B width"),
    (150.0, 8192, 64, 8, 28672, 32000, "Llama-2-70B width"),
    (1e9, 16384, 128, 8, 53248, 128256, "Llama-3.1-405B width"),
)


def generic(params_billion: str | float | int) -> ModelShape:
    """A plausible Llama-style dense shape for a bare size such as ``"13B"``.

    The width comes from the Llama model of that scale; the layer count is
    solved so the total lands as close as possible to the requested size.  The
    returned shape's ``assumption`` says what was assumed, in plain words.
    """
    target = parse_size(params_billion)
    for upper, hidden, heads, kv, inter, vocab, label in _GENERIC_TEMPLATES:
        if target <= upper:
            break
    head_dim = hidden // heads
    per_layer = (hidden * heads * head_dim * 2 + 2 * hidden * kv * head_dim + 3 * hidden * inter + 2 * hidden)
    fixed = 2 * vocab * hidden + hidden
    layers = max(1, int(round((target * 1e9 - fixed) / per_layer)))
    label_size = f"{target:g}B"
    shape = ModelShape(
        id=f"generic-{label_size.lower()}", model_type="llama", layers=layers, hidden=hidden, heads=heads,
        kv_heads=kv, head_dim=head_dim, intermediate=inter, vocab=vocab, tied_embeddings=False,
        max_position=4096, family="generic", size=label_size,
    )
    actual = shape.param_count() / 1e9
    text = (
        f"Unknown architecture: assumed a Llama-style dense decoder of ~{label_size} ({label}: "
        f"hidden {hidden}, {layers} layers, {heads} heads, {kv} KV heads, SwiGLU MLP {inter}, "
        f"vocab {vocab}, untied lm_head) = {actual:.2f}B parameters. Real models of this size differ "
        f"(vocabulary, GQA, tied embeddings); paste the config.json for an exact count."
    )
    return dataclasses.replace(shape, assumption=text, notes=text)

