"""Gemma 3n's language model, read from its ``config.json`` the way transformers 5.24 builds it.

``Gemma3nTextModel`` is a Gemma decoder with three additions, each with parameters of its own:

* AltUp: the hidden state travels as ``altup_num_inputs`` streams; per layer a router (hidden -> streams) with its
  RMSNorm, prediction and correction coefficients (streams -> streams² and streams -> streams) and an output scale;
  outside the layers one projection in and one out per extra stream (hidden × hidden each);
* LAuReL: a low-rank residual per layer (hidden -> ``laurel_rank`` -> hidden) with its RMSNorm;
* per-layer embeddings: a second table of ``vocab_size_per_layer_input`` rows of ``layers × P`` values
  (``P = hidden_size_per_layer_input``), a projection of the main embedding to the same width and its RMSNorm, and
  per layer a gate (hidden -> P), a projection back (P -> hidden) and an RMSNorm.

The last ``num_kv_shared_layers`` layers reuse the keys and values of an earlier layer: they have no k_proj, v_proj
or k_norm.  v_norm has no weight.  The vision tower (MobileNetV5, built by timm) and the audio encoder of a
``gemma3n`` config are not modelled: the shape says so (``towers_not_counted``).
"""
from __future__ import annotations

from typing import Any, Mapping

from .shape import Linear, ModelShape, ShapeError, _TYPE_DEFAULTS

# Gemma3nTextConfig's defaults (transformers 5.24; its docstring names google/gemma-3n-E4B).
GEMMA3N_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262_400, "hidden_size": 2048, "intermediate_size": 16_384, "num_hidden_layers": 35,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256, "max_position_embeddings": 32_768,
    "tie_word_embeddings": True, "attention_bias": False, "vocab_size_per_layer_input": 262_144,
    "hidden_size_per_layer_input": 256, "altup_num_inputs": 4, "num_kv_shared_layers": 15, "laurel_rank": 64,
}

# The towers a gemma3n config.json describes beside the language model.
TOWER_BLOCKS = (("vision_config", "vision"), ("audio_config", "audio"))


def _int(cfg: Mapping[str, Any], key: str) -> int:
    v = cfg[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < 0:
        raise ShapeError(f"text_config: {key!r} must be a whole number, got {str(v)[:40]!r}")
    return int(v)


def _intermediate(cfg: Mapping[str, Any], layers: int) -> int:
    """One width for every layer; a list (as config.json files write it) must hold one value, or the same for all."""
    v = cfg["intermediate_size"]
    if isinstance(v, (list, tuple)):
        widths = {_int({"intermediate_size": w}, "intermediate_size") for w in v}
        if len(v) not in (1, layers) or len(widths) != 1:
            raise ShapeError("gemma3n with a different intermediate_size per layer is not supported")
        return widths.pop()
    return _int(cfg, "intermediate_size")


def _sparse_layers(pattern: Any, layers: int) -> int:
    """How many leading layers keep a top-k of the gate (Gemma3nTextConfig: the first 10 when there are more than
    10 layers, unless the config lists a sparsity per layer)."""
    if pattern is None:
        return 10 if layers > 10 else 0
    if not isinstance(pattern, (list, tuple)) or len(pattern) != layers:
        raise ShapeError("text_config: 'activation_sparsity_pattern' must give one value per layer")
    sparse = [bool(v) for v in pattern]
    n = sum(sparse)
    if sparse != [True] * n + [False] * (layers - n):
        raise ShapeError("gemma3n with sparse feed-forwards other than the first layers is not supported")
    return n


def read_gemma3n(config: Mapping[str, Any], id: str | None) -> ModelShape:
    """A ``gemma3n`` config (language model in ``text_config``) or a ``gemma3n_text`` one."""
    if config.get("model_type") == "gemma3n":
        text = config.get("text_config")
        if not isinstance(text, Mapping):
            raise ShapeError("gemma3n config.json has no 'text_config' block")
        towers = tuple(name for key, name in TOWER_BLOCKS if isinstance(config.get(key), Mapping))
    else:
        text, towers = config, ()
    cfg = {**GEMMA3N_TEXT_DEFAULTS, **{k: v for k, v in text.items() if v is not None}}
    if "tie_word_embeddings" in config and "tie_word_embeddings" not in text:
        cfg["tie_word_embeddings"] = config["tie_word_embeddings"]
    L, H = _int(cfg, "num_hidden_layers"), _int(cfg, "hidden_size")
    heads, head_dim = _int(cfg, "num_attention_heads"), _int(cfg, "head_dim")
    A, r, P = _int(cfg, "altup_num_inputs"), _int(cfg, "laurel_rank"), _int(cfg, "hidden_size_per_layer_input")
    shared = _int(cfg, "num_kv_shared_layers")
    if not 0 <= shared < L:
        raise ShapeError(f"text_config: 'num_kv_shared_layers' must lie in 0..{L - 1}")
    if A < 1:
        raise ShapeError("text_config: 'altup_num_inputs' must be at least 1")
    layout, naming, norms, qk_norm, norm = _TYPE_DEFAULTS["gemma3n_text"]
    extra = (
        # per layer: AltUp's coefficients and router, LAuReL, the per-layer input gate and projection
        # named as peft matches a target, by the module name's last part
        Linear("correction_coefs", A, A, L, False, "mlp"),
        Linear("prediction_coefs", A, A * A, L, False, "mlp"),
        Linear("modality_router", H, A, L, False, "mlp"),
        Linear("linear_left", H, r, L, False, "mlp"),
        Linear("linear_right", r, H, L, False, "mlp"),
        Linear("per_layer_input_gate", H, P, L, False, "mlp"),
        Linear("per_layer_projection", P, H, L, False, "mlp"),
        # outside the layers: the main embedding projected to the per-layer inputs; AltUp's streams in and out
        Linear("per_layer_model_projection", H, L * P, 1, False, "mlp"),
        Linear("altup_projections", H, H, A - 1, False, "mlp"),
        Linear("altup_unembed_projections", H, H, A - 1, False, "mlp"),
    )
    extra = tuple(l for l in extra if l.count)
    ab = bool(cfg["attention_bias"])
    kw: dict[str, Any] = dict(
        id=id or str(config.get("_name_or_path") or "custom-gemma3n"), model_type="gemma3n_text", layout=layout,
        expert_naming=naming, norms_per_layer=norms, qk_norm=qk_norm, norm=norm,
        layers=L, hidden=H, heads=heads, kv_heads=_int(cfg, "num_key_value_heads"), head_dim=head_dim,
        intermediate=_intermediate(cfg, L), vocab=_int(cfg, "vocab_size"),
        max_position=_int(cfg, "max_position_embeddings"), tied_embeddings=bool(cfg["tie_word_embeddings"]),
        attention_bias=ab, o_bias=ab, kv_shared_layers=shared, extra_linears=extra,
        extra_params=(
            _int(cfg, "vocab_size_per_layer_input") * L * P     # embed_tokens_per_layer
            + P                                                  # per_layer_projection_norm
            # per layer: AltUp's output scale and router norm, LAuReL's norm, the per-layer input's norm
            + L * 4 * H
        ),
        towers_not_counted=towers, altup_streams=A, laurel_rank=r, per_layer_input=P,
        sparse_mlp_layers=_sparse_layers(cfg.get("activation_sparsity_pattern"), L),
    )
    return ModelShape(**kw)
