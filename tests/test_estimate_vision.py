"""Vision towers in the estimate beyond Qwen's and LLaVA's: Pixtral (Mistral 3) and Llama 3.2 Vision (Mllama)."""
from __future__ import annotations

import pytest

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
