"""What the estimate takes for granted about the model's own architecture (vision towers, encoder-decoder
targets, MoE adapters, published weight formats): ``Assumed`` keys worded in ``knowledge/texts.yaml``."""
from __future__ import annotations

from .setup import Setup


def assumptions(setup: Setup) -> list:
    from .estimate import Assumed
    from .experts import wrapped
    from .vision import DEFAULT_IMAGE_SIDE, anyres_grid, image_tokens, internvl_tiles, needs_grad

    shape = setup.model
    out = []
    tower = getattr(shape, "vision", None)
    if tower is not None:
        if setup.images_per_sample is None:
            out.append(Assumed("images_per_sample", {"n": 1}))
        if setup.image_size is None and (not tower.tokens_per_image or tower.dynamic_tiles):
            tokens, _ = image_tokens(tower, DEFAULT_IMAGE_SIDE)
            out.append(Assumed("image_size", {"side": DEFAULT_IMAGE_SIDE, "tokens": tokens}))
        if tower.grid_pinpoints:
            # LLaVA-NeXT: the grid follows the image's aspect ratio, and only a side is known
            side = setup.image_size or DEFAULT_IMAGE_SIDE
            grid = anyres_grid(tower, side, side)
            out.append(Assumed("anyres_grid", {"side": side, "height": grid.best[0], "width": grid.best[1],
                                               "rows": grid.rows, "cols": grid.cols, "tile": tower.image_size,
                                               "views": grid.views, "tokens": grid.tokens}))
        if tower.dynamic_tiles:
            # InternVL: the tiles follow the aspect ratio, and only a side is known
            side = setup.image_size or DEFAULT_IMAGE_SIDE
            cols, rows, tiles = internvl_tiles(tower, side, side)
            out.append(Assumed("dynamic_tiles", {"side": side, "cols": cols, "rows": rows, "tile": tower.image_size,
                                                 "tiles": tiles, "tokens": tiles * tower.tokens_per_image,
                                                 "per": tower.tokens_per_image, "most": tower.dynamic_tiles[1]}))
        if not needs_grad(setup):
            out.append(Assumed("vision_keeps_nothing"))
    if getattr(shape, "text_only", False):
        out.append(Assumed("text_only_config"))
    towers = getattr(shape, "towers_not_counted", ())
    if towers:
        out.append(Assumed("towers_not_counted", {"n": len(towers)}))
    if getattr(shape, "encoder_layers", 0) and setup.target_len is None:
        out.append(Assumed("target_len", {"seq": setup.seq_len}))
    if getattr(shape, "checkpoint_format", "") == "mxfp4":
        out.append(Assumed("mxfp4_dequantized"))
    w = wrapped(setup)
    if w.experts and setup.lora_dropout > 0:
        out.append(Assumed("paramwrapper_dropout", {"p": setup.lora_dropout}))
    return out
