"""Re-measure a few grid cells on CPU and hold the estimator to them (runs only where torch is installed).

The full grid is ``bench/accuracy/measure_grid.py`` (minutes); these cells
cover one family each of fused projections (Phi-3), soft-capping and four norms
(Gemma 2), grouped-GEMM experts (Mixtral), a padded SDPA batch, LoRA with
dropout, checkpointing and autocast over fp32 weights, in a few seconds each.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import require

torch = require("torch")
require("transformers")
require("peft")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "accuracy"))

from common import Cell, estimator_components, setup_for_cell  # noqa: E402
from measure_grid import errors, run_cell  # noqa: E402

CELLS = [
    Cell("phi3", "full", batch=2, seq=64, padded=True, attention="sdpa"),
    Cell("gemma2", "lora", batch=2, seq=32, padded=True, attention="eager", lora_targets=("q_proj", "v_proj")),
    Cell("mixtral", "lora", batch=2, seq=64, padded=True, grad_checkpointing=True),
    Cell("llama", "lora", batch=2, seq=64, padded=True, lora_rank=16, lora_targets=("all-linear",),
         lora_dropout=0.05),
    Cell("llama", "full", dtype="fp32", autocast=True, batch=2, seq=32, padded=True),
    # a Pixtral tower whose block mask spans the batch's patches, and Mistral 3's patch merger
    Cell("mistral3", "lora", batch=2, seq=64, images=1, image_side=112, lora_targets=("all-linear",)),
    # Llama 3.2 Vision: a tiled encoder checkpointing leaves whole, cross-attention over the vision states
    Cell("mllama", "lora", dtype="bf16", batch=2, seq=128, images=1, image_side=56, grad_checkpointing=True,
         lora_targets=("all-linear",)),
]
TARGETS = {"params": 0.01, "grads": 0.01, "optimizer": 0.01, "activations": 0.10, "peak": 0.10}


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: c.name)
def test_cell_within_targets(cell):
    measured = run_cell(cell)
    est = estimator_components(setup_for_cell(cell))
    err = errors({k: v for k, v in vars(measured).items() if k != "notes"}, est, cell.grad_checkpointing)
    for key, limit in TARGETS.items():
        assert err[key] is not None and abs(err[key]) <= limit, f"{key}: {err[key]:+.2%}"
    if measured.saved is not None:
        assert abs(measured.saved - measured.activations) <= 8


@pytest.mark.parametrize("which", ["lora/bf16/sdpa/b1s64/gc", "lora/bf16/sdpa/b1s64/eval4"])
def test_gpu_measure_dry_run_agrees_with_the_estimate(tmp_path, which):
    """bench/accuracy/gpu_measure.py on CPU (two layers, tensor-level peak): the script a GPU session will run."""
    from dataclasses import replace

    import gpu_measure
    from oomdoctor.catalog import get_model

    shape = replace(get_model("qwen2.5-0.5b"), layers=2, max_position=4096)
    run = next(r for r in gpu_measure.runs(dry=True) if r.name == which)
    result = gpu_measure.measure(shape, run, steps=2, dry=True, tmp=tmp_path)
    assert abs(result["error"]["allocated"]) <= 0.02, result
    assert result["estimate"]["peak_moment"] == ("evaluation" if run.eval_steps else "start of backward")
