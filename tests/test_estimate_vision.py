"""Vision towers in the estimate beyond Qwen's and LLaVA's: Pixtral (Mistral 3) and Llama 3.2 Vision (Mllama)."""
from __future__ import annotations

import pytest

from conftest import require
from oomdoctor.catalog import get_model
from oomdoctor.estimate import Setup, estimate
from oomdoctor.estimate.activations import activations
from oomdoctor.estimate.vision import attention_mask_bytes, cross_attention, image_tokens, tower_activations

MISTRAL3 = get_model("mistral-small-3.1-24b")
MLLAMA = get_model("llama-3.2-11b-vision")


@pytest.mark.parametrize("side, tokens, patches", [
    # ceil(side / 28) merged rows and columns, each row closed by [IMG_BREAK] / [IMG_END]; 2x2 patches a token
    (28, 1 * 2, 2 * 2),
    (448, 16 * 17, 32 * 32),
    (500, 18 * 19, 36 * 36),
    # the longest side is held to 1540 (55 merged rows)
    (4000, 55 * 56, 110 * 110),
])
def test_pixtral_image_tokens_follow_the_resolution_up_to_its_image_size(side, tokens, patches):
    assert image_tokens(MISTRAL3.vision, side) == (tokens, patches)


def test_mllama_encodes_every_tile_whatever_the_image_and_puts_one_token_in_the_text():
    # 4 tiles of 560 px: 40x40 patches and a CLS token, padded to 1608 positions
    for side in (200, 560, 3000):
        assert image_tokens(MLLAMA.vision, side) == (1, 4 * 1608)


def test_pixtral_mask_spans_the_whole_batch_of_patches_quadratically():
    one = attention_mask_bytes(MISTRAL3.vision, 1, 1000, 2)
    assert one == 2 * 1000 ** 2
    assert attention_mask_bytes(MISTRAL3.vision, 2, 1000, 2) == 4 * one      # one sequence for all images
    # Mllama's mask is per image: two images, twice the bytes
    assert attention_mask_bytes(MLLAMA.vision, 2, 6432, 2) == 2 * attention_mask_bytes(MLLAMA.vision, 1, 6432, 2)


def test_a_frozen_tower_keeps_only_the_pixels():
    s = Setup(model=MISTRAL3, method="lora", lora_targets=("q_proj", "v_proj"), load_dtype="bf16", seq_len=2048,
              image_size=448)
    # q_proj and v_proj are the tower's names too: peft puts adapters there, so its blocks keep tensors
    assert tower_activations(s, 1).recompute == 0 and tower_activations(s, 1).kept > tower_activations(s, 1).inputs
    frozen = s.replace(lora_targets=("gate_proj",), method="full", freeze_vision=True)
    act = tower_activations(frozen, 1)
    assert act.kept == act.inputs == 4 * 3 * (32 * 14) ** 2


def test_cross_attention_grows_with_the_images_a_row_reads():
    base = Setup(model=MLLAMA, method="lora", lora_targets=("all-linear",), load_dtype="bf16", seq_len=1024)
    one, two = cross_attention(base, 1), cross_attention(base.replace(images_per_sample=2), 1)
    assert one is not None and two[0] > 1.5 * one[0]
    # a Llama decoder without cross-attention layers has none
    assert cross_attention(Setup(model=get_model("llama-3.1-8b"), method="lora"), 1) is None
    # and the whole estimate carries it
    acts = activations(base, 1)
    assert any(l.key == "derive.activations.cross_attention" for l in acts.lines)


def test_llama_3_2_vision_checkpointing_leaves_its_encoder_whole():
    s = Setup(model=MLLAMA, method="full", load_dtype="bf16", seq_len=1024)
    plain, gc = tower_activations(s, 1), tower_activations(s.replace(grad_checkpointing=True), 1)
    assert gc.kept == plain.kept and gc.recompute == 0
    m3 = Setup(model=MISTRAL3, method="full", load_dtype="bf16", seq_len=1024, image_size=448)
    assert tower_activations(m3.replace(grad_checkpointing=True), 1).kept < tower_activations(m3, 1).kept


