"""Read a model's ``config.json`` into a :class:`ModelShape`, the way transformers builds the model.

One reader per ``model_type``.  Each takes the keys transformers' configuration
class reads, with that class's defaults for keys a ``config.json`` leaves out
(transformers 5.24), and records the layout facts the parameter count depends
on.  Multimodal configs (LLaVA, Mllama, Qwen2/2.5/3-VL, Gemma 3, Mistral 3,
Llama 4) are read as their language model plus a vision tower
(``oomdoctor.catalog.vision``).  ``bench/accuracy/param_counts.py`` builds every
catalog config with transformers on the meta device and compares the counts.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from .shape import (
    EXPERT_NAMES, LAYOUTS, ModelShape, ShapeError, UnsupportedModelType, _TYPE_DEFAULTS, Linear,
    PLAIN_MLP_TYPES,
)

__all__ = ["from_hf_config", "to_hf_config", "READERS", "ALIASES", "MULTIMODAL_TYPES", "supported_types"]

# model_type spellings that transformers (or the model's own remote code) maps onto one of ours.
ALIASES = {
    "yi": "llama", "Yi": "llama", "kimi_k2": "deepseek_v3", "RefinedWeb": "falcon", "RefinedWebModel": "falcon",
    "mistral3_text": "mistral", "qwen2_5_vl_text": "qwen2", "qwen2_vl_text": "qwen2", "qwen3_vl_text": "qwen3",
    "qwen3_vl_moe_text": "qwen3_moe", "mllama_text_model": "mllama_text",
    # OLMo 3 is OLMo 2 with sliding-window attention in some layers: the same parameters
    "olmo3": "olmo2",
}

# transformers' Gemma3TextConfig defaults (checked against transformers 5.24).
_GEMMA3_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131072,
    "tie_word_embeddings": True,
}


# transformers' LlamaConfig defaults (transformers 5.24), for composite configs that lean on them.
_LLAMA_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "max_position_embeddings": 2048,
}

# transformers' MistralConfig defaults (transformers 5.24): LLaVA-NeXT's config.json keeps only the text keys that
# differ from them (llava-v1.6-mistral-7b-hf's text_config has no hidden_size or layer count).
_MISTRAL_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
}


def _req(cfg: Mapping[str, Any], *keys: str, where: str = "") -> Any:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    raise ShapeError(f"config.json{where} is missing {' / '.join(repr(k) for k in keys)}")


def _opt(cfg: Mapping[str, Any], key: str, default: Any) -> Any:
    v = cfg.get(key)
    return default if v is None else v


def _int(cfg: Mapping[str, Any], *keys: str, default: int | None = None) -> int:
    for k in keys:
        v = cfg.get(k)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v):
                raise ShapeError(f"config.json: {k!r} must be a whole number, got {str(v)[:40]!r}")
            return int(v)
    if default is None:
        raise ShapeError(f"config.json is missing {' / '.join(repr(k) for k in keys)}")
    return default


def _bool(cfg: Mapping[str, Any], key: str, default: bool) -> bool:
    v = cfg.get(key)
    return default if v is None else bool(v)


Reader = Callable[[Mapping[str, Any], dict[str, Any]], None]


def _base(cfg: Mapping[str, Any], kw: dict[str, Any], tied: bool = False) -> None:
    """The keys every Llama-style config has."""
    hidden = _int(cfg, "hidden_size")
    heads = _int(cfg, "num_attention_heads")
    head_dim = cfg.get("head_dim")
    kw.update(
        layers=_int(cfg, "num_hidden_layers"), hidden=hidden, heads=heads,
        kv_heads=_int(cfg, "num_key_value_heads", default=heads),
        head_dim=int(head_dim) if head_dim else hidden // heads,
        intermediate=_int(cfg, "intermediate_size"), vocab=_int(cfg, "vocab_size"),
        max_position=_int(cfg, "max_position_embeddings", "model_max_length", default=0),
        tied_embeddings=_bool(cfg, "tie_word_embeddings", tied),
    )


def _llama(cfg, kw):
    _base(cfg, kw, tied=kw["model_type"] == "smollm3")
    ab = _bool(cfg, "attention_bias", False)
    kw.update(attention_bias=ab, o_bias=ab, mlp_bias=_bool(cfg, "mlp_bias", False))


def _mixtral(cfg, kw):
    _llama(cfg, kw)
    kw.update(experts=_int(cfg, "num_local_experts"), experts_active=_int(cfg, "num_experts_per_tok"))


def _qwen2(cfg, kw):
    _base(cfg, kw)
    kw.update(attention_bias=_bool(cfg, "qkv_bias", True))


def _qwen3(cfg, kw):
    _base(cfg, kw)
    kw.update(attention_bias=_bool(cfg, "attention_bias", False))


def _sparse_layers(cfg, kw) -> tuple[int, ...]:
    step = _int(cfg, "decoder_sparse_step", default=1)
    only = set(int(i) for i in (cfg.get("mlp_only_layers") or []))
    return tuple(i for i in range(kw["layers"]) if i in only or step <= 0 or (i + 1) % step != 0)


def _qwen_moe(cfg, kw):
    (_qwen2 if kw["model_type"] == "qwen2_moe" else _qwen3)(cfg, kw)
    kw.update(experts=_int(cfg, "num_experts", "num_local_experts"),
              experts_active=_int(cfg, "num_experts_per_tok"),
              moe_intermediate=_int(cfg, "moe_intermediate_size"), dense_layers=_sparse_layers(cfg, kw))
    if kw["model_type"] == "qwen2_moe":
        sw = _int(cfg, "shared_expert_intermediate_size", default=0)
        kw.update(shared_expert_intermediate=sw, shared_expert_gate=sw > 0)


def _gemma(cfg, kw):
    _base(cfg, kw, tied=True)
    kw.update(attention_bias=_bool(cfg, "attention_bias", False))


def _phi3(cfg, kw):
    _base(cfg, kw)


def _phimoe(cfg, kw):
    _base(cfg, kw)
    ab = _bool(cfg, "attention_bias", False)
    kw.update(attention_bias=ab, o_bias=ab, lm_head_bias=_bool(cfg, "lm_head_bias", False),
              experts=_int(cfg, "num_local_experts"), experts_active=_int(cfg, "num_experts_per_tok"),
              router_name="router")


def _internlm2(cfg, kw):
    _base(cfg, kw)
    b = _bool(cfg, "bias", False)
    kw.update(attention_bias=b, o_bias=b)


def _glm(cfg, kw):
    _base(cfg, kw)
    kw.update(attention_bias=_bool(cfg, "attention_bias", True))


def _glm4_moe(cfg, kw):
    _base(cfg, kw)
    kw.update(attention_bias=_bool(cfg, "attention_bias", False), qk_norm=_bool(cfg, "use_qk_norm", False))
    _deepseek_moe(cfg, kw)


def _deepseek_moe(cfg, kw):
    E = _int(cfg, "n_routed_experts", default=0)
    if not E:
        return
    freq = cfg.get("moe_layer_freq", 1)
    if freq != 1:
        raise ShapeError(f"{kw['model_type']} with moe_layer_freq != 1 is not supported")
    k = _int(cfg, "first_k_dense_replace", default=0)
    mi = _int(cfg, "moe_intermediate_size")
    kw.update(experts=E, experts_active=_int(cfg, "num_experts_per_tok"), moe_intermediate=mi,
              shared_expert_intermediate=mi * _int(cfg, "n_shared_experts", default=0),
              dense_layers=tuple(range(min(k, kw["layers"]))))


def _deepseek(cfg, kw):
    _base(cfg, kw)
    ab = _bool(cfg, "attention_bias", False)
    nope, rope = _int(cfg, "qk_nope_head_dim"), _int(cfg, "qk_rope_head_dim")
    kw.update(
        attention_bias=ab, o_bias=ab, mlp_bias=_bool(cfg, "mlp_bias", False),
        # a config that leaves q_lora_rank out gets DeepseekV2Config's/V3Config's 1536; null means none
        q_lora_rank=(_int(cfg, "q_lora_rank") if cfg.get("q_lora_rank") is not None
                     else 0 if "q_lora_rank" in cfg else 1536),
        kv_lora_rank=_int(cfg, "kv_lora_rank"),
        qk_nope_head_dim=nope, qk_rope_head_dim=rope, v_head_dim=_int(cfg, "v_head_dim"), head_dim=nope + rope,
    )
    _deepseek_moe(cfg, kw)


def _gpt_oss(cfg, kw):
    _base(cfg, kw)
    ab = _bool(cfg, "attention_bias", True)
    L, heads = kw["layers"], kw["heads"]
    quant = cfg.get("quantization_config") or {}
    kw.update(
        attention_bias=ab, o_bias=ab, experts=_int(cfg, "num_local_experts"),
        experts_active=_int(cfg, "num_experts_per_tok", "experts_per_token"),
        router_name="router", router_bias=True, expert_bias=True,
        extra_params=L * heads,      # one learned attention sink per head and layer
        checkpoint_format="mxfp4" if isinstance(quant, Mapping) and quant.get("quant_method") == "mxfp4" else "",
    )


def _llama4(cfg, kw):
    _base(cfg, kw)
    ab = _bool(cfg, "attention_bias", False)
    step = _int(cfg, "interleave_moe_layer_step", default=1)
    moe_layers = cfg.get("moe_layers")
    L = kw["layers"]
    moe = set(moe_layers) if moe_layers is not None else {i for i in range(L) if step and (i + 1) % step == 0}
    E = _int(cfg, "num_local_experts", default=0)
    inter = kw["intermediate"]
    kw.update(attention_bias=ab, o_bias=ab, intermediate=_int(cfg, "intermediate_size_mlp", default=inter),
              router_name="router")
    if E and moe:
        kw.update(experts=E, experts_active=_int(cfg, "num_experts_per_tok", default=1), moe_intermediate=inter,
                  shared_expert_intermediate=inter, dense_layers=tuple(i for i in range(L) if i not in moe))


def _olmo2(cfg, kw):
    _base(cfg, kw)
    ab = _bool(cfg, "attention_bias", False)
    kw.update(attention_bias=ab, o_bias=ab, qk_norm=True, qk_norm_full=True)


def _internlm(cfg, kw):
    """InternLM (1), remote code: a Llama layout whose q, k, v and o projections carry a bias when ``bias``."""
    _base(cfg, kw)
    b = _bool(cfg, "bias", True)
    kw.update(attention_bias=b, o_bias=b)


def _qwen_v1(cfg, kw):
    """Qwen (1), remote code (QWenLMHeadModel): ``intermediate_size`` is twice the width of w1 and w2."""
    hidden = _int(cfg, "hidden_size")
    heads = _int(cfg, "num_attention_heads")
    bias = not _bool(cfg, "no_bias", True)
    kw.update(
        layers=_int(cfg, "num_hidden_layers"), hidden=hidden, heads=heads, kv_heads=heads,
        head_dim=_int(cfg, "kv_channels", default=hidden // heads), intermediate=_int(cfg, "intermediate_size") // 2,
        vocab=_int(cfg, "vocab_size"), tied_embeddings=_bool(cfg, "tie_word_embeddings", False),
        attention_bias=True, o_bias=bias, mlp_bias=bias, max_position=_int(cfg, "max_position_embeddings", default=0),
    )


def _stablelm(cfg, kw):
    _base(cfg, kw)
    if _bool(cfg, "qk_layernorm", False) or _bool(cfg, "use_parallel_residual", False):
        raise ShapeError("stablelm with qk_layernorm or use_parallel_residual (StableLM 2 12B) is not supported")
    kw.update(attention_bias=_bool(cfg, "use_qkv_bias", False))


def _cohere(cfg, kw):
    _base(cfg, kw, tied=True)
    qk = _bool(cfg, "use_qk_norm", False)      # weights of (heads, head_dim) for q and (kv_heads, head_dim) for k
    kw.update(attention_bias=_bool(cfg, "attention_bias", False), o_bias=_bool(cfg, "attention_bias", False),
              qk_norm=qk, qk_norm_full=qk)


def _starcoder2(cfg, kw):
    _base(cfg, kw, tied=True)
    b = _bool(cfg, "use_bias", True)
    kw.update(attention_bias=b, o_bias=b, mlp_bias=b)


def _gptj(cfg, kw):
    _gpt_base(cfg, kw, tied=False)
    kw.update(mlp_bias=True, lm_head_bias=True,
              max_position=_int(cfg, "n_positions", "max_position_embeddings", default=0))


def _gpt_bigcode(cfg, kw):
    _gpt2(cfg, kw)
    if _bool(cfg, "multi_query", True):
        kw.update(kv_heads=1)      # one key/value head: c_attn is hidden + 2 * head_dim wide


def _chatglm(cfg, kw):
    hidden = _int(cfg, "hidden_size")
    heads = _int(cfg, "num_attention_heads")
    mq = _bool(cfg, "multi_query_attention", False)
    kv_heads = _int(cfg, "multi_query_group_num") if mq else heads
    bias_linear = _bool(cfg, "add_bias_linear", False)
    kw.update(
        layers=_int(cfg, "num_layers", "num_hidden_layers"), hidden=hidden, heads=heads, kv_heads=kv_heads,
        head_dim=_int(cfg, "kv_channels", default=hidden // heads), intermediate=_int(cfg, "ffn_hidden_size"),
        vocab=_int(cfg, "padded_vocab_size", "vocab_size"), tied_embeddings=_bool(cfg, "tie_word_embeddings", False),
        attention_bias=_bool(cfg, "add_qkv_bias", False) or bias_linear, o_bias=bias_linear, mlp_bias=bias_linear,
        norm="rmsnorm" if _bool(cfg, "rmsnorm", True) else "layernorm", max_position=_int(cfg, "seq_length", default=0),
    )


def _gpt_base(cfg, kw, tied: bool) -> None:
    """The keys of GPT-2-style configs (n_embd, n_head, n_layer, n_inner), shared by GPT-2, GPTBigCode and GPT-J."""
    hidden = _int(cfg, "n_embd", "hidden_size")
    heads = _int(cfg, "n_head", "num_attention_heads")
    kw.update(
        layers=_int(cfg, "n_layer", "num_hidden_layers"), hidden=hidden, heads=heads, kv_heads=heads,
        head_dim=hidden // heads, intermediate=_int(cfg, "n_inner", default=4 * hidden), vocab=_int(cfg, "vocab_size"),
        tied_embeddings=_bool(cfg, "tie_word_embeddings", tied),
    )


def _gpt2(cfg, kw):
    _gpt_base(cfg, kw, tied=True)
    positions = _int(cfg, "n_positions", "max_position_embeddings")
    kw.update(attention_bias=True, o_bias=True, mlp_bias=True, pos_embeddings=positions, max_position=positions,
              mlp_gated=False)


def _gpt_neox(cfg, kw):
    _base(cfg, kw)
    ab = _bool(cfg, "attention_bias", True)
    # no grouped-query attention in GPT-NeoX: the fused projection is 3 × hidden
    kw.update(attention_bias=ab, o_bias=ab, mlp_bias=True, mlp_gated=False, kv_heads=kw["heads"])


def _bloom(cfg, kw):
    hidden = _int(cfg, "hidden_size", "n_embed")
    heads = _int(cfg, "n_head", "num_attention_heads")
    kw.update(
        layers=_int(cfg, "n_layer", "num_hidden_layers"), hidden=hidden, heads=heads, kv_heads=heads,
        head_dim=hidden // heads, intermediate=4 * hidden, vocab=_int(cfg, "vocab_size"),
        tied_embeddings=_bool(cfg, "tie_word_embeddings", True), attention_bias=True, o_bias=True, mlp_bias=True,
        embed_norm=True, mlp_gated=False, max_position=_int(cfg, "seq_length", default=0),
    )


def _falcon(cfg, kw):
    hidden = _int(cfg, "hidden_size", "n_embed")
    heads = _int(cfg, "num_attention_heads", "n_head")
    new_arch = _bool(cfg, "new_decoder_architecture", False)
    if new_arch:
        kv_heads = _int(cfg, "num_kv_heads", "n_head_kv", default=heads)
    elif _bool(cfg, "multi_query", True):
        kv_heads = 1
    else:
        kv_heads = heads
    if new_arch:
        norms = _int(cfg, "num_ln_in_parallel_attn", default=2)
    else:
        norms = 1 if _bool(cfg, "parallel_attn", True) else 2
    bias = _bool(cfg, "bias", False)
    kw.update(
        layers=_int(cfg, "num_hidden_layers", "n_layer"), hidden=hidden, heads=heads, kv_heads=kv_heads,
        head_dim=hidden // heads, intermediate=_int(cfg, "ffn_hidden_size", default=4 * hidden),
        vocab=_int(cfg, "vocab_size"), tied_embeddings=_bool(cfg, "tie_word_embeddings", True),
        attention_bias=bias, o_bias=bias, mlp_bias=bias, norms_per_layer=norms, mlp_gated=False,
        max_position=_int(cfg, "max_position_embeddings", default=0),
    )


def _opt_model(cfg, kw):
    hidden = _int(cfg, "hidden_size")
    heads = _int(cfg, "num_attention_heads")
    bias = _bool(cfg, "enable_bias", True)
    proj = _int(cfg, "word_embed_proj_dim", default=hidden)
    max_pos = _int(cfg, "max_position_embeddings", default=2048)
    final_norm = _bool(cfg, "do_layer_norm_before", True) and not _bool(cfg, "_remove_final_layer_norm", False)
    vocab = _int(cfg, "vocab_size")
    extra = []
    if proj != hidden:
        # OPT-350m: embeddings of width word_embed_proj_dim, projected in and out of the layers
        extra = [Linear("project_in", proj, hidden, 1, False, "mlp"), Linear("project_out", hidden, proj, 1, False, "mlp")]
    kw.update(
        layers=_int(cfg, "num_hidden_layers"), hidden=hidden, heads=heads, kv_heads=heads, head_dim=hidden // heads,
        intermediate=_int(cfg, "ffn_dim"), vocab=vocab, tied_embeddings=_bool(cfg, "tie_word_embeddings", True),
        attention_bias=bias, o_bias=bias, mlp_bias=bias, mlp_gated=False, max_position=max_pos,
        # learned positions have an offset of 2 rows (OPTLearnedPositionalEmbedding)
        pos_embeddings=max_pos + 2, extra_linears=tuple(extra), embed_dim=proj if proj != hidden else 0,
        final_norm=final_norm,
    )


def _t5(cfg, kw):
    d_model = _int(cfg, "d_model")
    heads = _int(cfg, "num_heads")
    d_kv = _int(cfg, "d_kv", default=d_model // heads)
    enc = _int(cfg, "num_layers")
    dec = _int(cfg, "num_decoder_layers", default=enc)
    ff = str(_opt(cfg, "feed_forward_proj", "relu"))
    buckets = _int(cfg, "relative_attention_num_buckets", default=32)
    kw.update(
        layers=dec, encoder_layers=enc, hidden=d_model, heads=heads, kv_heads=heads, head_dim=d_kv,
        intermediate=_int(cfg, "d_ff"), vocab=_int(cfg, "vocab_size"),
        # transformers 5 ties T5's lm_head to the shared embedding whatever the config says (T5Config
        # forces tie_word_embeddings = True; False only turns off the decoder output scaling)
        tied_embeddings=True, mlp_gated=ff.startswith("gated-"),
        extra_params=2 * buckets * heads,     # relative position bias in the first encoder and decoder layer
        max_position=_int(cfg, "n_positions", default=512),
        dropout=float(_opt(cfg, "dropout_rate", 0.1)),
    )


READERS: dict[str, Reader] = {
    "llama": _llama, "mistral": _llama, "smollm3": _llama, "mixtral": _mixtral,
    "qwen2": _qwen2, "qwen3": _qwen3, "qwen2_moe": _qwen_moe, "qwen3_moe": _qwen_moe,
    "gemma": _gemma, "gemma2": _gemma, "gemma3_text": _gemma,
    "phi3": _phi3, "phimoe": _phimoe, "internlm2": _internlm2, "baichuan": _base,
    "glm": _glm, "glm4": _glm, "glm4_moe": _glm4_moe, "chatglm": _chatglm, "internlm": _internlm, "qwen": _qwen_v1,
    "stablelm": _stablelm, "cohere": _cohere, "starcoder2": _starcoder2, "gptj": _gptj, "gpt_bigcode": _gpt_bigcode,
    "deepseek_v2": _deepseek, "deepseek_v3": _deepseek, "gpt_oss": _gpt_oss, "llama4_text": _llama4,
    "olmo2": _olmo2, "gpt2": _gpt2, "gpt_neox": _gpt_neox, "bloom": _bloom, "falcon": _falcon, "opt": _opt_model,
    "t5": _t5,
}

# Multimodal wrappers: the language model's config and the vision tower's (read by ``vision``).
MULTIMODAL_TYPES = ("llava", "llava_next", "mllama", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "gemma3",
                    "mistral3", "llama4", "internvl", "internvl_chat")


# Gemma 3n (AltUp, LAuReL, per-layer embeddings; its towers are not modelled): read by ``gemma3n``.
GEMMA3N_TYPES = ("gemma3n", "gemma3n_text")

# Blocks of a config.json that describe a tower beside the language model.
TOWER_KEYS = ("vision_config", "audio_config", "speech_config", "visual")


def supported_types() -> tuple[str, ...]:
    return tuple(sorted(set(READERS) | set(ALIASES) | set(MULTIMODAL_TYPES) | set(GEMMA3N_TYPES) | {"mt5"}))


def _language_config(config: Mapping[str, Any], mt: str) -> tuple[Mapping[str, Any], str]:
    """The language model's config inside a multimodal one, and its model_type."""
    # InternVL's remote-code checkpoints call the language model's block llm_config
    text = config.get("llm_config") if mt == "internvl_chat" else config.get("text_config")
    if mt in ("qwen2_vl", "qwen2_5_vl") and not isinstance(text, Mapping):
        # Qwen2-VL and Qwen2.5-VL configs keep the language model's keys at the top level
        return config, "qwen2"
    if not isinstance(text, Mapping):
        if mt == "gemma3":
            raise ShapeError("gemma3 config.json without a 'text_config' block")
        raise ShapeError(f"{mt} config.json has no '{'llm_config' if mt == 'internvl_chat' else 'text_config'}' block")
    defaults = {"llava": "llama", "llava_next": "llama", "mllama": "mllama_text", "gemma3": "gemma3_text", "mistral3": "mistral",
                "qwen3_vl": "qwen3", "qwen3_vl_moe": "qwen3_moe", "llama4": "llama4_text",
                "qwen2_vl": "qwen2", "qwen2_5_vl": "qwen2", "internvl": "qwen2", "internvl_chat": "qwen2"}
    inner = str(text.get("model_type") or defaults[mt])
    merged = dict(text)
    if mt in ("llava", "llava_next") and inner in ("llama", "mistral"):
        # LLaVA-1.5 and LLaVA-NeXT configs give only what differs from LlamaConfig's (MistralConfig's) defaults
        base = _LLAMA_DEFAULTS if inner == "llama" else _MISTRAL_DEFAULTS
        merged = {**base, **{k: v for k, v in text.items() if v is not None}}
    if "tie_word_embeddings" in config and "tie_word_embeddings" not in text:
        merged["tie_word_embeddings"] = config["tie_word_embeddings"]
    return merged, inner


