"""Vision towers of multimodal models, read from their config.json as transformers 5.24 builds them.

Each reader counts the tower's parameters exactly (patch embedding, position
table, blocks, norms, the projector into the language model) and lists its
``nn.Linear`` modules, which peft's ``all-linear`` reaches like the language
model's.  Keys a config leaves out take the transformers configuration class's
defaults (CLIP and SigLIP vision, Qwen2-VL's, Qwen2.5-VL's and Qwen3-VL's vision
configs).  ``bench/accuracy/param_counts.py`` checks every catalog model against
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
    return other, linears, dict(hidden=h, inter=inter, layers=L, heads=heads, image=img, patch=p, patches=patches)


def _llava(config, text_cfg, vcfg) -> Tower:
    vt = str(vcfg.get("model_type") or "clip_vision_model")
    if vt not in ("clip_vision_model", "siglip_vision_model"):
        raise ShapeError(f"llava with a {vt} vision tower is not supported")
    other, linears, v = _clip_like(vcfg, vt == "siglip_vision_model")
    text_h = int(text_cfg.get("hidden_size") or 4096)
    bias = bool(config.get("multimodal_projector_bias", True))
    projector = [Linear("linear_1", v["hidden"], text_h, 1, bias, "projector"),
                 Linear("linear_2", text_h, text_h, 1, bias, "projector")]
    strategy = str(config.get("vision_feature_select_strategy") or "default")
    tokens = v["patches"] + (0 if strategy == "default" or vt == "siglip_vision_model" else 1)
    linears += projector
    return Tower(vt, v["layers"], v["hidden"], v["heads"], v["inter"], v["patch"], other + _params(linears),
                 tuple(linears), image_size=v["image"], tokens_per_image=tokens)


def _gemma3(config, text_cfg, vcfg) -> Tower:
    vt = str(vcfg.get("model_type") or "siglip_vision_model")
    other, linears, v = _clip_like(vcfg, True)
    text_h = int(text_cfg.get("hidden_size") or 2304)
    # mm_input_projection_weight (vision hidden × text hidden) and mm_soft_emb_norm (Gemma RMSNorm)
    other += v["hidden"] * text_h + v["hidden"]
    tokens = int(config.get("mm_tokens_per_image") or 256)
    return Tower(vt, v["layers"], v["hidden"], v["heads"], v["inter"], v["patch"], other + _params(linears),
                 tuple(linears), image_size=v["image"], tokens_per_image=tokens)


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
    linears += [Linear(up, merged, merged, 1, True, "projector"), Linear(down, merged, out_h, 1, True, "projector")]
    if mt in ("qwen3_vl", "qwen3_vl_moe"):
        other += h + _int(vcfg, d, "num_position_embeddings") * h           # conv bias, position table
        deep = len(_get(vcfg, d, "deepstack_visual_indexes"))
        linears += [Linear("linear_fc1", merged, merged, deep, True, "projector"),
                    Linear("linear_fc2", merged, out_h, deep, True, "projector")]
        other += deep * 2 * merged                                         # their LayerNorms over merged width
    return Tower(mt, L, h, heads, inter, p, other + _params(linears), tuple(linears), merge=m, temporal_patch=tp)


def read_tower(config: Mapping[str, Any], mt: str, text_cfg: Mapping[str, Any]) -> Tower | None:
    """The vision tower of a multimodal config, or None when the config carries none (a text-only copy)."""
    vcfg = config.get("vision_config")
    if not isinstance(vcfg, Mapping):
        if mt in ("qwen2_vl", "qwen2_5_vl") and "vision_config" not in config:
            return None
        return None
    if mt == "llava":
        return _llava(config, text_cfg, vcfg)
    if mt == "gemma3":
        return _gemma3(config, text_cfg, vcfg)
    if mt in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"):
        return _qwen_vl(config, text_cfg, vcfg, mt)
    raise ShapeError(f"the vision tower of {mt} is not supported yet; its language model alone is not the model")


def read_mllama_text(config, text_cfg, tower, id):
    raise ShapeError("mllama (Llama 3.2 Vision) is not supported yet")