def test_estimates_run_for_the_new_families():
    for model in (MISTRAL3, MLLAMA):
        est = estimate(Setup(model=model, method="lora", load_dtype="bf16", batch_size=2, seq_len=2048))
        assert est.per_gpu_gib > est.weights_gib > 0 and est.total_params == model.param_count()
        assert est.breakdown["activations"] > 0


LLAVA_NEXT = get_model("llava-v1.6-mistral-7b")


def test_llava_next_image_tokens_are_the_processors_for_any_width_and_height():
    """The anyres count against transformers' own LlavaNextProcessor arithmetic and the views its model encodes."""
    require("transformers")
    from types import SimpleNamespace

    from transformers.models.llava_next.modeling_llava_next import image_size_to_num_patches
    from transformers.models.llava_next.processing_llava_next import LlavaNextProcessor

    from oomdoctor.estimate.vision import anyres_grid

    tower = LLAVA_NEXT.vision
    pinpoints = [list(p) for p in tower.grid_pinpoints]
    proc = SimpleNamespace(image_processor=SimpleNamespace(image_grid_pinpoints=pinpoints), patch_size=tower.patch,
                           num_additional_image_tokens=1)
    proc._get_unpadded_features = lambda *a: LlavaNextProcessor._get_unpadded_features(proc, *a)
    for height in range(40, 2400, 71):
        for width in range(40, 2400, 89):
            grid = anyres_grid(tower, height, width)
            # "default" feature selection drops each view's CLS feature: one token less than the features
            assert grid.tokens == LlavaNextProcessor._get_number_of_features(proc, height, width, 336, 336) - 1
            assert grid.views == image_size_to_num_patches((height, width), pinpoints, tower.image_size)


def test_llava_next_672_square_images_are_a_2x2_grid_plus_the_whole_view():
    tokens, patches = image_tokens(LLAVA_NEXT.vision, 672)
    # 48x48 features of the four tiles, a newline per row, 24x24 of the whole view
    assert tokens == 48 * 48 + 48 + 24 * 24 == 2928
    assert patches == 5 * 577
    # a frozen tower keeps the batch's pixel_values (five 336-px views an image, float32) and, as the projector
    # still trains, its input (576 features a view of 1024), GELU's input and linear_2's (4096 each), in bf16
    s = Setup(model=LLAVA_NEXT, method="full", freeze_vision=True, load_dtype="bf16", seq_len=4096, image_size=672)
    act = tower_activations(s, 1)
    assert act.inputs == 4 * 5 * 3 * 336 ** 2
    assert act.kept - act.inputs == 5 * 576 * 2 * (1024 + 2 * 4096)
    # under LoRA nothing in the tower or projector trains: the pixels alone
    lora = tower_activations(s.replace(method="lora", lora_targets=("q_proj", "v_proj")), 1)
    assert lora.kept == lora.inputs
    # trained, the tower keeps tensors for every one of the 2,885 positions
    assert tower_activations(s.replace(freeze_vision=False), 1).kept > 100 * act.inputs


def test_llava_next_states_the_grid_it_assumed_in_both_languages():
    from oomdoctor.knowledge import default

    kb = default()
    est = estimate(Setup(model=LLAVA_NEXT, method="lora", load_dtype="bf16", seq_len=4096, image_size=672))
    grid = [a for a in est.assumptions if a.key == "anyres_grid"]
    assert len(grid) == 1 and grid[0].params["tokens"] == 2928 and grid[0].params["views"] == 5
    for lang in ("en", "zh"):
        text = kb.text("assume.anyres_grid", lang, **grid[0].params)
        assert "672×672" in text and "2×2" in text and "2928" in text
    # the tokens follow the resolution, so a consultation asks for it when the tower trains
    assert est.image_tokens_vary
    assert not estimate(Setup(model=get_model("llava-1.5-7b"), method="lora", load_dtype="bf16",
                              seq_len=1024)).image_tokens_vary


