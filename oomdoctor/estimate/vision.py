"""A vision-language model's vision tower in a training step: the patches it encodes, the image tokens it hands
the language model, and what its layers keep for backward.

Image tokens: a fixed number per image (LLaVA's 576, Gemma 3's 256), or, for Qwen2-VL and its successors,
one per ``patch·merge`` square of pixels once the processor has resized the image to multiples of
``patch·merge`` (``smart_resize``: the nearest multiples, held between the processor's min_pixels and
max_pixels).  The vision tower encodes ``merge²`` patches per image token (plus CLIP's class token).
LLaVA-NeXT (``anyres``) fits the image into the best of its ``image_grid_pinpoints``, cuts that into tiles of
the tower's own size and encodes them and a downscaled view of the whole image: the whole view's features,
then the tiles' features with the padding rows or columns left out and one newline token per row.

The tower's forward keeps tensors for backward only when a gradient has to flow through it: its weights
train (full fine-tuning without ``freeze_vision``) or carry LoRA adapters (peft's ``all-linear`` reaches
its linears as well, and a target name such as ``gate_proj`` matches the tower's too).  Its layers are
ViT blocks, accounted like the language model's (``activations.layer_items``: norms, a fused qkv projection
whose output the value's view holds, SDPA, the MLP), per patch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..catalog.shape import Linear
from . import activations as acts
from .derivation import Line, line
from .setup import Setup

# Qwen2-VL / Qwen2.5-VL / Qwen3-VL image processors' defaults (transformers 5.24): pixels per image are held
# between these after resizing to multiples of patch·merge.
QWEN_MIN_PIXELS = 56 * 56
QWEN_MAX_PIXELS = 28 * 28 * 1280
DEFAULT_IMAGE_SIDE = 1024       # a photo-sized image when the resolution is not stated (stated as an assumption)


@dataclass(frozen=True)
class TowerShape:
    """The estimator's view of a vision tower's blocks (the protocol ``anatomy`` reads)."""

    model_type: str
    layers: int
    hidden: int
    heads: int
    intermediate: int
    blocks: tuple[Linear, ...]
    vocab: int = 1
    tied_embeddings: bool = True
    experts: int = 0
    norms_per_layer: int = 2
    qk_norm: bool = False

    @property
    def kv_heads(self) -> int:
        return self.heads

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        return self.hidden

    @property
    def kv_dim(self) -> int:
        return self.hidden

    def linear_layers(self) -> list[Linear]:
        return list(self.blocks)

    def embedding_params(self) -> int:
        return 0

    def lm_head_params(self) -> int:
        return 0

    def norm_params(self) -> int:
        return (2 * self.layers + 1) * self.hidden

    def param_count(self) -> int:
        return sum(l.params for l in self.linear_layers()) + self.norm_params()


@dataclass(frozen=True)
class AnyresGrid:
    """How LLaVA-NeXT's processor lays out one image: the pinpoint resolution chosen, its tiles, the views the
    vision tower encodes (the tiles and the whole image) and the image tokens the text holds."""

    best: tuple[int, int]           # (height, width) chosen from image_grid_pinpoints
    rows: int
    cols: int
    views: int
    tokens: int
    patches: int                    # positions the tower encodes over all views (CLS included)


def _best_resolution(height: int, width: int, pinpoints) -> tuple[int, int]:
    """transformers' ``select_best_resolution``: the pinpoint that keeps the most of the image's pixels once it is
    scaled to fit, the least padding among equals."""
    best, most, least = pinpoints[0], 0, math.inf
    for ph, pw in pinpoints:
        scale = min(pw / width, ph / height)
        kept = min(int(width * scale) * int(height * scale), width * height)
        wasted = pw * ph - kept
        if kept > most or (kept == most and wasted < least):
            best, most, least = (ph, pw), kept, wasted
    return best


def anyres_grid(tower, height: int, width: int) -> AnyresGrid:
    """LLaVA-NeXT's image tokens for a ``height``×``width`` image, as its processor counts them
    (``LlavaNextProcessor._get_number_of_features``): the whole view's patches, plus the tiles' patch grid with the
    rows or columns that only pad the image's aspect ratio removed, plus one newline token per remaining row; less
    the CLS feature that ``vision_feature_select_strategy: default`` drops."""
    tile = tower.image_size
    per = tile // tower.patch
    best_h, best_w = _best_resolution(height, width, tower.grid_pinpoints)
    rows, cols = best_h // tile, best_w // tile
    cur_h, cur_w = per * rows, per * cols
    if width / height > cur_w / cur_h:
        pad = (cur_h - int(round(height * (cur_w / width), 7))) // 2
        cur_h -= 2 * pad
    else:
        pad = (cur_w - int(round(width * (cur_h / height), 7))) // 2
        cur_w -= 2 * pad
    cls = 1 if tower.model_type == "clip_vision_model" else 0
    tokens = cur_h * cur_w + cur_h + per * per + cls - (1 if tower.feature_select == "default" else 0)
    # image_size_to_num_patches: the whole view and every tile of the chosen resolution
    views = 1 + -(-best_h // tile) * -(-best_w // tile)
    return AnyresGrid((best_h, best_w), rows, cols, views, tokens, views * (per * per + cls))


def internvl_tiles(tower, height: int, width: int) -> tuple[int, int, int]:
    """InternVL's dynamic tiling (transformers' ``get_optimal_tiled_canvas``, the checkpoints' dynamic_preprocess):
    the (columns, rows) grid of ``image_size`` tiles whose aspect ratio is closest to the image's among those with
    ``dynamic_tiles`` tiles, a larger grid winning a tie while the image covers more than half of it; and the tiles
    encoded, a thumbnail of the whole image added when there is more than one."""
    lo, hi = tower.dynamic_tiles
    grids = sorted({(i, j) for n in range(lo, hi + 1) for i in range(1, n + 1) for j in range(1, n + 1)
                    if lo <= i * j <= hi}, key=lambda g: g[0] * g[1])
    aspect, area, tile = width / height, width * height, tower.image_size
    best, best_diff = (1, 1), math.inf
    for cols, rows in grids:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and area > 0.5 * tile * tile * cols * rows:
            best = (cols, rows)
    n = best[0] * best[1]
    return best[0], best[1], n + (1 if tower.thumbnail and n > 1 else 0)


def image_tokens(tower, side: int) -> tuple[int, int]:
    """(image tokens, patches the tower encodes) for one square image of ``side`` pixels."""
    if tower.grid_pinpoints:
        grid = anyres_grid(tower, side, side)
        return grid.tokens, grid.patches
    if tower.dynamic_tiles:
        # InternVL: every tile is image_size² pixels, its patches (and class token) pixel-shuffled into tokens
        tiles = internvl_tiles(tower, side, side)[2]
        return tiles * tower.tokens_per_image, tiles * ((tower.image_size // tower.patch) ** 2 + 1)
    if tower.model_type == "mllama_vision_model":
        # Llama 3.2 Vision: the processor pads every image to max_num_tiles tiles of image_size, the encoder runs
        # on all of them (CLS included, padded to a multiple of 8 positions); the text holds one <|image|> token
        return tower.tokens_per_image, tower.tiles * _padded8(mllama_positions(tower))
    if tower.model_type == "pixtral":
        # Pixtral (Mistral 3): the longest side held to image_size, then rounded up to whole patch·merge squares;
        # each row of merged patches ends with [IMG_BREAK] (the last with [IMG_END])
        unit = tower.patch * tower.merge
        edge = min(side, tower.image_size) if tower.image_size else side
        n = max(1, -(-edge // unit))
        return n * (n + 1), (n * tower.merge) ** 2
    if tower.tokens_per_image:
        patches = (tower.image_size // tower.patch) ** 2 if tower.image_size else tower.tokens_per_image
        return tower.tokens_per_image, patches + (1 if tower.model_type == "clip_vision_model" else 0)
    unit = tower.patch * tower.merge
    pixels = side * side
    edge = max(unit, round(side / unit) * unit)
    if edge * edge > QWEN_MAX_PIXELS:
        edge = max(unit, math.floor(math.sqrt(QWEN_MAX_PIXELS) / unit) * unit)
    elif edge * edge < QWEN_MIN_PIXELS:
        edge = math.ceil(math.sqrt(QWEN_MIN_PIXELS) / unit) * unit
    del pixels
    tokens = (edge // unit) ** 2
    return tokens, tokens * tower.merge * tower.merge


def mllama_positions(tower) -> int:
    """A Llama 3.2 Vision tile's positions: its patches and the CLS token."""
    return (tower.image_size // tower.patch) ** 2 + 1


def _padded8(n: int) -> int:
    return n + (-n) % 8


ATTENTION_IN = {"qkv", "q_proj", "k_proj", "v_proj"}
ATTENTION_OUT = {"proj", "out_proj", "o_proj"}


def tower_shape(tower) -> TowerShape:
    """The tower's per-layer linears (its blocks, not the projector or a pooling head), with their roles."""
    blocks = []
    for lin in tower.linears:
        if lin.kind != "vision" or lin.count != tower.layers:
            continue
        kind = "attn" if lin.name in ATTENTION_IN | ATTENTION_OUT else "mlp"
        blocks.append(Linear(lin.name, lin.d_in, lin.d_out, lin.count, lin.bias, kind))
    return TowerShape(tower.model_type, tower.layers, tower.hidden, tower.heads, tower.intermediate, tuple(blocks))


def needs_grad(setup: Setup) -> bool:
    tower = getattr(setup.model, "vision", None)
    if tower is None:
        return False
    if getattr(setup, "freeze_vision", False):
        return False            # nothing in it trains, and adapters are kept off it (see trainable.adapters_for)
    if setup.method == "full":
        return True
    if setup.adapters:
        from .trainable import adapters_for
        names = {l.name for l in tower.linears}
        placed = adapters_for(setup)
        return bool(names & placed.modules)
    return False


def _outside_blocks(ctx, tower, setup: Setup) -> float:
    """Per patch, outside the tower's blocks: the merger (a norm, then two linears with a GELU between, over
    ``merge²`` patches at a time: the same bytes per patch) and the tower's own rotary cos and sin."""
    h, p, pr = tower.hidden, ctx.p, ctx.pr
    trains = setup.method == "full" and not getattr(setup, "freeze_vision", False)
    if tower.model_type == "pixtral":
        return _pixtral_outside(ctx, tower, setup, trains)
    if tower.model_type == "mllama_vision_model":
        return _mllama_outside(ctx, tower, setup, trains)
    projector = [l.name for l in tower.linears if l.kind == "projector"]
    first, second = (projector + ["", ""])[:2]
    kept = 4 * h + 4 + (pr * h if trains else 0)                      # the merger's norm
    if trains or first in ctx.targets:
        kept += pr * h                                                 # the first linear's input
    kept += p * h                                                      # GELU's input
    if trains or second in ctx.targets:
        kept += p * h                                                  # GELU's output, read by the second
    if tower.model_type.startswith("qwen"):
        kept += 2 * pr * (h // tower.heads)                            # 2-D rotary cos and sin per patch
    return kept


def attention_mask_bytes(tower, images: int, patches: int, p: int) -> float:
    """The dense float mask the encoder hands SDPA, saved once for every layer's backward: Pixtral's
    block-diagonal mask over all the batch's patches in one sequence (``generate_block_attention_mask``),
    Llama 3.2 Vision's mask over each image's padded tiles."""
    if tower.model_type == "pixtral":
        return float(p) * (images * patches) ** 2
    if tower.model_type == "mllama_vision_model":
        return float(p) * images * patches ** 2
    return 0.0


def _pixtral_outside(ctx, tower, setup: Setup, trains: bool) -> float:
    """Per patch, outside Pixtral's blocks: the 2-D rotary cos and sin, then Mistral 3's projector (an RMSNorm,
    the patch merger's unfolded ``merge²`` patches into ``merging_layer``, ``linear_1``, GELU, ``linear_2``)."""
    h, p, pr = tower.hidden, ctx.p, ctx.pr
    m2 = tower.merge * tower.merge
    text_h = setup.model.hidden
    kept = 2 * p * (h // tower.heads)                                  # rotary cos and sin per patch
    kept += 4 * h + 4 + (pr * h if trains else 0)                      # the projector's norm (fp32)
    if trains or "merging_layer" in ctx.targets:
        kept += p * h                                                  # unfolded patches: merging_layer's input
    if trains or "linear_1" in ctx.targets:
        kept += p * h / m2                                             # linear_1's input, per merged token
    kept += p * text_h / m2                                            # GELU's input
    if trains or "linear_2" in ctx.targets:
        kept += p * text_h / m2                                        # GELU's output, read by linear_2
    return kept


def _mllama_outside(ctx, tower, setup: Setup, trains: bool) -> float:
    """Per (padded) position, outside Llama 3.2 Vision's blocks: the two LayerNorms around the local layers,
    the tanh gates of the global layers (each multiplies a layer's attention and MLP output), and the
    projector's input, the final states concatenated with the kept intermediate layers (``vision_output_dim``)."""
    h, p, pr = tower.hidden, ctx.p, ctx.pr
    projector = next((l for l in tower.linears if l.kind == "projector"), None)
    kept = 2 * (p * h + 8 + (pr * h if trains else 0))                # layernorm_pre, layernorm_post
    kept += tower.global_layers * 2 * p * h                            # gate·output: the output is saved
    if projector is not None and (trains or projector.name in ctx.targets):
        kept += p * projector.d_in                                     # concatenated features: the projector's input
    return kept


def _llava_projector_kept(setup: Setup, tower, patches: int) -> float:
    """A frozen LLaVA tower under full fine-tuning: the projector still trains, so it keeps its input (the chosen
    layer's features, one per patch, the CLS feature dropped by ``default`` selection), GELU's input and
    linear_2's input, in the compute dtype, for every view encoded."""
    if setup.method != "full" or tower.model_type not in ("clip_vision_model", "siglip_vision_model"):
        return 0.0
    projector = [l for l in tower.linears if l.kind == "projector"]
    if len(projector) != 2:
        return 0.0
    p = acts.context(setup).p
    views = patches // ((tower.image_size // tower.patch) ** 2 + (1 if tower.model_type == "clip_vision_model" else 0))
    features = views * (tower.image_size // tower.patch) ** 2
    return float(features * p * (projector[0].d_in + 2 * projector[0].d_out))


@dataclass(frozen=True)
class TowerActivations:
    kept: float
    recompute: float
    images: int
    tokens: int
    patches: int
    inputs: float           # the batch's pixel_values: an input, not a tensor saved for backward
    line: Line


def tower_activations(setup: Setup, rows: int) -> TowerActivations | None:
    tower = getattr(setup.model, "vision", None)
    if tower is None:
        return None
    images = getattr(setup, "images_per_sample", None) or 1
    # a fixed-size tower's own side; else the stated one, or a photo-sized image (stated as an assumption)
    fixed = tower.tokens_per_image and not tower.dynamic_tiles
    side = getattr(setup, "image_size", None) or (tower.image_size if fixed else 0) \
        or DEFAULT_IMAGE_SIDE
    tokens, patches = image_tokens(tower, side)
    # The batch's pixel_values, float32 as the image processors return them: each patch's channels ×
    # temporal patch × patch² values (Qwen's) or the whole image's pixels.
    if tower.model_type == "mllama_vision_model":
        pixels = 3 * tower.tiles * tower.image_size ** 2
    elif tower.grid_pinpoints:
        # LLaVA-NeXT: one image_size² view per tile and the whole image
        pixels = anyres_grid(tower, side, side).views * 3 * tower.image_size ** 2
    elif tower.dynamic_tiles:
        pixels = internvl_tiles(tower, side, side)[2] * 3 * tower.image_size ** 2
    elif tower.tokens_per_image:
        pixels = 3 * (tower.image_size or side) ** 2
    else:
        pixels = patches * 3 * tower.temporal_patch * tower.patch ** 2
    batch = 4.0 * rows * images * pixels
    # Qwen's multimodal rotary positions differ row by row: cos and sin per row, not shared by the batch.
    mrope = 0.0
    if tower.model_type in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe") and rows > 1:
        ctx_text = acts.context(setup)
        mrope = 2.0 * ctx_text.pr * setup.model.head_dim * setup.seq_len * (rows - 1)
    extra = batch + mrope
    if not needs_grad(setup):
        extra += rows * images * _llava_projector_kept(setup, tower, patches)
        return TowerActivations(extra, 0.0, images, tokens, patches, batch,
                                line("activations.vision_frozen", images=images, tokens=tokens, patches=patches,
                                     mib=batch / 2**20))
    vsetup = setup.replace(model=tower_shape(tower), lora_targets=setup.lora_targets, packing=True,
                           attention="sdpa" if setup.attention == "eager" else setup.attention)
    ctx = acts.context(vsetup)
    per_patch_layer = sum(b for *_, b in acts.layer_items(ctx))
    if tower.model_type == "mllama_vision_model" and not (ctx.liger or ctx.compiled):
        # fc1, GELU, fc2: GELU's input where layer_items counts SwiGLU's gate, up and SiLU outputs
        per_patch_layer -= 2 * ctx.mlp_p * tower.intermediate
        # nn.LayerNorm keeps its input in the compute dtype (and fp32 mean and rstd), not an fp32 copy
        per_patch_layer -= 2 * max(0, 4 - ctx.p) * tower.hidden
    n = rows * images * patches
    extra += n * _outside_blocks(ctx, tower, setup) + attention_mask_bytes(tower, rows * images, patches, ctx.p)
    # Llama 3.2 Vision's encoder layers are plain modules: gradient checkpointing leaves them whole
    checkpointed = setup.grad_checkpointing and tower.model_type != "mllama_vision_model"
    if checkpointed:
        kept = n * tower.layers * ctx.pr * tower.hidden + extra
        recompute = n * per_patch_layer
    else:
        kept = n * tower.layers * per_patch_layer + extra
        recompute = 0.0
    said = line("activations.vision_tower", images=images, patches=patches, tokens=tokens, layers=tower.layers,
                n=n, bytes=per_patch_layer)
    return TowerActivations(kept, recompute, images, tokens, patches, batch, said)


def cross_attention(setup: Setup, rows: int) -> tuple[float, float, Line] | None:
    """Llama 3.2 Vision's cross-attention layers beyond what a self-attention layer of the same widths keeps
    (``activations`` counts every layer as one): each reads its keys and values from the images' vision states
    (``tiles`` × positions per image) instead of the text, through a q and k RMSNorm without rotary positions,
    and multiplies its attention and MLP outputs by tanh gates.  Per row and cross layer: the keys' and values'
    outputs over the vision states, the key norm's fp32 copy, the query norm's input and fp32 copy, the two
    gated outputs, less the text keys and values a self-attention layer would have kept; once per row, the
    4-D cross-attention mask SDPA saves and the projected vision states when the k and v projections train.
    Returns (kept, recompute, line)."""
    shape = setup.model
    cross = getattr(shape, "cross_attention_layers", ()) or ()
    tower = getattr(shape, "vision", None)
    if not cross or tower is None:
        return None
    ctx = acts.context(setup)
    p, s = ctx.p, setup.seq_len
    images = getattr(setup, "images_per_sample", None) or 1
    nv = images * tower.tiles * mllama_positions(tower)
    heads, kv_heads = shape.heads, shape.kv_heads
    kv, q, h = kv_heads * shape.head_dim, heads * shape.head_dim, shape.hidden
    full = setup.method == "full"
    upcast = 4 if p < 4 else 0                           # the norms' fp32 copy (the input itself in fp32)
    # the query norm (input, rstd), the key norm over the vision states (input, rstd), and the keys and values
    # SDPA saves, repeated to every query head (the cross-attention mask is 4-D, so no grouped kernel)
    per_layer = s * q * (p + upcast) + 4 * s * heads + nv * kv * (p + upcast) + 4 * nv * kv_heads + 2 * nv * q * p
    if full:
        per_layer += 2 * s * h * p + nv * kv * p          # the trained gates' inputs, k_norm's normalised keys
    adapted = {"k_proj", "v_proj"} & ctx.targets if setup.adapters else set()
    per_layer += len(adapted) * nv * setup.lora_rank * p  # lora_A outputs over the vision states
    # less what a self-attention layer keeps for its text keys and values (estimated for every layer)
    text_kv = q if ctx.expand_kv else kv
    per_layer -= 2 * s * text_kv * p
    kv_train = full or bool(adapted)
    once = s * nv * p + (nv * h * p if kv_train else 0)
    layers = len(cross) * ctx.trained_layers / shape.layers
    if setup.grad_checkpointing:
        kept = rows * (once + nv * h * p)                # the vision states: every cross layer's saved input
        recompute = rows * max(per_layer, 0.0)
    else:
        kept = rows * (layers * per_layer + once)
        recompute = 0.0
    said = line("activations.cross_attention", layers=len(cross), vision=nv, bytes=per_layer,
                mib=kept / 2**20)
    return kept, recompute, said
