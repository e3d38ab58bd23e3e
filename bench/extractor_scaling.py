"""Extractor and redaction cost against input size, for a real log and for adversarial text.

For each kind of input and each size (1 KiB up to 10 MiB) it times every extractor
(and the redaction every message goes through) and prints seconds per MiB. Linear
growth shows as a flat s/MiB column; the last column of the summary is the ratio
of s/MiB at the largest size to s/MiB at 1 MiB (1.0 = linear; a quadratic pattern
would show ~10 at 10 MiB). It stops by itself: sizes are fixed and a time budget
(--budget, seconds) skips what is left once spent.

    .venv/bin/python bench/extractor_scaling.py            # full: about 2-5 minutes on 2 cores
    .venv/bin/python bench/extractor_scaling.py --quick    # up to 1 MiB, about a minute
"""
from __future__ import annotations

import argparse
import time

from common import MiB, TRACEBACK, Report, training_log

from oomdoctor import knowledge
from oomdoctor.extractors import registry
from oomdoctor.redaction import redact

KB = knowledge.default()
EXTRACTORS = registry()
NEEDS_KB = {"symptoms", "config_keys"}


def _repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


KINDS = {
    "real log": training_log,
    "10 MiB-style single line": lambda n: _repeat(TRACEBACK.replace("\n", " ") + " ", n),
    "digits": lambda n: _repeat("7", n),
    "spaces": lambda n: _repeat(" ", n),
    "letter a": lambda n: _repeat("a", n),
    "words": lambda n: _repeat("memory batch size gpu ", n),
    "Tried to allocate": lambda n: _repeat("Tried to allocate ", n),
    "-- flags": lambda n: _repeat("--", n),
    "braces": lambda n: _repeat("{", n),
    "unterminated quotes": lambda n: _repeat('"', n),
    "key=value": lambda n: _repeat("a=b ", n),
}
SIZES = {"1KiB": 1024, "64KiB": 64 * 1024, "1MiB": MiB, "4MiB": 4 * MiB, "10MiB": 10 * MiB}


def time_one(fn, text: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - start)
    return best


def steps() -> list[tuple[str, callable]]:
    out = [("redaction", lambda t: redact(t))]
    for extractor in EXTRACTORS:
        if extractor.name in NEEDS_KB:
            out.append((extractor.name, lambda t, e=extractor: list(e.run(t, KB))))
        else:
            out.append((extractor.name, lambda t, e=extractor: list(e.run(t))))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="sizes up to 1 MiB only")
    parser.add_argument("--budget", type=float, default=1500, help="seconds; what is left after is skipped")
    parser.add_argument("--kinds", default="", help="comma-separated subset of kinds")
    args = parser.parse_args()
    sizes = {k: v for k, v in SIZES.items() if not args.quick or v <= MiB}
    kinds = [k for k in KINDS if not args.kinds or k in args.kinds.split(",")]
    report = Report("extractor_scaling" + ("-quick" if args.quick else ""))
    report.say(f"# seconds per MiB (best of 3 below 1 MiB, one run above); budget {args.budget:.0f} s")
    started = time.monotonic()
    summary: list[tuple[str, str, float, float, str]] = []
    for kind in kinds:
        report.say(f"\n## {kind}")
        report.say(f"{'step':<26}" + "".join(f"{s:>12}" for s in sizes) + "   (s/MiB)")
        per_step: dict[str, dict[str, float]] = {}
        for size_name, size in sizes.items():
            if time.monotonic() - started > args.budget:
                report.say(f"   budget spent: {size_name} skipped")
                break
            text = KINDS[kind](size)
            repeats = 3 if size < MiB else 1
            for name, fn in steps():
                seconds = time_one(fn, text, repeats)
                per_step.setdefault(name, {})[size_name] = seconds / (len(text.encode()) / MiB)
        total: dict[str, float] = {}
        for name, row in per_step.items():
            report.say(f"{name:<26}" + "".join(f"{row.get(s, float('nan')):>12.4f}" for s in sizes))
            for s, v in row.items():
                total[s] = total.get(s, 0.0) + v
        report.say(f"{'ALL (s/MiB)':<26}" + "".join(f"{total.get(s, float('nan')):>12.4f}" for s in sizes))
        measured = [s for s in sizes if s in total]
        if "1MiB" in total and measured:
            last = measured[-1]
            # Among steps that matter (at least 0.01 s/MiB): tiny ones only show timer noise.
            big = [n for n in per_step if per_step[n].get("1MiB", 0) >= 0.01] or list(per_step)
            worst = max(big, key=lambda n: per_step[n].get(last, 0) / max(per_step[n].get("1MiB", 1e-9), 1e-9))
            ratio = per_step[worst][last] / max(per_step[worst]["1MiB"], 1e-9)
            summary.append((kind, last, total[last], total[last] / total["1MiB"], f"{worst} {ratio:.2f}"))
    report.say("\n## summary: cost per MiB at the largest size measured, and its ratio to the cost per MiB at 1 MiB")
    report.say(f"{'input':<26}{'largest':>8}{'s/MiB':>10}{'ratio':>8}   step (of those over 0.01 s/MiB) with the largest ratio")
    for kind, last, per_mib, ratio, worst in summary:
        report.say(f"{kind:<26}{last:>8}{per_mib:>10.3f}{ratio:>8.2f}   {worst}")
    report.say(f"\n# {time.monotonic() - started:.0f} s in all")
    report.save()


if __name__ == "__main__":
    main()