# The modules LLaMA-Factory's freeze_vision_tower leaves frozen (its composite-model registry): the whole tower for
# LLaVA, Gemma 3, Mistral 3 and Mllama; Qwen's visual blocks and patch embedding, not visual.merger (Qwen3-VL's
# position table and deepstack mergers freeze with the tower).
FROZEN_MODULES = {
    "llava-v1.6-mistral-7b": ("model.vision_tower.",),
    "qwen2.5-vl-7b": ("model.visual.patch_embed", "model.visual.blocks"),
    "qwen3-vl-2b": ("model.visual.pos_embed", "model.visual.patch_embed", "model.visual.blocks",
                    "model.visual.deepstack_merger_list"),
    "gemma-3-4b": ("model.vision_tower.",),
}


@pytest.mark.parametrize("model_id", sorted(FROZEN_MODULES))
def test_a_frozen_tower_leaves_the_trained_parameters_as_transformers_counts_them(model_id):
    require("torch")
    require("transformers")
    import importlib.util
    import warnings
    from pathlib import Path

    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    from oomdoctor.estimate.trainable import trainable

    spec = importlib.util.spec_from_file_location(
        "param_counts", Path(__file__).resolve().parents[1] / "bench" / "accuracy" / "param_counts.py")
    counts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(counts)
    shape = get_model(model_id)
    mt, kw = counts.from_catalog_config(shape)
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        model = AutoModelForImageTextToText.from_config(AutoConfig.for_model(mt, pad_token_id=None, **kw))
    trained = sum(p.numel() for name, p in model.named_parameters()
                  if not name.startswith(FROZEN_MODULES[model_id]))
    setup = Setup(model=shape, method="full", load_dtype="bf16", freeze_vision=True)
    assert trainable(setup).params == trained
    assert trainable(setup.replace(freeze_vision=False)).params == shape.param_count()


def test_a_frozen_tower_read_from_a_config_reaches_the_estimate():
    from oomdoctor.estimate.from_facts import setup_from_facts

    facts = {"model.name": "llava-v1.6-mistral-7b", "train.method": "full", "model.load_dtype": "bf16",
             "train.seq_len": 4096, "train.image_size": 672}
    thawed, _ = setup_from_facts(facts)
    frozen, _ = setup_from_facts({**facts, "train.freeze_vision": True})
    assert frozen.freeze_vision and not thawed.freeze_vision
    a, b = estimate(thawed), estimate(frozen)
    tower = LLAVA_NEXT.vision
    assert a.trainable_params - b.trainable_params == tower.params - tower.projector_params
    # the breakdown is the peak moment's, which moves (backward when the tower trains, the optimizer step when not)
    assert b.per_gpu_gib < a.per_gpu_gib
    assert any(l.key == "derive.trainable.vision_frozen" for l in b.derivation)


INTERNVL = get_model("internvl2.5-1b")


def test_internvl_tiles_are_transformers_grid_for_any_width_and_height():
    require("PIL")
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import get_optimal_tiled_canvas

    from oomdoctor.estimate.vision import internvl_tiles

    tower = INTERNVL.vision
    assert tower.dynamic_tiles == (1, 12) and tower.thumbnail and tower.tokens_per_image == 256
    for height in range(30, 4000, 97):
        for width in range(30, 4000, 113):
            cols, rows, tiles = internvl_tiles(tower, height, width)
            assert (cols, rows) == tuple(get_optimal_tiled_canvas((height, width), (448, 448), 1, 12))
            assert tiles == cols * rows + (1 if cols * rows > 1 else 0)


def test_internvl_image_tokens_follow_the_tiles_and_the_grid_is_stated():
    from oomdoctor.knowledge import default

    # one 448-px tile is 32x32 patches, pixel-shuffled 2x2 into 256 tokens; 896 px is 2x2 tiles and a thumbnail
    assert image_tokens(INTERNVL.vision, 448) == (256, 1025)
    assert image_tokens(INTERNVL.vision, 896) == (5 * 256, 5 * 1025)
    est = estimate(Setup(model=INTERNVL, method="full", load_dtype="bf16", seq_len=4096, image_size=896))
    said = [a for a in est.assumptions if a.key == "dynamic_tiles"]
    assert len(said) == 1 and said[0].params["tiles"] == 5 and est.image_tokens_vary
    for lang in ("en", "zh"):
        assert "2×2" in default().text("assume.dynamic_tiles", lang, **said[0].params)
