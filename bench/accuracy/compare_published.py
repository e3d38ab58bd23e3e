"""Published peak-memory measurements against OOM Doctor's estimate and the simple rules other tools use.

Reads ``bench/accuracy/published.yaml`` (one row per published figure: source,
what was measured, the set-up, the figure), estimates each set-up and compares
the measured figure with the matching estimate field: ``allocated_gib`` for
``torch.cuda.max_memory_allocated``, ``reserved_gib`` for
``max_memory_reserved``, ``per_gpu_gib`` for nvidia-smi.  Beside it, the error
of ``accelerate estimate-memory``'s rule and of gpu_poor's formula
(``other_rules.py``) on the same row.  Pure Python (no torch).  The targets
(issue #13) on the in-scope rows: a median absolute error <= 5 %, no row worse
than 15 %, and closer than both other rules on every row; the summary line says
which of the three are met.  (Issue #3's older bounds, 10 % and 25 %, are what
``tests/test_accuracy.py`` still asserts.)

Usage::

    python bench/accuracy/compare_published.py [--all] [--markdown] [--write]

``--write`` stores the table in ``bench/accuracy/data/published.json``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from oomdoctor.catalog import get_model  # noqa: E402
from oomdoctor.estimate import Setup, estimate  # noqa: E402
from other_rules import accelerate_rule, gpu_poor_rule  # noqa: E402

DATA = HERE / "published.yaml"
OUT = HERE / "data" / "published.json"
UNITS = {"B": 1.0, "MiB": 2 ** 20, "GiB": 2 ** 30, "MB": 1e6, "GB": 1e9}
FIELD = {"allocated": "allocated_gib", "reserved": "reserved_gib", "nvidia-smi": "per_gpu_gib"}
TARGET_MEDIAN, TARGET_MAX = 0.05, 0.15          # issue #13; the third target: closest on every row


def load_rows(path: Path = DATA) -> list[dict[str, Any]]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))["rows"]


def setup_for(row: dict[str, Any]) -> Setup:
    kw = dict(row["setup"])
    kw["model"] = get_model(kw["model"])
    if kw.pop("experts_fused", True) is False:       # measured on transformers 4: one nn.Linear per expert
        kw["model"] = kw["model"].replace(experts_fused=False)
    for key in ("lora_targets", "modules_to_save"):
        if key in kw:
            kw[key] = tuple(kw[key])
    return Setup(**kw)


def measured_gib(row: dict[str, Any]) -> float:
    return float(row["figure"]) * UNITS[row["unit"]] / 2 ** 30


def compare_row(row: dict[str, Any]) -> dict[str, Any]:
    setup = setup_for(row)
    est = estimate(setup)
    ours = getattr(est, FIELD[row["measured"]])
    meas = measured_gib(row)
    shape = setup.model
    acc = accelerate_rule(shape.param_count(), setup.load_dtype, setup.method)
    poor = gpu_poor_rule(vocab=shape.vocab, hidden=shape.hidden, heads=shape.heads, intermediate=shape.intermediate,
                         layers=shape.layers, method=setup.method, load_dtype=setup.load_dtype,
                         optimizer=setup.optimizer, batch=setup.batch_size, seq=setup.seq_len,
                         grad_checkpointing=setup.grad_checkpointing)
    return {
        "id": row["id"], "scope": row.get("scope", "in"), "measured": row["measured"], "gpu": row.get("gpu", ""),
        "measured_gib": meas, "ours_gib": ours, "accelerate_gib": acc, "gpu_poor_gib": poor,
        "ours_err": (ours - meas) / meas, "accelerate_err": (acc - meas) / meas, "gpu_poor_err": (poor - meas) / meas,
        "peak_moment": est.peak_moment, "source": row["source"]["url"], "row": row.get("row", ""),
        "ambiguous": row.get("ambiguous", ""), "why_out": row.get("why_out", ""),
    }


def summarise(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    out = {}
    for name in ("ours", "accelerate", "gpu_poor"):
        errs = [abs(r[f"{name}_err"]) for r in results]
        if errs:
            out[name] = {"rows": len(errs), "median_abs": statistics.median(errs), "max_abs": max(errs)}
    return out


def compare(path: Path = DATA) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    results = [compare_row(r) for r in load_rows(path)]
    inside = [r for r in results if r["scope"] == "in"]
    by_source: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_source.setdefault(r["source"], []).append(r)
    wins = sum(abs(r["ours_err"]) < min(abs(r["accelerate_err"]), abs(r["gpu_poor_err"])) for r in inside)
    return results, {"in_scope": summarise(inside), "all": summarise(results),
                     "by_source": {src: summarise(rows)["ours"] | {"scope": rows[0]["scope"]}
                                   for src, rows in by_source.items()},
                     "in_scope_rows_closest": {"ours": wins, "of": len(inside)}}


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def table(results: list[dict[str, Any]], markdown: bool = False) -> str:
    head = ["row", "scope", "measured", "figure GiB", "ours GiB", "ours err", "accelerate err", "gpu_poor err"]
    lines = []
    if markdown:
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
    else:
        lines.append(f"{'row':44} {'scope':5} {'measured':10} {'figure':>8} {'ours':>8} {'ours':>8} {'accel.':>8} "
                     f"{'gpu_poor':>8}")
    for r in results:
        cells = [r["id"], r["scope"], r["measured"], f"{r['measured_gib']:.2f}", f"{r['ours_gib']:.2f}",
                 _pct(r["ours_err"]), _pct(r["accelerate_err"]), _pct(r["gpu_poor_err"])]
        if markdown:
            lines.append("| " + " | ".join(cells) + " |")
        else:
            lines.append(f"{cells[0]:44} {cells[1]:5} {cells[2]:10} {cells[3]:>8} {cells[4]:>8} {cells[5]:>8} "
                         f"{cells[6]:>8} {cells[7]:>8}")
    return "\n".join(lines)


def summary_text(summary: dict[str, Any], markdown: bool = False) -> str:
    lines = []
    if markdown:
        lines += ["| rows | rule | n | median abs error | max abs error |", "|---|---|---|---|---|"]
    for scope in ("in_scope", "all"):
        for name, v in summary[scope].items():
            label = {"ours": "OOM Doctor", "accelerate": "accelerate estimate-memory", "gpu_poor": "gpu_poor"}[name]
            if markdown:
                lines.append(f"| {scope.replace('_', ' ')} | {label} | {v['rows']} | {100 * v['median_abs']:.1f}% | "
                             f"{100 * v['max_abs']:.1f}% |")
            else:
                lines.append(f"{scope:9} {label:28} rows {v['rows']:3}  median |err| {100 * v['median_abs']:6.1f}%  "
                             f"max |err| {100 * v['max_abs']:6.1f}%")
    c = summary["in_scope_rows_closest"]
    lines.append("")
    lines.append(f"OOM Doctor is the closest of the three on {c['ours']} of the {c['of']} in-scope rows.")
    lines.append("")
    if markdown:
        lines += ["| source | scope | rows | OOM Doctor median \\|error\\| | max \\|error\\| |", "|---|---|---|---|---|"]
    for src, v in summary["by_source"].items():
        if markdown:
            lines.append(f"| {src} | {v['scope']} | {v['rows']} | {100 * v['median_abs']:.1f}% | "
                         f"{100 * v['max_abs']:.1f}% |")
        else:
            lines.append(f"{v['scope']:3} rows {v['rows']:3} median |err| {100 * v['median_abs']:6.1f}% max "
                         f"{100 * v['max_abs']:6.1f}%  {src}")
    return "\n".join(lines)


def targets_met(results: list[dict[str, Any]], summary: dict[str, Any]) -> dict[str, Any]:
    """Issue #13's three targets on the in-scope rows, each with its figure and whether it is met."""
    ins = summary["in_scope"]["ours"]
    closest = summary["in_scope_rows_closest"]
    over = [r for r in results if r["scope"] == "in" and abs(r["ours_err"]) > TARGET_MAX]
    return {"median": (ins["median_abs"], ins["median_abs"] <= TARGET_MEDIAN),
            "worst": (ins["max_abs"], ins["max_abs"] <= TARGET_MAX),
            "closest": ((closest["ours"], closest["of"]), closest["ours"] == closest["of"]),
            "over_max": [(r["id"], r["ours_err"]) for r in over],
            "not_closest": [(r["id"], r["ours_err"]) for r in results if r["scope"] == "in"
                            and abs(r["ours_err"]) >= min(abs(r["accelerate_err"]), abs(r["gpu_poor_err"]))]}


def targets_text(results: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    t = targets_met(results, summary)
    yes = {True: "met", False: "NOT met"}
    (ours, of), closest_ok = t["closest"]
    lines = [f"issue #13 targets on the in-scope rows: median |err| <= {TARGET_MEDIAN:.0%}: "
             f"{100 * t['median'][0]:.1f}% {yes[t['median'][1]]}; worst row <= {TARGET_MAX:.0%}: "
             f"{100 * t['worst'][0]:.1f}% {yes[t['worst'][1]]}; closest of the three on every row: "
             f"{ours} of {of} {yes[closest_ok]}"]
    for rid, err in t["over_max"]:
        lines.append(f"  over {TARGET_MAX:.0%}: {rid} {_pct(err)}")
    for rid, err in t["not_closest"]:
        lines.append(f"  a simple rule is closer: {rid} (ours {_pct(err)})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    results, summary = compare()
    print(table(results, args.markdown))
    print()
    print(summary_text(summary, args.markdown))
    print()
    print(targets_text(results, summary))
    if args.write:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps({"rows": results, "summary": summary}, indent=1) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
