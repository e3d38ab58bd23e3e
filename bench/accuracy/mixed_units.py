"""What a layer keeps for backward when its FSDP unit mixes frozen weights and LoRA adapters (needs torch).

Under FSDP1 with ``use_orig_params=True`` and decoder-layer units that also
hold the adapters, every weight of a layer is a view of a flat parameter that
requires grad (``torch/distributed/fsdp/_flat_param.py``,
``_use_unsharded_views``), so autograd treats the frozen weights as trained:
each linear keeps its input, each norm its normalised input.  For autograd a
view of a parameter that requires grad is the same as a weight that requires
grad, so the probe runs the grid's LoRA cells in one process with every
decoder-layer parameter set to require grad (the root's embeddings, final norm
and lm_head stay frozen, as their own unit does), and holds what is alive at
the end of the forward pass, and one recomputed layer under checkpointing,
against the estimator's figures for the same set-up under FSDP with
``fsdp_mixed_units``.  The gradients themselves are measured on two ranks by
``fsdp_probe.py --mixed-units``.

Usage: python bench/accuracy/mixed_units.py [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import Cell, estimator_components, setup_for_cell  # noqa: E402

CELLS = (
    Cell("llama", "lora", batch=2, seq=64, lora_targets=("q_proj", "v_proj")),
    Cell("llama", "lora", dtype="bf16", autocast=True, batch=2, seq=64,
         lora_targets=("q_proj", "k_proj", "v_proj", "o_proj"), lora_dropout=0.1),
    Cell("qwen2", "lora", batch=2, seq=64, padded=True, lora_targets=("q_proj", "v_proj"), grad_checkpointing=True),
    Cell("mistral", "lora", attention="eager", batch=1, seq=64, lora_targets=("q_proj", "v_proj")),
)


@contextmanager
def layers_require_grad():
    """peft's get_peft_model, then every decoder-layer parameter made to require grad."""
    import peft

    plain = peft.get_peft_model

    def mixed(model, config, *args, **kwargs):
        wrapped = plain(model, config, *args, **kwargs)
        for name, param in wrapped.named_parameters():
            if ".layers." in name:
                param.requires_grad_(True)
        return wrapped

    peft.get_peft_model = mixed
    try:
        yield
    finally:
        peft.get_peft_model = plain


def measure(cell: Cell) -> dict:
    from measure_grid import run_cell

    with layers_require_grad():
        measured = run_cell(cell)
    est = estimator_components(setup_for_cell(cell).replace(strategy="fsdp", fsdp_mixed_units=True))
    plain = estimator_components(setup_for_cell(cell).replace(strategy="fsdp"))
    out = {"cell": cell.name}
    for key in ("activations", "recompute"):
        if getattr(measured, key):
            out[key] = {"measured": getattr(measured, key), "estimate": est[key], "estimate_unmixed": plain[key]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = [measure(cell) for cell in CELLS]
    if args.json:
        print(json.dumps(rows))
        return 0
    for row in rows:
        for key in ("activations", "recompute"):
            if key in row:
                r = row[key]
                print(f"{row['cell']:45s} {key:11s} measured {r['measured']:>11,.0f} B  estimate {r['estimate']:>11,.0f} B "
                      f"({(r['estimate'] - r['measured']) / r['measured']:+.1%}; without the mixed units "
                      f"{r['estimate_unmixed']:,.0f} B)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
