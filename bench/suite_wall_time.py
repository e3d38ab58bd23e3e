"""The test suite's wall time, as `make test` runs it (pytest-xdist on every core), and where it goes.

Prints the wall time and the result line, the sum of every test's setup, call and teardown
(what the workers spent inside tests; wall x workers minus that is collection, start-up and idle
cores), the modules that cost most, and the slowest tests. Issue #16's target: the whole suite in
at most half of the 9 minutes it took on 2 cores before it ran in parallel. Other work on the
machine inflates every figure: compare the sums as well as the wall time.

    .venv/bin/python bench/suite_wall_time.py                      # the whole suite
    .venv/bin/python bench/suite_wall_time.py tests/test_server.py # some files
    .venv/bin/python bench/suite_wall_time.py --workers 1 -- -k slack
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import defaultdict

from common import ROOT, Report

DURATION = re.compile(r"^(\d+\.\d+)s (setup|call|teardown)\s+(\S+?\.py)::(.+)$")
RESULT = re.compile(r"^=* ?(\d+ (passed|failed|error).*) in [\d.]+s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", default="auto", help="pytest-xdist's -n (default: auto, one per core)")
    ap.add_argument("--top", type=int, default=20, help="how many of the slowest tests to list")
    ap.add_argument("pytest_args", nargs="*", help="files or options passed on to pytest")
    args = ap.parse_args(argv)

    command = [sys.executable, "-m", "pytest", "-q", "-n", args.workers, "-p", "no:cacheprovider",
               "--durations=0", "--durations-min=0", *args.pytest_args]
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - started

    phases: dict[str, float] = defaultdict(float)
    modules: dict[str, float] = defaultdict(float)
    tests: dict[str, float] = defaultdict(float)
    result = "no result line"
    for line in done.stdout.splitlines():
        if m := DURATION.match(line):
            seconds, phase, module, name = float(m[1]), m[2], m[3], m[4]
            phases[phase] += seconds
            modules[module] += seconds
            tests[f"{module}::{name}"] += seconds
        elif m := RESULT.match(line):
            result = m[1]
    workers = os.cpu_count() if args.workers == "auto" else int(args.workers)
    inside = sum(phases.values())

    report = Report("suite_wall_time")
    report.say(f"command: {' '.join(command[1:])}")
    report.say(f"wall time {wall:7.1f} s ({wall / 60:.2f} min); {result}; exit status {done.returncode}")
    report.say(f"inside tests {inside:7.1f} s in all (setup {phases['setup']:.1f}, call {phases['call']:.1f}, "
               f"teardown {phases['teardown']:.1f}); wall x {workers} workers - that = {wall * workers - inside:.1f} s "
               f"of collection, start-up and idle workers")
    report.say("")
    report.say("modules that cost most (setup + call + teardown):")
    for module, seconds in sorted(modules.items(), key=lambda kv: -kv[1])[:15]:
        report.say(f"  {seconds:7.1f} s  {module}")
    report.say("")
    report.say(f"the {args.top} slowest tests:")
    for test, seconds in sorted(tests.items(), key=lambda kv: -kv[1])[: args.top]:
        report.say(f"  {seconds:7.1f} s  {test}")
    if done.returncode not in (0, 5):
        report.say("")
        report.say("pytest's last lines:")
        for line in done.stdout.splitlines()[-15:]:
            report.say("  " + line)
    report.save()
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