def from_hf_config(config: Mapping[str, Any], id: str | None = None) -> ModelShape:
    if not isinstance(config, Mapping):
        raise ShapeError(f"config must be a dict (parsed config.json), got {type(config).__name__}")
    raw_type = config.get("model_type")
    if not raw_type or not isinstance(raw_type, str):
        raise ShapeError("config.json has no 'model_type'; cannot tell the architecture")
    mt = ALIASES.get(raw_type, raw_type)
    if mt in GEMMA3N_TYPES:
        from .gemma3n import read_gemma3n
        return read_gemma3n(config, id)
    cfg: Mapping[str, Any] = config
    tower = None
    text_only = False
    if mt in MULTIMODAL_TYPES:
        from .vision import read_tower
        cfg, inner = _language_config(config, mt)
        tower = read_tower(config, mt, cfg)
        text_only = tower is None
        mt = ALIASES.get(inner, inner)
        if mt == "mllama_text":
            from .vision import read_mllama_text
            return read_mllama_text(config, cfg, tower, id)
    elif mt == "mt5":
        mt = "t5"
    else:
        # A language reader would count only the language model of a model that also carries a vision or
        # audio tower (GLM-4V is model_type chatglm with a vision_config): a figure wrong by the tower.
        extra = next((key for key in TOWER_KEYS if isinstance(config.get(key), Mapping)), None)
        if extra:
            raise UnsupportedModelType(f"model_type {raw_type!r} with a {extra!r} block: that tower is not modelled, "
                                       f"only the multimodal types {', '.join(MULTIMODAL_TYPES)} are")
    if mt == "gemma3_text":
        # Gemma 3 config.json files leave out keys that equal Gemma3TextConfig's defaults
        # (e.g. vocab_size in gemma-3-27b-it's text_config); fill them in the same way.
        cfg = {**_GEMMA3_TEXT_DEFAULTS, **{k: v for k, v in cfg.items() if v is not None}}
    if mt not in READERS:
        raise UnsupportedModelType(
            f"model_type {raw_type!r} is not supported; supported: {', '.join(supported_types())}")
    layout, naming, norms_per_layer, qk_norm, norm = _TYPE_DEFAULTS[mt]
    name = id or str(config.get("_name_or_path") or f"custom-{mt}")
    kw: dict[str, Any] = dict(
        id=name, model_type=mt, layout=layout, expert_naming=naming, norms_per_layer=norms_per_layer,
        qk_norm=qk_norm, norm=norm, mlp_gated=mt not in PLAIN_MLP_TYPES,
    )
    READERS[mt](cfg, kw)
    if kw.get("experts") and _bool(cfg, "output_router_logits", False):
        kw["output_router_logits"] = True
    if tower is not None:
        kw["vision"] = tower
    if text_only and raw_type in MULTIMODAL_TYPES:
        kw["text_only"] = True
    try:
        return ModelShape(**kw)
    except TypeError as exc:        # a reader handed over a value of the wrong kind
        raise ShapeError(f"config.json could not be read: {exc}") from None


