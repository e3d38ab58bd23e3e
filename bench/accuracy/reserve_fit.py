"""What the caching allocator reserves beyond the allocated peak, from the published runs that give two figures.

For each run of ``published.yaml`` with the peak allocated figure beside a peak
nvidia-smi (less the 0.5 GiB CUDA context) or peak reserved figure, the reserve
is the second figure minus the first, in GiB.  It is held against quantities
the estimator computes for the same set-up, to see which the reserve follows:

* the allocated peak itself (the single-GPU share, ``overhead.ALLOCATOR_RESERVE``);
* for sharded runs, the per-layer buffers gathered and reduce-scattered on a
  side stream (``Estimate.side_stream_gib``): the excess over the single-GPU
  share, summed over the runs, divided by those buffers summed, is
  ``overhead.SIDE_STREAM_RESERVE``;
* the activations, through the pairs of runs that differ only in the batch:
  the reserve's growth over the allocated peak's growth, sharded and not.

Pure Python (no torch).  Usage: python bench/accuracy/reserve_fit.py
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compare_published  # noqa: E402
from oomdoctor.estimate import estimate  # noqa: E402
from oomdoctor.estimate.overhead import ALLOCATOR_RESERVE, CUDA_CONTEXT_GIB  # noqa: E402


def pairs() -> list[dict[str, Any]]:
    """Every run that publishes the peak allocated figure and a second one, with the estimator's quantities."""
    by: dict[str, dict] = {}
    for row in compare_published.load_rows():
        by.setdefault(row["id"].removesuffix("-smi").removesuffix("-alloc"), {})[row["measured"]] = row
    out = []
    for key, pair in by.items():
        if "allocated" not in pair or not ({"nvidia-smi", "reserved"} & set(pair)):
            continue
        alloc = compare_published.measured_gib(pair["allocated"])
        if "nvidia-smi" in pair:
            other = compare_published.measured_gib(pair["nvidia-smi"])
            reserved, what = other - CUDA_CONTEXT_GIB, f"nvidia-smi {other:.2f} GiB"
        else:
            other = reserved = compare_published.measured_gib(pair["reserved"])
            what = f"reserved {other:.2f} GiB"
        setup = compare_published.setup_for(pair["allocated"])
        est = estimate(setup)
        out.append({"run": key, "strategy": pair["allocated"]["setup"].get("strategy", "single"),
                    "allocated": alloc, "second": what, "reserve": reserved - alloc,
                    "side_stream": est.side_stream_gib, "setup": setup})
    return out


def sharded(p: dict[str, Any]) -> bool:
    return p["side_stream"] > 0


def single_share(ps: list[dict[str, Any]]) -> float:
    """Median reserve over allocated of the unsharded runs."""
    return statistics.median(p["reserve"] / p["allocated"] for p in ps if not sharded(p))


def side_stream_copies(ps: list[dict[str, Any]]) -> tuple[float, float]:
    """The sharded runs' reserve beyond ALLOCATOR_RESERVE of their allocated peak, over their side-stream
    buffers: summed over the runs, and the median of the set-ups' ratios (runs differing only in the batch
    averaged into one set-up)."""
    runs = [p for p in ps if sharded(p)]
    excess = {p["run"]: p["reserve"] - ALLOCATOR_RESERVE * p["allocated"] for p in runs}
    total = sum(excess.values()) / sum(p["side_stream"] for p in runs)
    setups: dict[Any, list[float]] = {}
    for p in runs:
        setups.setdefault(p["setup"].replace(batch_size=1), []).append(excess[p["run"]] / p["side_stream"])
    return total, statistics.median(statistics.mean(v) for v in setups.values())


def batch_growth(ps: list[dict[str, Any]]) -> dict[str, list[tuple[str, float]]]:
    """For runs differing only in the batch: the reserve's growth over the allocated peak's growth, by whether
    the run is sharded.  Pairs whose allocated peak did not grow (the optimizer step's) are left out."""
    out: dict[str, list[tuple[str, float]]] = {"sharded": [], "single": []}
    by: dict[Any, list[dict[str, Any]]] = {}
    for p in ps:
        by.setdefault(p["setup"].replace(batch_size=1), []).append(p)
    for group in by.values():
        group.sort(key=lambda p: p["setup"].batch_size)
        for a, b in zip(group, group[1:]):
            grown = b["allocated"] - a["allocated"]
            if grown > 0.5:
                out["sharded" if sharded(a) else "single"].append(
                    (f"{a['run']} → b{b['setup'].batch_size}", (b["reserve"] - a["reserve"]) / grown))
    return out


def main() -> None:
    ps = pairs()
    print(f"{'run':32s} {'strategy':8s} {'alloc':>7s} {'reserve':>8s} {'share':>6s} {'buffers':>8s}")
    for p in ps:
        print(f"{p['run']:32s} {p['strategy']:8s} {p['allocated']:7.2f} {p['reserve']:8.2f} "
              f"{p['reserve'] / p['allocated']:6.1%} {p['side_stream']:8.2f}")
    print(f"\nunsharded runs: median reserve / allocated {single_share(ps):.1%} "
          f"({sum(not sharded(p) for p in ps)} runs)")
    total, median = side_stream_copies(ps)
    print(f"sharded runs: reserve beyond {ALLOCATOR_RESERVE:.0%} of allocated = {total:.2f} × the side-stream "
          f"buffers summed over {sum(sharded(p) for p in ps)} runs (median of the set-ups' ratios {median:.2f})")
    for kind, rows in batch_growth(ps).items():
        shares = [r for _, r in rows]
        print(f"batch doubled, {kind}: reserve grew by {', '.join(f'{r:+.0%}' for r in shares)} of the allocated "
              f"growth (median {statistics.median(shares):+.0%})")


if __name__ == "__main__":
    main()
