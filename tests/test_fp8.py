"""FP8 training: what the source says is 8-bit and what is not, on every channel."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from oomdoctor.consultation import default
from oomdoctor.estimate import Setup, anatomy, estimate
from oomdoctor.estimate.dtypes import GIB
from oomdoctor.estimate.fp8 import fp8
from oomdoctor.named_inputs import EstimateInputError, estimate_reply
from test_estimate import LLAMA3_8B

ROOT = Path(__file__).resolve().parents[1]


def full(**kw) -> Setup:
    return Setup(**dict(dict(model=LLAMA3_8B, method="full", batch_size=1, seq_len=2048), **kw))


def test_no_fp8_backend_touches_the_model_states_or_the_logits():
    bf16 = estimate(full())
    for backend in ("torchao", "te"):
        est = estimate(full(fp8=backend))
        for moment in ("end of backward", "optimizer step"):
            assert est.moments[moment] == bf16.moments[moment]
        assert est.weights_gib == bf16.weights_gib


def test_transformer_engine_saves_fp8_inputs_and_fp8_weights_until_backward():
    h, q, inter, layers, tokens = 4096, 4096, 14336, 32, 2048
    f = fp8(full(fp8="te"), tokens, 2, layers)
    # q, k, v: three 8-bit copies for one 16-bit input; gate, up: two for one; o_proj: one beside SDPA's
    # own output; down: one 8-bit copy instead of the 16-bit product
    assert f.kept == ((3 - 2) * h + (2 - 2) * h + q + (1 - 2) * inter) * tokens * layers
    linear = sum(b.weights for b in anatomy.blocks(LLAMA3_8B))
    assert f.weight_copies == 2 * linear
    bf16, te = estimate(full()), estimate(full(fp8="te"))
    assert te.moments["end of forward"] - bf16.moments["end of forward"] == pytest.approx(
        (f.kept + f.weight_copies) / GIB)
    checkpointed = fp8(full(fp8="te", grad_checkpointing=True), tokens, 2, 1)
    assert checkpointed.weight_copies == 2 * linear / layers


def test_torchao_adds_only_one_layers_casts():
    f = fp8(full(fp8="torchao"), 2048, 2, 32)
    assert f.kept == f.weight_copies == 0
    assert 0 < f.backward < 0.25 * GIB


def test_the_fp8_input_on_rest_cli_and_config():
    base = {"model": "llama-3-8b", "method": "full", "gpu": "h100-80gb", "batch_size": 2, "seq_len": 2048}
    te = estimate_reply(dict(base, fp8="te"))
    assert te["estimate"]["per_gpu_gib"] > estimate_reply(base)["estimate"]["per_gpu_gib"]
    assert any(w["remedy"] == "fp8_torchao_backend" for w in te["whatif"])
    with pytest.raises(EstimateInputError):
        estimate_reply(dict(base, fp8="fp4"))
    out = subprocess.run([sys.executable, "-m", "oomdoctor", "estimate", "--json", "--model", "llama-3-8b",
                          "--method", "full", "--fp8", "torchao", "--lang", "zh"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    reply = json.loads(out.stdout)
    assert any("Float8Linear" in line and "高精度" in line for line in reply["estimate"]["derivation"])
    # LLaMA-Factory checkpoints by default; switched off, the activations the fp8 backend changes are large.
    said = default().diagnose("finetuning_type: full\nfp8: true\nfp8_backend: te\nmodel_name_or_path: "
                              "meta-llama/Meta-Llama-3-8B\ndisable_gradient_checkpointing: true\nCUDA out of memory.")
    assert {"name": "train.fp8", "value": "te"} in [{"name": f["name"], "value": f["value"]} for f in said["facts"]]
    assert any(r["id"] == "fp8_torchao_backend" for r in said["remedies"])
