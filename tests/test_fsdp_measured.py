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