def to_hf_config(s: ModelShape) -> dict[str, Any]:
    """A ``config.json``-style dict for the Llama-family shapes the older catalog typed by hand."""
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
    if mt not in ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
                  "gemma3_text", "phi3", "phimoe", "internlm2", "baichuan", "glm", "deepseek_v2", "deepseek_v3"):
        raise ShapeError(f"{s.id}: no config.json writer for model_type {mt!r}")
    d: dict[str, Any] = {
        "model_type": mt, "num_hidden_layers": s.layers, "hidden_size": s.hidden,
        "num_attention_heads": s.heads, "num_key_value_heads": s.kv_heads,
        "intermediate_size": s.intermediate, "vocab_size": s.vocab,
        "tie_word_embeddings": s.tied_embeddings, "max_position_embeddings": s.max_position,
    }
    if mt == "baichuan":
        d.pop("num_key_value_heads")
    always_head_dim = ("qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text", "glm")
    if s.layout != "mla" and (s.head_dim != s.hidden // s.heads or mt in always_head_dim):
        d["head_dim"] = s.head_dim
    if mt in ("llama", "mistral", "mixtral"):
        d["attention_bias"] = s.attention_bias
        d["mlp_bias"] = s.mlp_bias
    elif mt in ("qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text", "glm", "phimoe", "deepseek_v2",
                "deepseek_v3"):
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
    elif s.layout == "mla":
        d.update(q_lora_rank=s.q_lora_rank or None, kv_lora_rank=s.kv_lora_rank,
                 qk_nope_head_dim=s.qk_nope_head_dim, qk_rope_head_dim=s.qk_rope_head_dim,
                 v_head_dim=s.v_head_dim, mlp_bias=s.mlp_bias)
        if s.experts:
            n_shared = s.shared_expert_intermediate // s.moe_intermediate if s.moe_intermediate else 0
            d.update(n_routed_experts=s.experts, num_experts_per_tok=s.experts_active,
                     moe_intermediate_size=s.moe_intermediate, n_shared_experts=n_shared,
                     first_k_dense_replace=len(s.dense_layers), moe_layer_freq=1)
    return d
