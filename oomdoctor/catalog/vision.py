"""Vision towers of multimodal models, read from their config.json as transformers 5.24 builds them.

Each reader counts the tower's parameters exactly (patch embedding, position
table, blocks, norms, the projector into the language model) and lists its
``nn.Linear`` modules, which peft's ``all-linear`` reaches like the language
model's.  Keys a config leaves out take the transformers configuration class's
defaults (CLIP and SigLIP vision, Qwen2-VL's, Qwen2.5-VL's and Qwen3-VL's vision
configs, Mllama's and Pixtral's).  Llama 3.2 Vision (Mllama) is also read here
whole, its language model included: cross-attention layers sit among its
decoder layers.  ``bench/accuracy/param_counts.py`` checks every catalog model against
transformers on the meta device.
"""
from __future__ import annotations

from typing import Any, Mapping

from .shape import Linear, ShapeError, Tower

__all__ = ["read_tower", "read_mllama_text"]

# transformers' defaults for the vision configs (checked against transformers 5.24).
CLIP_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
                 "num_channels": 3, "image_size": 224, "patch_size": 32}
SIGLIP_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
                   "num_channels": 3, "image_size": 224, "patch_size": 16, "vision_use_head": True}
QWEN2_VL_DEFAULTS = {"depth": 32, "embed_dim": 1280, "hidden_size": 3584, "mlp_ratio": 4, "num_heads": 16,
                     "in_channels": 3, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
QWEN2_5_VL_DEFAULTS = {"depth": 32, "hidden_size": 3584, "intermediate_size": 3420, "num_heads": 16,
                       "in_channels": 3, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                       "out_hidden_size": 3584}
# MllamaVisionConfig's and PixtralVisionConfig's defaults (transformers 5.24).
MLLAMA_VISION_DEFAULTS = {"hidden_size": 1280, "num_hidden_layers": 32, "num_global_layers": 8, "attention_heads": 16,
                          "num_channels": 3, "intermediate_size": 5120, "vision_output_dim": 7680, "image_size": 448,
                          "patch_size": 14, "max_num_tiles": 4,
                          "supported_aspect_ratios": [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]]}
PIXTRAL_DEFAULTS = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_attention_heads": 16,
                    "num_channels": 3, "image_size": 1024, "patch_size": 16}
QWEN3_VL_DEFAULTS = {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "in_channels": 3,
                     "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 3584,
                     "num_position_embeddings": 2304, "deepstack_visual_indexes": [8, 16, 24]}


def _get(cfg: Mapping[str, Any], defaults: Mapping[str, Any], key: str) -> Any:
    v = cfg.get(key)
    if v is None:
        v = defaults.get(key)
    if v is None:
        raise ShapeError(f"vision_config is missing {key!r}")
    return v


