"""FSDP's root unit against a real two-rank FSDP run on CPU (runs where torch is installed)."""
from __future__ import annotations

import sys
from pathlib import Path

from conftest import require

require("torch")
require("transformers")
require("peft")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "accuracy"))

import fsdp_probe  # noqa: E402


def test_fsdp_holds_exactly_the_root_unit_beyond_one_process_at_the_end_of_forward():
    # reentrant checkpointing, as the PEFT FSDP examples run it: no activation is kept beyond one process's
    result = fsdp_probe.probe(reentrant=True)
    assert result["fsdp_extra_bytes"] == result["estimated_root_bytes"] > 0


def test_fsdp_holds_nothing_per_token_at_the_backward_peak():
    # the loss computed inside the FSDP root as transformers 4.45 did (fp32 logits in the output, shifted copy):
    # what FSDP holds beyond one process at the backward peak is the same at both lengths
    result = fsdp_probe.probe_backward(reentrant=True)
    first, second = result["rows"]
    assert second["tokens"] == 2 * first["tokens"]
    assert second["single_bytes"] > first["single_bytes"] * 1.5            # the peak itself follows the tokens
    assert first["fsdp_extra_bytes"] == second["fsdp_extra_bytes"] > 0


def test_units_mixing_frozen_weights_and_adapters_keep_the_frozen_weights_gradient_shards():
    # use_orig_params=True with decoder-layer units only (no peft policy): each rank keeps the gradient of its
    # whole shard, frozen weights included, where one process keeps the adapters' gradients only
    result = fsdp_probe.probe_mixed_units(reentrant=True)
    for row in result["rows"]:
        assert row["fsdp"]["grads"] == result["decoder_param_bytes"] // 2
        assert row["single"]["grads"] < row["fsdp"]["grads"] / 10
