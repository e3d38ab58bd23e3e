"""Live check: every catalog count against transformers on the meta device.

Skipped unless transformers and torch are importable (bench/accuracy/.venv has
them; run ``bench/accuracy/.venv/bin/python -m pytest tests/test_catalog_meta.py``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from conftest import require

require("torch")
require("transformers")

from oomdoctor.catalog import load_models  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("param_counts", ROOT / "bench" / "accuracy" / "param_counts.py")
param_counts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(param_counts)  # type: ignore[union-attr]

MODELS = load_models()


@pytest.mark.parametrize("model_id", sorted(MODELS))
def test_catalog_matches_transformers(model_id):
    shape = MODELS[model_id]
    n, cls, mt = param_counts.count(shape)
    assert shape.param_count() == n, f"{model_id}: catalog {shape.param_count():,} vs {cls} {n:,}"


@pytest.mark.parametrize("model_id", ["llama-3-8b", "qwen2-57b-a14b", "deepseek-v2-lite", "phi-3.5-moe"])
def test_active_params_vs_expert_tensors(model_id):
    """Routed-expert parameters in transformers equal what the catalog drops for inactive experts."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    shape = MODELS[model_id]
    mt, kw = param_counts.tf_config(shape)
    kw.setdefault("pad_token_id", None)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(mt, **kw))
    routed = sum(p.numel() for n, p in model.named_parameters()
                 if ".experts." in n and "shared" not in n)
    ours = sum(l.params for l in shape.linear_layers() if l.kind == "expert")
    assert routed == ours
