"""Regenerate the tables in bench/accuracy/README.md from the recorded data (pure Python, no torch).

Fills the blocks between ``<!-- generated:NAME -->`` and ``<!-- /generated -->``
markers: ``grid-summary`` and ``grid-cells`` from ``data/grid.json`` with the
estimator as it is now, ``published`` and ``published-summary`` from
``published.yaml`` through compare_published, and ``reserve`` from the runs
that publish two figures.  Run after measure_grid.py, after editing
published.yaml, or after changing the estimator.

Usage: python bench/accuracy/report.py [--check]
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compare_published  # noqa: E402
from common import Cell, estimator_components, setup_for_cell  # noqa: E402
from measure_grid import REPORTED, SHORT, TARGETS, errors  # noqa: E402

README = HERE / "README.md"
GRID = HERE / "data" / "grid.json"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.1f}"


def grid_rows() -> tuple[dict, list[dict]]:
    data = json.loads(GRID.read_text())
    rows = []
    for row in data["cells"]:
        cell = Cell.from_dict(row["cell"])
        est = estimator_components(setup_for_cell(cell))
        rows.append({"name": row["name"], "error": errors(row["measured"], est, cell.grad_checkpointing)})
    return data, rows


def grid_summary(data: dict, rows: list[dict]) -> str:
    v = data["versions"]
    out = [f"{len(rows)} cells measured {data['date']} with torch {v['torch']}, transformers {v['transformers']}, "
           f"peft {v['peft']} (Python {v['python']}); errors are (estimate − measured) / measured, recomputed "
           f"with the estimator as it is now.", "",
           "| quantity | cells | median \\|error\\| | max \\|error\\| | target | met |", "|---|---|---|---|---|---|"]
    for k in REPORTED:
        errs = sorted(abs(r["error"][k]) for r in rows if r["error"][k] is not None)
        if not errs:
            continue
        t = TARGETS.get(k)
        met = "–" if t is None else ("yes" if errs[-1] <= t else f"no ({sum(e <= t for e in errs)}/{len(errs)})")
        out.append(f"| {k} | {len(errs)} | {100 * statistics.median(errs):.2f}% | {100 * errs[-1]:.2f}% | "
                   f"{'–' if t is None else f'{100 * t:.0f}%'} | {met} |")
    return "\n".join(out)


def grid_cells(rows: list[dict]) -> str:
    head = "| cell | " + " | ".join(SHORT[k] for k in REPORTED) + " |"
    out = [head, "|---|" + "---|" * len(REPORTED)]
    for r in rows:
        out.append(f"| {r['name']} | " + " | ".join(_pct(r["error"][k]) for k in REPORTED) + " |")
    return "\n".join(out)


def published() -> tuple[str, str]:
    results, summary = compare_published.compare()
    table = compare_published.table(results, markdown=True)
    text = compare_published.summary_text(summary, markdown=True)
    return table, text


def reserve() -> str:
    import reserve_fit
    out = ["| run | strategy | allocated GiB | second figure | reserve beyond allocated | side-stream buffers GiB |",
           "|---|---|---|---|---|---|"]
    for p in reserve_fit.pairs():
        out.append(f"| {p['run']} | {p['strategy']} | {p['allocated']:.2f} | {p['second']} | "
                   f"{100 * p['reserve'] / p['allocated']:.1f}% | {p['side_stream']:.2f} |")
    return "\n".join(out)


def render(text: str) -> str:
    data, rows = grid_rows()
    table, summary = published()
    blocks = {"grid-summary": grid_summary(data, rows), "grid-cells": grid_cells(rows), "published": table,
              "published-summary": summary, "reserve": reserve()}
    for name, body in blocks.items():
        pattern = re.compile(rf"(<!-- generated:{name} -->\n)(?:(?!<!-- /generated -->).)*?(<!-- /generated -->)",
                             re.S)
        if not pattern.search(text):
            raise SystemExit(f"README.md has no block for {name}")
        text = pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if README.md is not up to date")
    args = ap.parse_args(argv)
    old = README.read_text(encoding="utf-8")
    new = render(old)
    if args.check:
        if new != old:
            print("bench/accuracy/README.md is out of date: run python bench/accuracy/report.py")
            return 1
        return 0
    README.write_text(new, encoding="utf-8")
    print("updated bench/accuracy/README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
