"""The step's memory mechanisms against CPU ground truth (issue #13).

Recorded (``bench/accuracy/data/mechanisms.json``, written by
``bench/accuracy/measure_mechanisms.py``) and re-estimated here without torch:
torchtune's chunked loss, activation offloading through ``save_on_cpu``, the
optimizer stepped inside backward.  Context parallelism by arithmetic on the
grid's measured single-rank cells.  Where torch is installed one case of each
kind is re-measured.
"""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "accuracy"
sys.path.insert(0, str(BENCH))

from common import Cell, setup_for_cell  # noqa: E402

from oomdoctor.estimate import anatomy, estimate  # noqa: E402
from oomdoctor.estimate.activations import activations, compute_dtypes  # noqa: E402
from oomdoctor.estimate.dtypes import GIB  # noqa: E402
from oomdoctor.estimate.experts import wrapped  # noqa: E402
from oomdoctor.estimate.logits import logits  # noqa: E402

DATA = json.loads((BENCH / "data" / "mechanisms.json").read_text())
GRID = json.loads((BENCH / "data" / "grid.json").read_text())


def _cases(kind: str) -> list[dict]:
    found = [c for c in DATA["cases"] if c["kind"] == kind]
    assert found, kind
    return found


@pytest.mark.parametrize("case", _cases("chunked"), ids=lambda c: c["name"])
def test_chunked_loss_keeps_what_torchtunes_loss_keeps(case):
    cell = Cell.from_dict(case["cell"])
    setup = setup_for_cell(cell)
    p, _, _ = compute_dtypes(setup)
    est = logits(cell.batch * cell.seq, anatomy.dims(setup.model).vocab, p, loss="chunked", chunks=case["chunks"])
    m = case["measured"]
    assert est.kept == pytest.approx(m["kept"], rel=0.01)
    assert est.backward == pytest.approx(m["backward"], rel=0.01)
    assert est.forward == pytest.approx(m["forward"], rel=0.05)
    full = logits(cell.batch * cell.seq, anatomy.dims(setup.model).vocab, p)
    assert m["backward"] <= 0.51 * full.backward      # what chunking buys at the start of backward (C >= 4)


@pytest.mark.parametrize("case", _cases("offload"), ids=lambda c: c["name"])
def test_offloading_moves_what_save_on_cpu_moves(case):
    cell = Cell.from_dict(case["cell"])
    acts = activations(setup_for_cell(replace(cell, padded=False)), cell.batch)
    m = case["measured"]
    moved = acts.in_layers + acts.outside_saved
    # what stays on the device is a sliver of what was kept
    assert m["device"] <= 0.05 * acts.kept + 200_000
    # the host holds every save's own copy: at least the distinct bytes moved, at most 1.4 times them
    assert moved <= m["host"] <= 1.4 * moved


@pytest.mark.parametrize("case", _cases("optim_bwd"), ids=lambda c: c["name"])
def test_optimizer_in_backward_holds_one_gradient_at_a_time(case):
    cell = Cell.from_dict(case["cell"])
    setup = setup_for_cell(replace(cell, padded=False))
    if case.get("chunks"):
        setup = replace(setup, loss="chunked", loss_chunks=case["chunks"])
    est = estimate(replace(setup, optimizer_in_backward=True))
    m = case["measured"]
    # with the chunked loss the peak is lm_head's gradient being summed over the chunks (three at once)
    assert est.allocated_gib * GIB == pytest.approx(m["peak"], rel=0.03 if case.get("chunks") else 0.05)
    plain = estimate(setup)
    assert est.allocated_gib < plain.allocated_gib


@pytest.mark.parametrize("case", _cases("compiled"), ids=lambda c: c["name"])
def test_compiled_layers_keep_what_inductor_keeps(case):
    """What compiling each decoder layer saves against eager, and the compiled total, as measured."""
    cell = Cell.from_dict(case["cell"])
    setup = replace(setup_for_cell(cell), packing=True)
    eager, compiled = (activations(replace(setup, compiled=c), cell.batch).kept for c in (False, True))
    m = case["measured"]
    assert eager - compiled == pytest.approx(m["saved_less"], rel=0.01)
    assert compiled == pytest.approx(m["compiled"], rel=0.05)
    assert m["compiled"] < 0.8 * m["eager"]         # the saving is real, not rounding


