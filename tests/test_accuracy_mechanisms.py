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
