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


# Gemma 3n text configs around E4B's (Gemma3nTextConfig's defaults): sizes, KV sharing, AltUp streams, LAuReL rank,
# per-layer widths, biases and untied embeddings each change the count the way transformers builds the model.
GEMMA3N_VARIANTS = [
    {},
    {"num_hidden_layers": 10, "num_kv_shared_layers": 5, "intermediate_size": [512] * 10, "hidden_size": 256,
     "vocab_size": 1000, "vocab_size_per_layer_input": 900},
    {"num_hidden_layers": 6, "num_kv_shared_layers": 0, "intermediate_size": 384, "hidden_size": 128, "head_dim": 32,
     "num_attention_heads": 4, "num_key_value_heads": 1, "altup_num_inputs": 2, "laurel_rank": 16,
     "hidden_size_per_layer_input": 64, "vocab_size": 500, "vocab_size_per_layer_input": 400,
     "attention_bias": True, "tie_word_embeddings": False},
]


@pytest.mark.parametrize("overrides", GEMMA3N_VARIANTS)
def test_gemma3n_language_model_and_its_linear_modules_match_transformers(overrides):
    import torch
    from transformers import Gemma3nForCausalLM, Gemma3nTextConfig

    from oomdoctor.catalog import from_hf_config

    with torch.device("meta"):
        model = Gemma3nForCausalLM(Gemma3nTextConfig(**overrides))
    shape = from_hf_config({"model_type": "gemma3n_text", **overrides})
    assert shape.param_count() == sum(p.numel() for p in model.parameters())
    # every nn.Linear but lm_head is one of the shape's linear layers (what LoRA all-linear reaches)
    linear = sum(m.weight.numel() + (m.bias.numel() if m.bias is not None else 0)
                 for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and n != "lm_head")
    assert shape.linear_params() == linear
