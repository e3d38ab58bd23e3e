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
        # the estimator's figure for the frozen weights' gradient shard: what the rank keeps beyond its share
        # of the adapters' gradients
        assert _mixed_units_line_bytes() == row["fsdp"]["grads"] - row["single"]["grads"] // 2


def _mixed_units_line_bytes() -> float:
    """The estimate's derivation figure for the probe's set-up (bf16 throughout, LoRA r16 on q/k/v/o, two ranks)."""
    from oomdoctor.catalog import shape_from_config
    from oomdoctor.estimate import Setup, estimate
    from oomdoctor.estimate.dtypes import GIB

    setup = Setup(model=shape_from_config({"model_type": "llama", **fsdp_probe.SHAPE}), method="lora",
                  load_dtype="bf16", precision="fp32", adapter_fp32=False, lora_rank=16,
                  lora_targets=("q_proj", "k_proj", "v_proj", "o_proj"), strategy="fsdp", num_gpus=2,
                  batch_size=fsdp_probe.BATCH, seq_len=fsdp_probe.SEQ, grad_checkpointing=True,
                  fsdp_mixed_units=True)
    said = [ln for ln in estimate(setup).derivation if ln.key == "derive.sharding.fsdp_mixed_units"]
    assert len(said) == 1
    return round(said[0].params["gib"] * GIB)


def test_a_layer_in_a_mixed_unit_keeps_what_full_fine_tuning_keeps_beside_the_adapters():
    # every decoder-layer weight requires grad, as a view of the unit's flat parameter does: the estimate
    # for FSDP with mixed units equals what is alive after the forward, to within 0.5 %
    import mixed_units

    for cell in (mixed_units.CELLS[0], mixed_units.CELLS[2]):
        row = mixed_units.measure(cell)
        acts = row["activations"]
        assert abs(acts["estimate"] - acts["measured"]) <= 0.005 * acts["measured"], row
        if not cell.grad_checkpointing:
            assert acts["estimate_unmixed"] < 0.8 * acts["measured"]          # the mechanism is not small
        else:
            assert row["recompute"]["estimate"] > row["recompute"]["estimate_unmixed"]
