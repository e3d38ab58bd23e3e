"""Model shapes: the numbers that determine parameter count and memory.

A :class:`ModelShape` holds the architecture hyper-parameters of one decoder-only
LLM (as found in its ``config.json``) plus the few layout facts that matter for
counting parameters exactly: which projections are fused, which carry a bias,
how many norms a layer has, Mixture-of-Experts and Multi-head-Latent-Attention
dimensions.  Everything here is pure Python (no torch); parameter counts are
computed from the shape, never stored.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = [
    "Linear",
    "ModelShape",
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
    ``shared_expert``, ``router``, ``lm_head``.
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


# Module names per layout.  ``qkv``/``gate_up`` set means the projection is fused.
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
    # DeepSeek-V2 multi-head latent attention; MLP names as llama.
    "mla": dict(q="q_proj", k=None, v=None, qkv=None, o="o_proj",
                gate="gate_proj", up="up_proj", gate_up=None, down="down_proj"),
}

EXPERT_NAMES = {
    "w123": dict(gate="w1", up="w3", down="w2"),          # Mixtral, PhiMoE
    "proj": dict(gate="gate_proj", up="up_proj", down="down_proj"),  # Qwen-MoE, DeepSeek
}

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
    "phi3": ("phi3", "proj", 2, False, "rmsnorm"),
    "phimoe": ("llama", "w123", 2, False, "layernorm"),
    "deepseek_v2": ("mla", "proj", 2, False, "rmsnorm"),
    "glm": ("glm", "proj", 2, False, "rmsnorm"),
    "chatglm": ("chatglm", "proj", 2, False, "rmsnorm"),
    "baichuan": ("baichuan", "proj", 2, False, "rmsnorm"),
    "internlm2": ("internlm2", "proj", 2, False, "rmsnorm"),
}

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_TYPE_DEFAULTS)) + ("gemma3", "yi")


@dataclass(frozen=True)
class ModelShape:
    """Architecture of one decoder-only model; see the module docstring."""

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
        """K plus V values cached per token over all layers (as transformers' cache stores them)."""
        return self.layers * (self.k_dim + self.v_dim)

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def n_moe_layers(self) -> int:
        return self.layers - len(self.dense_layers) if self.experts else 0

    @property
    def n_dense_mlp_layers(self) -> int:
        return len(self.dense_layers) if self.experts else self.layers

    # ------------------------------------------------------------------ counts
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def lm_head_params(self) -> int:
        """0 when the output projection is tied to the input embedding."""
        if self.tied_embeddings:
            return 0
        return self.vocab * self.hidden + (self.vocab if self.lm_head_bias else 0)

    def lm_head_linear(self) -> Linear:
        """The output projection (present, if tied, as the embedding's shared weight)."""
        return Linear("lm_head", self.hidden, self.vocab, 1, self.lm_head_bias, "lm_head")

    def _norm_width(self, dim: int) -> int:
        return dim * (2 if self.norm == "layernorm" else 1)

    def norm_params(self) -> int:
        per_layer = self.norms_per_layer * self._norm_width(self.hidden)
        if self.qk_norm:
            per_layer += 2 * self.head_dim
        if self.layout == "mla":
            per_layer += self.kv_lora_rank + (self.q_lora_rank or 0)
        return self.layers * per_layer + self._norm_width(self.hidden)

    def linear_layers(self) -> list[Linear]:
        """Every linear layer kind except lm_head, with its whole-model count."""
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
            if names["qkv"]:
                out.append(Linear(names["qkv"], self.hidden, self.q_dim + 2 * self.kv_dim, L,
                                  self.attention_bias))
            else:
                out.append(Linear(names["q"], self.hidden, self.q_dim, L, self.attention_bias))
                out.append(Linear(names["k"], self.hidden, self.kv_dim, L, self.attention_bias))
                out.append(Linear(names["v"], self.hidden, self.kv_dim, L, self.attention_bias))
            out.append(Linear(names["o"], self.q_dim, self.hidden, L, self.o_bias))
        # dense MLPs
        nd = self.n_dense_mlp_layers
        if nd:
            out.extend(self._mlp(names, self.intermediate, nd, "mlp"))
        # MoE blocks
        nm = self.n_moe_layers
        if nm:
            out.append(Linear("gate", self.hidden, self.experts, nm, self.router_bias, "router"))
            en = EXPERT_NAMES[self.expert_naming]
            width = self.moe_intermediate or self.intermediate
            cnt = nm * self.experts
            out.append(Linear(en["gate"], self.hidden, width, cnt, self.mlp_bias, "expert"))
            out.append(Linear(en["up"], self.hidden, width, cnt, self.mlp_bias, "expert"))
            out.append(Linear(en["down"], width, self.hidden, cnt, self.mlp_bias, "expert"))
            if self.shared_expert_intermediate:
                sw = self.shared_expert_intermediate
                out.append(Linear("gate_proj", self.hidden, sw, nm, self.mlp_bias, "shared_expert"))
                out.append(Linear("up_proj", self.hidden, sw, nm, self.mlp_bias, "shared_expert"))
                out.append(Linear("down_proj", sw, self.hidden, nm, self.mlp_bias, "shared_expert"))
            if self.shared_expert_gate:
                out.append(Linear("shared_expert_gate", self.hidden, 1, nm, False, "router"))
        return out

    def _mlp(self, names: Mapping[str, str | None], width: int, count: int, kind: str) -> list[Linear]:
        out = []
        if names["gate_up"]:
            out.append(Linear(names["gate_up"], self.hidden, 2 * width, count, self.mlp_bias, kind))
        else:
            out.append(Linear(names["gate"], self.hidden, width, count, self.mlp_bias, kind))
            out.append(Linear(names["up"], self.hidden, width, count, self.mlp_bias, kind))
        out.append(Linear(names["down"], width, self.hidden, count, self.mlp_bias, kind))
        return out

    def linear_params(self) -> int:
        return sum(l.params for l in self.linear_layers())

    def param_count(self) -> int:
        """Total parameters, exact (tied weights counted once)."""
        return self.embedding_params() + self.lm_head_params() + self.norm_params() + self.linear_params()

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
        """Distinct HF module names a LoRA on all linear layers would target."""
        seen: list[str] = []
        for l in self.linear_layers():
            if l.kind != "router" and l.name not in seen:
                seen.append(l.name)
        return seen

    def replace(self, **changes: Any) -> "ModelShape":
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ config.json
    @classmethod
    def from_hf_config(cls, config: Mapping[str, Any], id: str | None = None) -> "ModelShape":
        """Build a shape from a pasted ``config.json`` (as a dict)."""
        return _from_hf_config(config, id)

    def to_hf_config(self) -> dict[str, Any]:
        """A ``config.json``-style dict in this model's own format (inverse of ``from_hf_config``)."""
        return _to_hf_config(self)


# ---------------------------------------------------------------------- config parsing
# transformers' Gemma3TextConfig defaults (checked against transformers 5.24).
_GEMMA3_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131072,
    "tie_word_embeddings": True,
}


