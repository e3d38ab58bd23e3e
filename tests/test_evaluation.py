"""What evaluation holds beside training: the Trainer's kept logits and generation's KV cache."""
from __future__ import annotations

import pytest

from oomdoctor.estimate import Setup, estimate
from oomdoctor.estimate.dtypes import GIB
from oomdoctor.estimate.evaluation import evaluation
from test_estimate import LLAMA3_8B

V, S = 128256, 1024


def setup(**kw) -> Setup:
    base = dict(model=LLAMA3_8B, method="lora", seq_len=S, eval_batch_size=4, gpu_memory_gib=80)
    base.update(kw)
    return Setup(**base)


def test_nothing_is_kept_without_compute_metrics_or_with_prediction_loss_only():
    for kw in ({}, {"eval_compute_metrics": True, "eval_prediction_loss_only": True}):
        ev = evaluation(setup(eval_samples=1000, **kw), p=2)
        assert ev.kept_peak == ev.kept_before == ev.host == 0


def test_the_whole_evaluation_set_stays_on_the_gpu_and_doubles_at_the_concatenation():
    ev = evaluation(setup(eval_compute_metrics=True, eval_samples=1000), p=2)
    kept = 1000 * S * (V * 2 + 8)            # bf16 logits and int64 labels per token
    assert ev.kept_peak == 2 * kept
    assert ev.kept_before == kept - 4 * S * (V * 2 + 8)
    assert ev.host == 1000 * S * (V * 4 + 8)  # numpy has no bfloat16: float32 on the host
    est = estimate(setup(eval_compute_metrics=True, eval_samples=1000))
    assert est.peak_moment == "evaluation" and not est.fits
    assert est.breakdown["logits"] == pytest.approx(2 * kept / GIB)


def test_accumulation_steps_bound_the_gpu_and_move_the_rest_to_host_ram():
    ev = evaluation(setup(eval_compute_metrics=True, eval_samples=1000, eval_accumulation_steps=2), p=2)
    assert ev.steps_held == 2
    assert ev.kept_peak == 2 * (2 * 4) * S * (V * 2 + 8)
    assert ev.host == 2 * 1000 * S * (V * 4 + 8)     # old and new arrays while numpy concatenates
    est = estimate(setup(eval_compute_metrics=True, eval_samples=1000, eval_accumulation_steps=2))
    assert est.fits and est.host_ram_gib > ev.host / GIB


def test_argmax_keeps_a_token_id_instead_of_a_vocabulary_row():
    ev = evaluation(setup(eval_compute_metrics=True, eval_samples=1000, eval_preprocess_logits=True), p=2)
    assert ev.kept_peak == 2 * 1000 * S * 16 + 4 * S * V * 2   # ids and labels, plus the step's own logits


def test_every_rank_gathers_every_ranks_batch():
    one = evaluation(setup(eval_compute_metrics=True, eval_accumulation_steps=1), p=2)
    four = evaluation(setup(eval_compute_metrics=True, eval_accumulation_steps=1, num_gpus=4, strategy="ddp"), p=2)
    assert four.step_bytes == 4 * one.step_bytes


def test_unknown_evaluation_set_counts_one_step_and_leaves_the_bound_open():
    est = estimate(setup(eval_compute_metrics=True))
    assert est.eval_steps_held is None and est.eval_step_gib == pytest.approx(4 * S * (V * 2 + 8) / GIB)
    bounded = estimate(setup(eval_compute_metrics=True, eval_samples=40))
    assert bounded.eval_steps_held == 10


def test_generation_keeps_a_kv_cache_for_every_row_and_beam():
    ev = evaluation(setup(eval_generate=True, gen_new_tokens=512, gen_beams=4), p=2)
    rows, length = 4 * 4, S + 512
    cache = rows * length * 2 * 8 * 128 * 2 * 32       # keys and values, 8 KV heads × 128, bf16, 32 layers
    assert ev.generation == pytest.approx(cache + cache / 32 + rows * V * 8)
    est = estimate(setup(eval_generate=True, gen_new_tokens=512, gen_beams=4))
    assert "generation" in est.moments


def test_trainer_default_eval_batch_is_assumed_when_unstated():
    ev = evaluation(setup(eval_batch_size=None, eval_compute_metrics=True), p=2)
    assert ev.batch == 8            # TrainingArguments.per_device_eval_batch_size


def test_every_moment_of_the_step_reads_in_both_languages():
    from oomdoctor.knowledge import default

    texts = default().texts
    est = estimate(setup(eval_compute_metrics=True, eval_generate=True, gen_new_tokens=64))
    assert {"evaluation", "generation", "optimizer step"} <= set(est.moments)
    for name in est.moments:
        key = "moment." + name.replace(" ", "_")
        assert texts[key]["en"] and texts[key]["zh"], key