@pytest.mark.parametrize("case", _cases("compiled_chunked"), ids=lambda c: c["name"])
def test_compiled_chunked_loss_keeps_the_half_chunks(case):
    cell = Cell.from_dict(case["cell"])
    setup = setup_for_cell(cell)
    p, _, _ = compute_dtypes(setup)
    T, V = cell.batch * cell.seq, anatomy.dims(setup.model).vocab
    est = logits(T, V, p, loss="chunked", chunks=case["chunks"], compiled=True)
    assert est.kept == pytest.approx(case["measured"]["kept"], rel=0.01)
    assert case["measured"]["kept"] < logits(T, V, p, loss="chunked", chunks=case["chunks"]).kept


SDPA_ROWS = [r for r in GRID["cells"] if r["cell"]["attention"] == "sdpa" and not r["cell"]["padded"]
             and not r["cell"]["grad_checkpointing"] and r["cell"]["seq"] >= 32]


@pytest.mark.parametrize("row", SDPA_ROWS, ids=lambda r: r["name"])
@pytest.mark.parametrize("cp", [2, 4])
def test_a_context_parallel_rank_holds_what_one_rank_measured_for_its_share(row, cp):
    """A rank of a cp-way group running cp × s tokens holds what the grid measured for s tokens on one rank."""
    cell = Cell.from_dict(row["cell"])
    setup = setup_for_cell(cell)
    whole = replace(setup, seq_len=cp * cell.seq, num_gpus=cp, strategy="ddp", context_parallel=cp)
    local = activations(replace(whole, seq_len=-(-whole.seq_len // cp)), cell.batch)
    measured = row["measured"]["activations"]
    assert local.kept == pytest.approx(measured, rel=0.10)
    # and the full estimate holds them at that size, not at cp × s
    single = estimate(replace(whole, context_parallel=1))
    sharded = estimate(whole)
    at_share = estimate(replace(whole, context_parallel=1, seq_len=-(-whole.seq_len // cp)))
    assert sharded.breakdown["activations"] == pytest.approx(at_share.breakdown["activations"])
    if not cell.images and not wrapped(setup).merged_bytes:
        # everything kept follows the sequence here (the images and LoRA's merged expert stacks do not)
        assert sharded.breakdown["activations"] < single.breakdown["activations"] / (0.9 * cp) + 1e-9
    else:
        assert sharded.breakdown["activations"] <= single.breakdown["activations"]


def test_re_measured_on_cpu_where_torch_is_installed():
    from conftest import require

    require("torch")
    require("transformers")
    require("peft")
    import measure_mechanisms as mm

    for kind in ("chunked", "offload", "optim_bwd"):
        case = next(c for c in mm.CASES if c["kind"] == kind)
        result = mm.RUNNERS[kind](case)
        recorded = next(c for c in DATA["cases"] if c["name"] == case["name"])
        assert result["measured"] == recorded["measured"], case["name"]


QLORA = json.loads((BENCH / "data" / "qlora.json").read_text())


def _qlora_cases(kind: str) -> list[dict]:
    found = [c for c in QLORA["cases"] if c["kind"] == kind]
    assert found, kind
    return found


def _qlora_setup(case: dict):
    import measure_mechanisms as mm

    return mm.qlora_setup(dict(case, cell=Cell.from_dict(case["cell"])))


@pytest.mark.parametrize("case", [c for c in _qlora_cases("qlora") if "per_layer" in c["measured"]],
                         ids=lambda c: c["name"])
def test_a_quantised_layer_saves_what_bitsandbytes_and_peft_save(case):
    """After prepare_model_for_kbit_training the norms are fp32, bitsandbytes returns its input's dtype, and the
    MLP's gate, up and SiLU outputs are saved in fp32; lm_head, left fp32, is multiplied by a saved half copy."""
    setup = _qlora_setup(case)
    cell = Cell.from_dict(case["cell"])
    acts = activations(setup, cell.batch)
    m = case["measured"]
    assert acts.per_layer == pytest.approx(m["per_layer"], rel=0.01)
    adapters = sum(ln.params["bytes"] * ln.params["count"] for ln in acts.lines
                   if ln.key.endswith("activations.adapter_copies"))
    assert acts.weight_copies - adapters == m["lm_head_copy"]
    plain = activations(replace(setup, kbit_fp32_upcast=False, kbit_head_bf16=False), cell.batch)
    if setup.kbit_fp32_upcast:
        d = anatomy.dims(setup.model)
        # the three fp32 MLP tensors are what the upcast adds inside a layer (2 B more per value each)
        assert m["per_layer"] - next(c for c in _qlora_cases("qlora") if c["name"] == "qlora/none/b2s64")[
            "measured"]["per_layer"] == pytest.approx(3 * 2 * d.intermediate, rel=0.01)
        assert acts.per_layer > plain.per_layer


@pytest.mark.parametrize("case", [c for c in _qlora_cases("qlora") if "backward_rise" in c["measured"]],
                         ids=lambda c: c["name"])
def test_the_recomputed_quantised_layer_peaks_as_measured(case):
    """Checkpointing, reentrant or not: the recomputed layer's saved set with the MLP's gradients, without the
    tensor that ended the recomputation and without the dequantised weight (gone by then)."""
    setup = _qlora_setup(case)
    acts = activations(setup, Cell.from_dict(case["cell"]).batch)
    peak = max(acts.recompute, acts.recompute - acts.recompute_tail + acts.backward_working)
    m = case["measured"]["backward_rise"]
    assert m <= peak <= 1.12 * m
    assert acts.recompute + acts.backward_working > 1.15 * m      # the sum of both, as counted before, is not


@pytest.mark.parametrize("case", _qlora_cases("moe_loop"), ids=lambda c: c["name"])
def test_looped_experts_run_backward_one_expert_at_a_time(case):
    share = 3 * 4 * case["intermediate"] * case["tokens"] * case["top_k"] / case["experts"]
    m = case["measured"]["backward_rise"]
    assert m == pytest.approx(share, rel=0.05)
    assert m < 2 * share < case["experts"] * share


def test_unfused_experts_count_one_experts_gradients():
    """transformers 4's looped experts go through backward one at a time; transformers 5's grouped GEMM at once."""
    from oomdoctor.catalog import get_model
    from oomdoctor.estimate import Setup

    kw = dict(method="lora", load_dtype="bf16", precision="bf16", batch_size=2, seq_len=4096, grad_checkpointing=True,
              attention="flash", packing=True)
    mixtral = get_model("mixtral-8x7b")
    looped = activations(Setup(model=mixtral.replace(experts_fused=False), **kw), 2)
    grouped = activations(Setup(model=mixtral, **kw), 2)
    d = anatomy.dims(mixtral)
    tokens, p = 2 * 4096, 2
    attention = p * (d.q_dim + 2 * d.kv_dim) + 4 * d.q_dim
    one_expert = 3 * p * d.moe_intermediate * d.experts_active / d.experts
    assert looped.backward_working == pytest.approx(tokens * (2 * p * d.hidden + max(one_expert, attention)))
    assert grouped.backward_working == pytest.approx(
        tokens * (2 * p * d.hidden + 3 * p * d.moe_intermediate * d.experts_active))


def test_re_measured_on_bitsandbytes_cpu_backend():
    from conftest import require
    require("bitsandbytes")  # installed by make test in CI (bench/accuracy/requirements.txt), so never skipped there
    import measure_mechanisms as mm

    case = next(c for c in mm.QLORA_CASES if c["name"] == "qlora/kbit/b2s64")
    result = mm.run_qlora(case)
    recorded = next(c for c in QLORA["cases"] if c["name"] == case["name"])
    assert result["measured"] == recorded["measured"]