def _req(cfg: Mapping[str, Any], *keys: str, where: str = "") -> Any:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    raise ShapeError(f"config.json{where} is missing {' / '.join(repr(k) for k in keys)}")


def _opt(cfg: Mapping[str, Any], key: str, default: Any) -> Any:
    v = cfg.get(key)
    return default if v is None else v


def _from_hf_config(config: Mapping[str, Any], id: str | None) -> ModelShape:
    if not isinstance(config, Mapping):
        raise ShapeError(f"config must be a dict (parsed config.json), got {type(config).__name__}")
    raw_type = config.get("model_type")
    if not raw_type:
        raise ShapeError("config.json has no 'model_type'; cannot tell the architecture")
    mt = str(raw_type)
    cfg: Mapping[str, Any] = config
    if mt == "gemma3":  # multimodal wrapper: text tower only
        if not isinstance(config.get("text_config"), Mapping):
            raise ShapeError("gemma3 config.json without a 'text_config' block")
        cfg = dict(config["text_config"])
        mt = "gemma3_text"
    if mt == "gemma3_text":
        # Gemma 3 config.json files leave out keys that equal Gemma3TextConfig's defaults
        # (e.g. vocab_size in gemma-3-27b-it's text_config); fill them in the same way.
        cfg = {**_GEMMA3_TEXT_DEFAULTS, **{k: v for k, v in cfg.items() if v is not None}}
    if mt.lower() == "yi":
        mt = "llama"
    if mt not in _TYPE_DEFAULTS:
        raise UnsupportedModelType(
            f"model_type {raw_type!r} is not supported; supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    layout, expert_naming, norms_per_layer, qk_norm, norm = _TYPE_DEFAULTS[mt]
    name = id or str(config.get("_name_or_path") or f"custom-{mt}")
    kw: dict[str, Any] = dict(
        id=name, model_type=mt, layout=layout, expert_naming=expert_naming,
        norms_per_layer=norms_per_layer, qk_norm=qk_norm, norm=norm,
    )

    if mt == "chatglm":
        hidden = int(_req(cfg, "hidden_size"))
        heads = int(_req(cfg, "num_attention_heads"))
        mq = bool(cfg.get("multi_query_attention", False))
        kv_heads = int(_req(cfg, "multi_query_group_num")) if mq else heads
        kw.update(
            layers=int(_req(cfg, "num_layers", "num_hidden_layers")), hidden=hidden, heads=heads,
            kv_heads=kv_heads, head_dim=int(_opt(cfg, "kv_channels", hidden // heads)),
            intermediate=int(_req(cfg, "ffn_hidden_size")),
            vocab=int(_req(cfg, "padded_vocab_size", "vocab_size")),
            tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            attention_bias=bool(cfg.get("add_qkv_bias", False)) or bool(cfg.get("add_bias_linear", False)),
            o_bias=bool(cfg.get("add_bias_linear", False)), mlp_bias=bool(cfg.get("add_bias_linear", False)),
            norm="rmsnorm" if cfg.get("rmsnorm", True) else "layernorm",
            max_position=int(_opt(cfg, "seq_length", 0)),
        )
        return ModelShape(**kw)

    hidden = int(_req(cfg, "hidden_size"))
    heads = int(_req(cfg, "num_attention_heads"))
    kv_heads = int(_opt(cfg, "num_key_value_heads", heads))
    head_dim = cfg.get("head_dim")
    kw.update(
        layers=int(_req(cfg, "num_hidden_layers")), hidden=hidden, heads=heads, kv_heads=kv_heads,
        head_dim=int(head_dim) if head_dim else hidden // heads,
        intermediate=int(_req(cfg, "intermediate_size")), vocab=int(_req(cfg, "vocab_size")),
        max_position=int(_opt(cfg, "max_position_embeddings", _opt(cfg, "model_max_length", 0))),
    )
    default_tied = mt in ("gemma", "gemma2", "gemma3_text")
    kw["tied_embeddings"] = bool(_opt(cfg, "tie_word_embeddings", default_tied))
    ab = bool(cfg.get("attention_bias", False))
    if mt in ("llama", "mistral", "mixtral"):
        kw.update(attention_bias=ab, o_bias=ab, mlp_bias=bool(cfg.get("mlp_bias", False)))
    elif mt in ("qwen2", "qwen2_moe"):
        kw.update(attention_bias=bool(_opt(cfg, "qkv_bias", True)))
    elif mt in ("qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text", "glm"):
        kw.update(attention_bias=bool(_opt(cfg, "attention_bias", mt == "glm")))
    elif mt == "phi3":
        kw.update(attention_bias=False)
    elif mt == "phimoe":
        kw.update(attention_bias=ab, o_bias=ab, lm_head_bias=bool(cfg.get("lm_head_bias", False)))
    elif mt == "internlm2":
        b = bool(cfg.get("bias", False))
        kw.update(attention_bias=b, o_bias=b)
    elif mt == "deepseek_v2":
        kw.update(attention_bias=ab, o_bias=ab, mlp_bias=bool(cfg.get("mlp_bias", False)))

    if mt in ("mixtral", "phimoe"):
        kw.update(experts=int(_req(cfg, "num_local_experts")),
                  experts_active=int(_req(cfg, "num_experts_per_tok")))
    elif mt in ("qwen2_moe", "qwen3_moe"):
        E = int(_req(cfg, "num_experts", "num_local_experts"))
        step = int(_opt(cfg, "decoder_sparse_step", 1))
        only = set(int(i) for i in (cfg.get("mlp_only_layers") or []))
        L = kw["layers"]
        dense = tuple(i for i in range(L) if i in only or not ((i + 1) % step == 0))
        kw.update(experts=E, experts_active=int(_req(cfg, "num_experts_per_tok")),
                  moe_intermediate=int(_req(cfg, "moe_intermediate_size")), dense_layers=dense)
        if mt == "qwen2_moe":
            sw = int(_opt(cfg, "shared_expert_intermediate_size", 0))
            kw.update(shared_expert_intermediate=sw, shared_expert_gate=sw > 0)
    elif mt == "deepseek_v2":
        nope = int(_req(cfg, "qk_nope_head_dim"))
        rope = int(_req(cfg, "qk_rope_head_dim"))
        E = int(_opt(cfg, "n_routed_experts", 0))
        kw.update(
            q_lora_rank=int(cfg.get("q_lora_rank") or 0), kv_lora_rank=int(_req(cfg, "kv_lora_rank")),
            qk_nope_head_dim=nope, qk_rope_head_dim=rope, v_head_dim=int(_req(cfg, "v_head_dim")),
            head_dim=nope + rope,
        )
        if E:
            k = int(_opt(cfg, "first_k_dense_replace", 0))
            freq = int(_opt(cfg, "moe_layer_freq", 1))
            if freq != 1:
                raise ShapeError("deepseek_v2 with moe_layer_freq != 1 is not supported")
            n_shared = int(_opt(cfg, "n_shared_experts", 0))
            mi = int(_req(cfg, "moe_intermediate_size"))
            kw.update(experts=E, experts_active=int(_req(cfg, "num_experts_per_tok")), moe_intermediate=mi,
                      shared_expert_intermediate=mi * n_shared, dense_layers=tuple(range(k)))
    return ModelShape(**kw)


def _to_hf_config(s: ModelShape) -> dict[str, Any]:
    mt = s.model_type
    if mt == "chatglm":
        return {
            "model_type": "chatglm", "num_layers": s.layers, "hidden_size": s.hidden,
            "num_attention_heads": s.heads, "multi_query_attention": s.kv_heads != s.heads,
            "multi_query_group_num": s.kv_heads, "kv_channels": s.head_dim,
            "ffn_hidden_size": s.intermediate, "padded_vocab_size": s.vocab,
            "add_qkv_bias": s.attention_bias, "add_bias_linear": s.o_bias or s.mlp_bias,
            "rmsnorm": s.norm == "rmsnorm", "seq_length": s.max_position,
            "tie_word_embeddings": s.tied_embeddings,
        }
    d: dict[str, Any] = {
        "model_type": mt, "num_hidden_layers": s.layers, "hidden_size": s.hidden,
        "num_attention_heads": s.heads, "num_key_value_heads": s.kv_heads,
        "intermediate_size": s.intermediate, "vocab_size": s.vocab,
        "tie_word_embeddings": s.tied_embeddings, "max_position_embeddings": s.max_position,
    }
    if mt == "baichuan":
        d.pop("num_key_value_heads")
    always_head_dim = ("qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text", "glm")
    if mt != "deepseek_v2" and (s.head_dim != s.hidden // s.heads or mt in always_head_dim):
        d["head_dim"] = s.head_dim
    if mt in ("llama", "mistral", "mixtral"):
        d["attention_bias"] = s.attention_bias
        d["mlp_bias"] = s.mlp_bias
    elif mt in ("qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text", "glm", "phimoe", "deepseek_v2"):
        d["attention_bias"] = s.attention_bias
    elif mt == "internlm2":
        d["bias"] = s.attention_bias
    if mt == "phimoe":
        d["lm_head_bias"] = s.lm_head_bias
    if mt in ("mixtral", "phimoe"):
        d["num_local_experts"] = s.experts
        d["num_experts_per_tok"] = s.experts_active
    elif mt in ("qwen2_moe", "qwen3_moe"):
        d.update(num_experts=s.experts, num_experts_per_tok=s.experts_active,
                 moe_intermediate_size=s.moe_intermediate, decoder_sparse_step=1,
                 mlp_only_layers=list(s.dense_layers))
        if mt == "qwen2_moe":
            d["shared_expert_intermediate_size"] = s.shared_expert_intermediate
    elif mt == "deepseek_v2":
        d.update(q_lora_rank=s.q_lora_rank or None, kv_lora_rank=s.kv_lora_rank,
                 qk_nope_head_dim=s.qk_nope_head_dim, qk_rope_head_dim=s.qk_rope_head_dim,
                 v_head_dim=s.v_head_dim, mlp_bias=s.mlp_bias)
        if s.experts:
            n_shared = s.shared_expert_intermediate // s.moe_intermediate if s.moe_intermediate else 0
            d.update(n_routed_experts=s.experts, num_experts_per_tok=s.experts_active,
                     moe_intermediate_size=s.moe_intermediate, n_shared_experts=n_shared,
                     first_k_dense_replace=len(s.dense_layers), moe_layer_freq=1)
    return d


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