def _int(cfg, defaults, key) -> int:
    v = _get(cfg, defaults, key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < 0 or v > 10_000_000:
        raise ShapeError(f"vision_config: {key!r} must be a whole number, got {str(v)[:40]!r}")
    return int(v)


def _params(linears: list[Linear]) -> int:
    return sum(l.params for l in linears)


def _vit_blocks(L: int, h: int, inter: int, names: tuple[str, str, str, str, str, str], gated: bool = False,
                fused: bool = False) -> list[Linear]:
    """One ViT layer's linears times L: q/k/v (or fused qkv) and out, then the MLP; every one with a bias."""
    q, k, v, o, up, down = names
    out = [Linear(q, h, 3 * h, L, True, "vision")] if fused else [
        Linear(q, h, h, L, True, "vision"), Linear(k, h, h, L, True, "vision"), Linear(v, h, h, L, True, "vision")]
    out.append(Linear(o, h, h, L, True, "vision"))
    if gated:
        out += [Linear("gate_proj", h, inter, L, True, "vision"), Linear("up_proj", h, inter, L, True, "vision")]
    else:
        out.append(Linear(up, h, inter, L, True, "vision"))
    out.append(Linear(down, inter, h, L, True, "vision"))
    return out


def _clip_like(vcfg: Mapping[str, Any], siglip: bool) -> tuple[int, list[Linear], dict[str, int]]:
    d = SIGLIP_DEFAULTS if siglip else CLIP_DEFAULTS
    h, inter, L = _int(vcfg, d, "hidden_size"), _int(vcfg, d, "intermediate_size"), _int(vcfg, d, "num_hidden_layers")
    heads, ch = _int(vcfg, d, "num_attention_heads"), _int(vcfg, d, "num_channels")
    img, p = _int(vcfg, d, "image_size"), _int(vcfg, d, "patch_size")
    patches = (img // p) ** 2
    linears = _vit_blocks(L, h, inter, ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"))
    other = ch * p * p * h + L * 2 * 2 * h + 2 * h      # patch conv, two LayerNorms a layer, post_layernorm
    if siglip:
        other += h + patches * h                        # conv bias, position table
        if bool(vcfg.get("vision_use_head", d["vision_use_head"])):
            # attention-pooling head: probe, in_proj (3h×h + 3h), out_proj, LayerNorm, MLP
            head = [Linear("out_proj", h, h, 1, True, "vision"), Linear("fc1", h, inter, 1, True, "vision"),
                    Linear("fc2", inter, h, 1, True, "vision")]
            linears += head
            other += h + 3 * h * h + 3 * h + 2 * h
    else:
        other += h + (patches + 1) * h + 2 * h          # class embedding, position table, pre_layrnorm
    return other, linears, dict(hidden=h, inter=inter, layers=L, heads=heads, image=img, patch=p, patches=patches,
                                channels=ch)


# LlavaNextConfig's image_grid_pinpoints when a config leaves them out (transformers 5.24)
LLAVA_NEXT_PINPOINTS = ((336, 672), (672, 336), (672, 672), (1008, 336), (336, 1008))


def _pinpoints(config) -> tuple[tuple[int, int], ...]:
    raw = config.get("image_grid_pinpoints")
    if raw is None:
        return LLAVA_NEXT_PINPOINTS
    if not isinstance(raw, (list, tuple)) or not raw or len(raw) > 1000:
        raise ShapeError("'image_grid_pinpoints' must be a non-empty list of [height, width] pairs")
    out = []
    for pair in raw:
        if (not isinstance(pair, (list, tuple)) or len(pair) != 2
                or any(isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= 100_000 for v in pair)):
            raise ShapeError("'image_grid_pinpoints' must be a non-empty list of [height, width] pairs")
        out.append((int(pair[0]), int(pair[1])))
    return tuple(out)


def _clip_like_base(v: Mapping[str, int], vt: str) -> int:
    """What ``_clip_like`` counts outside the blocks before a SigLIP pooling head: the patch convolution, two
    LayerNorms a layer, the final LayerNorm, and CLIP's class token and pre-LayerNorm or SigLIP's bias."""
    h = v["hidden"]
    base = v["channels"] * v["patch"] ** 2 * h + v["layers"] * 4 * h + 2 * h
    if vt == "siglip_vision_model":
        return base + h + v["patches"] * h
    return base + h + (v["patches"] + 1) * h + 2 * h


def _idle(layer: Any, v: Mapping[str, int], linears: list[Linear], other_head: int) -> tuple[int, int]:
    """(layers, parameters) of the tower that LLaVA never reads: the layers after the deepest one
    ``vision_feature_layer`` picks (hidden_states[i] is layer i's output, 0 the embeddings), the final LayerNorm and
    a SigLIP pooling head (``other_head``: its non-linear part; its linears are the ones counted once)."""
    L, h = v["layers"], v["hidden"]
    picks = layer if isinstance(layer, (list, tuple)) and layer else [layer]
    if any(isinstance(i, bool) or not isinstance(i, int) or not -(L + 1) <= i <= L for i in picks):
        raise ShapeError(f"'vision_feature_layer' must be layer indices within the tower's {L} layers")
    deepest = max(i if i >= 0 else L + 1 + i for i in picks)
    idle_layers = L - deepest
    per_layer = sum(l.params for l in linears if l.count == L) // L + 4 * h
    head = sum(l.params for l in linears if l.count == 1) + other_head
    return idle_layers, idle_layers * per_layer + 2 * h + head


def _llava(config, text_cfg, vcfg, mt: str = "llava") -> Tower:
    """LLaVA-1.5 (``llava``) and LLaVA-NeXT (``llava_next``): a CLIP or SigLIP tower, a two-layer projector from
    the chosen layers' features (``vision_feature_layer``, one or several concatenated) into the language model,
    and for LLaVA-NeXT the learned ``image_newline`` vector (the language model's width) that ends each row of
    tiles' features."""
    vt = str(vcfg.get("model_type") or "clip_vision_model")
    if vt not in ("clip_vision_model", "siglip_vision_model"):
        raise ShapeError(f"{mt} with a {vt} vision tower is not supported")
    other, linears, v = _clip_like(vcfg, vt == "siglip_vision_model")
    text_h = int(text_cfg.get("hidden_size") or 4096)
    bias = bool(config.get("multimodal_projector_bias", True))
    layer = config.get("vision_feature_layer", -2)
    feature_layers = len(layer) if isinstance(layer, (list, tuple)) and layer else 1
    projector = [Linear("linear_1", v["hidden"] * feature_layers, text_h, 1, bias, "projector"),
                 Linear("linear_2", text_h, text_h, 1, bias, "projector")]
    strategy = str(config.get("vision_feature_select_strategy") or "default")
    tokens = v["patches"] + (0 if strategy == "default" or vt == "siglip_vision_model" else 1)
    idle_layers, idle = _idle(layer, v, linears, other_head=other - _clip_like_base(v, vt))
    linears += projector
    if mt == "llava_next":
        other += text_h                                  # image_newline
        return Tower(vt, v["layers"], v["hidden"], v["heads"], v["inter"], v["patch"], other + _params(linears),
                     tuple(linears), image_size=v["image"], grid_pinpoints=_pinpoints(config),
                     feature_select=strategy, projector_params=_params(projector) + text_h,
                     idle_layers=idle_layers, idle_params=idle)
    return Tower(vt, v["layers"], v["hidden"], v["heads"], v["inter"], v["patch"], other + _params(linears),
                 tuple(linears), image_size=v["image"], tokens_per_image=tokens, projector_params=_params(projector),
                 idle_layers=idle_layers, idle_params=idle)


def _gemma3(config, text_cfg, vcfg) -> Tower:
    vt = str(vcfg.get("model_type") or "siglip_vision_model")
    other, linears, v = _clip_like(vcfg, True)
    text_h = int(text_cfg.get("hidden_size") or 2304)
    # mm_input_projection_weight (vision hidden × text hidden) and mm_soft_emb_norm (Gemma RMSNorm)
    projector = v["hidden"] * text_h + v["hidden"]
    other += projector
    tokens = int(config.get("mm_tokens_per_image") or 256)
    return Tower(vt, v["layers"], v["hidden"], v["heads"], v["inter"], v["patch"], other + _params(linears),
                 tuple(linears), image_size=v["image"], tokens_per_image=tokens, projector_params=projector)


def _qwen_vl(config, text_cfg, vcfg, mt: str) -> Tower:
    if mt == "qwen2_vl":
        d = QWEN2_VL_DEFAULTS
        h = _int(vcfg, d, "embed_dim")
        inter = h * int(_get(vcfg, d, "mlp_ratio"))
        out_h = _int(vcfg, d, "hidden_size")
    elif mt == "qwen2_5_vl":
        d = QWEN2_5_VL_DEFAULTS
        h, inter, out_h = _int(vcfg, d, "hidden_size"), _int(vcfg, d, "intermediate_size"), _int(vcfg, d, "out_hidden_size")
    else:
        d = QWEN3_VL_DEFAULTS
        h, inter, out_h = _int(vcfg, d, "hidden_size"), _int(vcfg, d, "intermediate_size"), _int(vcfg, d, "out_hidden_size")
    L, heads = _int(vcfg, d, "depth"), _int(vcfg, d, "num_heads")
    ch, p = _int(vcfg, d, "in_channels"), _int(vcfg, d, "patch_size")
    m, tp = _int(vcfg, d, "spatial_merge_size"), _int(vcfg, d, "temporal_patch_size")
    merged = h * m * m
    other = ch * tp * p * p * h                                            # Conv3d patch embedding
    if mt == "qwen2_5_vl":
        linears = _vit_blocks(L, h, inter, ("qkv", "", "", "proj", "", "down_proj"), gated=True, fused=True)
        other += L * 2 * h + h                                             # RMSNorms (weight), merger's ln_q
    else:
        linears = _vit_blocks(L, h, inter, ("qkv", "", "", "proj", "fc1" if mt == "qwen2_vl" else "linear_fc1",
                                            "fc2" if mt == "qwen2_vl" else "linear_fc2"), fused=True)
        other += L * 2 * 2 * h + 2 * h                                     # LayerNorms, merger norm
    up, down = ("0", "2") if mt in ("qwen2_vl", "qwen2_5_vl") else ("linear_fc1", "linear_fc2")
    merger = [Linear(up, merged, merged, 1, True, "projector"), Linear(down, merged, out_h, 1, True, "projector")]
    linears += merger
    # visual.merger: its two linears and its norm (an RMSNorm weight in Qwen2.5-VL, a LayerNorm elsewhere)
    merger_params = _params(merger) + (h if mt == "qwen2_5_vl" else 2 * h)
    if mt in ("qwen3_vl", "qwen3_vl_moe"):
        other += h + _int(vcfg, d, "num_position_embeddings") * h           # conv bias, position table
        deep = len(_get(vcfg, d, "deepstack_visual_indexes"))
        linears += [Linear("linear_fc1", merged, merged, deep, True, "projector"),
                    Linear("linear_fc2", merged, out_h, deep, True, "projector")]
        other += deep * 2 * merged                                         # their LayerNorms over merged width
    return Tower(mt, L, h, heads, inter, p, other + _params(linears), tuple(linears), merge=m, temporal_patch=tp,
                 projector_params=merger_params)


def _mllama(config, text_cfg, vcfg) -> Tower:
    """Llama 3.2 Vision's encoder: a ViT of ``num_hidden_layers`` local and ``num_global_layers`` gated global
    layers over each tile (CLS token included), position and tile embeddings per aspect ratio, and one linear
    projector of the concatenated layer outputs (``vision_output_dim``) into the language model's width."""
    d = MLLAMA_VISION_DEFAULTS
    h, inter = _int(vcfg, d, "hidden_size"), _int(vcfg, d, "intermediate_size")
    L, G = _int(vcfg, d, "num_hidden_layers"), _int(vcfg, d, "num_global_layers")
    # MllamaVisionConfig maps num_attention_heads onto attention_heads
    heads = _int({"attention_heads": vcfg.get("attention_heads", vcfg.get("num_attention_heads"))}, d, "attention_heads")
    ch, img, p = _int(vcfg, d, "num_channels"), _int(vcfg, d, "image_size"), _int(vcfg, d, "patch_size")
    tiles = _int(vcfg, d, "max_num_tiles")
    ratios = _get(vcfg, d, "supported_aspect_ratios")
    if not isinstance(ratios, (list, tuple)) or not ratios:
        raise ShapeError("vision_config: 'supported_aspect_ratios' must be a non-empty list")
    rows = len(ratios) + 1                            # aspect-ratio ids, 0 for padding
    out_dim = _int(vcfg, d, "vision_output_dim")
    text_h = int(text_cfg.get("hidden_size") or 4096)
    positions = (img // p) ** 2 + 1                   # patches of a tile and its CLS token
    linears = [Linear(n, h, h, L + G, False, "vision") for n in ("q_proj", "k_proj", "v_proj", "o_proj")]
    linears += [Linear("fc1", h, inter, L + G, True, "vision"), Linear("fc2", inter, h, L + G, True, "vision"),
                Linear("multi_modal_projector", out_dim, text_h, 1, True, "projector")]
    other = (ch * p * p * h + h                       # patch convolution (no bias), class embedding
             + 1 + positions * h + rows * tiles * positions * h     # gated position and tile-position tables
             + 2 * (rows * tiles * h + 1)             # pre- and post-tile embeddings with their gates
             + 2 * 2 * h                              # layernorm_pre, layernorm_post
             + (L + G) * 2 * 2 * h + G * 2)           # two LayerNorms a layer, two gates a global layer
    return Tower("mllama_vision_model", L + G, h, heads, inter, p, other + _params(linears), tuple(linears),
                 image_size=img, tokens_per_image=1, tiles=tiles, global_layers=G,
                 projector_params=_params([l for l in linears if l.kind == "projector"]))


def _pixtral(config, text_cfg, vcfg) -> Tower:
    """Mistral 3's Pixtral encoder (RMSNorms, a gated MLP, 2-D rotary positions: no position table) and the
    projector: an RMSNorm, the patch merger (``spatial_merge_size``² patches into one) and two linears."""
    vt = str(vcfg.get("model_type") or "pixtral")
    if vt != "pixtral":
        raise ShapeError(f"mistral3 with a {vt} vision tower is not supported")
    d = PIXTRAL_DEFAULTS
    h, inter, L = _int(vcfg, d, "hidden_size"), _int(vcfg, d, "intermediate_size"), _int(vcfg, d, "num_hidden_layers")
    heads, ch = _int(vcfg, d, "num_attention_heads"), _int(vcfg, d, "num_channels")
    img, p = _int(vcfg, d, "image_size"), _int(vcfg, d, "patch_size")
    m = _int(config, {"spatial_merge_size": 2}, "spatial_merge_size")
    layer = config.get("vision_feature_layer", -1)
    feature_layers = len(layer) if isinstance(layer, (list, tuple)) else 1
    text_h = int(text_cfg.get("hidden_size") or 5120)
    bias = bool(config.get("multimodal_projector_bias", False))
    linears = [Linear(n, h, h, L, False, "vision") for n in ("q_proj", "k_proj", "v_proj", "o_proj")]
    linears += [Linear("gate_proj", h, inter, L, False, "vision"), Linear("up_proj", h, inter, L, False, "vision"),
                Linear("down_proj", inter, h, L, False, "vision"),
                Linear("merging_layer", h * m * m, h, 1, False, "projector"),
                Linear("linear_1", h * feature_layers, text_h, 1, bias, "projector"),
                Linear("linear_2", text_h, text_h, 1, bias, "projector")]
    other = ch * p * p * h + h + L * 2 * h + h        # patch convolution, ln_pre, two RMSNorms a layer, projector norm
    projector = h + _params([l for l in linears if l.kind == "projector"])
    return Tower(vt, L, h, heads, inter, p, other + _params(linears), tuple(linears), image_size=img, merge=m,
                 projector_params=projector)


def _side(v: Any, what: str) -> int:
    """InternVL's image_size and patch_size: a number or a square [height, width] pair."""
    if isinstance(v, (list, tuple)) and len(v) == 2 and v[0] == v[1]:
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= 100_000:
        raise ShapeError(f"vision_config: {what!r} must be a whole number or a square pair")
    return v


def _internvl(config, text_cfg, vcfg, mt: str) -> Tower:
    """InternVL 2.5 / 3: an InternViT (a class token and position table, LayerNorm or RMSNorm blocks with a layer
    scale on both branches, q and k RMSNorms in the 6B tower), its features pixel-shuffled by
    ``downsample_ratio`` (2x2 patches into one token at 0.5), then a LayerNorm and two linears into the language
    model.  ``internvl`` is transformers' own class (the ``-hf`` checkpoints); ``internvl_chat`` the checkpoints'
    remote code, whose modules have the same parameters under other names (a fused qkv, ``mlp1``)."""
    native = mt == "internvl"
    h, inter = _int(vcfg, {}, "hidden_size"), _int(vcfg, {}, "intermediate_size")
    L, heads = _int(vcfg, {}, "num_hidden_layers"), _int(vcfg, {}, "num_attention_heads")
    ch = _int(vcfg, {"num_channels": 3}, "num_channels")
    # the remote code resizes tiles to force_image_size when the config sets it
    raw = config.get("force_image_size") if not native and config.get("force_image_size") else vcfg.get("image_size")
    img = _side(448 if raw is None else raw, "image_size")
    p = _side(_get(vcfg, {"patch_size": 14}, "patch_size"), "patch_size")
    bias = bool(vcfg.get("attention_bias" if native else "qkv_bias", False))
    qk_norm = bool(vcfg.get("use_qk_norm" if native else "qk_normalization", False))
    norm = str(vcfg.get("norm_type") or "layer_norm")
    if norm not in ("layer_norm", "rms_norm"):
        raise ShapeError(f"vision_config: norm_type {norm!r} is not supported")
    ratio = config.get("downsample_ratio", 0.5)
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise ShapeError("'downsample_ratio' must be a number in (0, 1]")
    shuffle = int(1 / ratio) ** 2
    text_h = int(text_cfg.get("hidden_size") or 896)
    names = ("q_proj", "k_proj", "v_proj", "projection_layer") if native else ("qkv", "", "", "proj")
    linears = [Linear(names[0], h, h, L, bias, "vision"), Linear(names[1], h, h, L, bias, "vision"),
               Linear(names[2], h, h, L, bias, "vision")] if native else [Linear("qkv", h, 3 * h, L, bias, "vision")]
    linears += [Linear(names[3], h, h, L, True, "vision"), Linear("fc1", h, inter, L, True, "vision"),
                Linear("fc2", inter, h, L, True, "vision")]
    projector = [Linear("linear_1" if native else "1", h * shuffle, text_h, 1, True, "projector"),
                 Linear("linear_2" if native else "3", text_h, text_h, 1, True, "projector")]
    linears += projector
    patches = (img // p) ** 2
    per_norm = 2 * h if norm == "layer_norm" else h
    other = (ch * p * p * h + h + h + (patches + 1) * h            # patch convolution and bias, class token, positions
             + L * (2 * per_norm + 2 * h + (2 * h if qk_norm else 0)))  # two norms, two layer scales, q/k norms
    if native and vcfg.get("use_mask_token"):
        other += h
    if native and vcfg.get("use_mean_pooling") is False:
        other += 2 * h                                                 # a final LayerNorm over the CLS output
    merger_norm = 2 * h * shuffle                                      # the projector's LayerNorm
    other += merger_norm
    lo, hi = (config.get("min_dynamic_patch", 1), config.get("max_dynamic_patch", 12)) if not native else (1, 12)
    if any(isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= 1000 for v in (lo, hi)) or lo > hi:
        raise ShapeError("'min_dynamic_patch' and 'max_dynamic_patch' must be whole numbers, the first no larger")
    dynamic = bool(config.get("dynamic_image_size", True)) if not native else True
    thumbnail = bool(config.get("use_thumbnail", True)) if not native else True
    return Tower("internvl_vision", L, h, heads, inter, p, other + _params(linears), tuple(linears), image_size=img,
                 tokens_per_image=patches // shuffle, projector_params=_params(projector) + merger_norm,
                 dynamic_tiles=(lo, hi) if dynamic else (), thumbnail=thumbnail and dynamic)


def read_tower(config: Mapping[str, Any], mt: str, text_cfg: Mapping[str, Any]) -> Tower | None:
    """The vision tower of a multimodal config, or None when the config carries none (a text-only copy)."""
    vcfg = config.get("vision_config")
    if not isinstance(vcfg, Mapping):
        if mt in ("qwen2_vl", "qwen2_5_vl") and "vision_config" not in config:
            return None
        return None
    if mt in ("llava", "llava_next"):
        return _llava(config, text_cfg, vcfg, mt)
    if mt == "gemma3":
        return _gemma3(config, text_cfg, vcfg)
    if mt in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"):
        return _qwen_vl(config, text_cfg, vcfg, mt)
    if mt == "mllama":
        return _mllama(config, text_cfg, vcfg)
    if mt == "mistral3":
        return _pixtral(config, text_cfg, vcfg)
    if mt in ("internvl", "internvl_chat"):
        return _internvl(config, text_cfg, vcfg, mt)
    raise ShapeError(f"the vision tower of {mt} is not supported yet; its language model alone is not the model")


# MllamaTextConfig's defaults (transformers 5.24), for keys a config.json leaves out.
MLLAMA_TEXT_DEFAULTS = {"vocab_size": 128256, "hidden_size": 4096, "num_hidden_layers": 40, "num_attention_heads": 32,
                        "num_key_value_heads": 8, "intermediate_size": 14336, "max_position_embeddings": 131072,
                        "tie_word_embeddings": False, "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38]}


def read_mllama_text(config, text_cfg, tower, id):
    """Llama 3.2 Vision's language model: a Llama decoder whose ``cross_attention_layers`` attend to the vision
    tokens instead of the text (the same q/k/v/o and MLP widths, plus a q and k RMSNorm over head_dim and two
    tanh gates each); the embedding table has 8 rows beyond ``vocab_size``."""
    from .hf_config import READERS
    from .shape import ModelShape, _TYPE_DEFAULTS

    cfg = {**MLLAMA_TEXT_DEFAULTS, **{k: v for k, v in text_cfg.items() if v is not None}}
    layout, naming, norms, qk_norm, norm = _TYPE_DEFAULTS["mllama_text"]
    kw: dict[str, Any] = dict(id=id or str(config.get("_name_or_path") or "custom-mllama"), model_type="mllama_text",
                              layout=layout, expert_naming=naming, norms_per_layer=norms, qk_norm=qk_norm, norm=norm)
    READERS["llama"](cfg, kw)
    L = kw["layers"]
    cross = cfg["cross_attention_layers"]
    if not isinstance(cross, (list, tuple)) or any(isinstance(i, bool) or not isinstance(i, int) for i in cross):
        raise ShapeError("text_config: 'cross_attention_layers' must be a list of layer indices")
    cross = tuple(sorted(set(cross)))
    if any(not 0 <= i < L for i in cross):
        raise ShapeError(f"text_config: 'cross_attention_layers' must lie in 0..{L - 1}")
    head_dim = kw["hidden"] // kw["heads"]            # MllamaText*Attention: hidden_size // num_attention_heads
    kw.update(head_dim=head_dim, attention_bias=False, o_bias=False, mlp_bias=False, cross_attention_layers=cross,
              extra_params=8 * kw["hidden"] + len(cross) * (2 * head_dim + 2))
    if tower is not None:
        kw["vision"] = tower
    else:
        kw["text_only"] = True
    return ModelShape(**kw)
