"""Turns per second the store can write: SQLite against PostgreSQL, at 1, 4 and 16 concurrent clients.

What is timed is the store's part of a turn, as the service does it: read the consultation's
state, store the next state, the message, its reply and the fact snapshot in one
transaction (`Store.turn`). The state and reply are those of a real consultation turn on a
CUDA OOM traceback, computed once beforehand, so the consultation's own CPU time (measured
in bench/http_latency.py) is left out. Each client is a separate process (as gunicorn
workers are) with its own consultation, turning as fast as it can for DURATION seconds.

SQLite runs as the service runs it (WAL, synchronous=NORMAL: a commit is not flushed to disk
until a checkpoint, safe against a process crash but not a power cut). PostgreSQL runs a
throw-away cluster on this machine with its defaults (fsync on, synchronous_commit on: every
commit is flushed to disk before it returns), reached over TCP on loopback.

    .venv/bin/python bench/store_throughput.py [--duration 5] [--clients 1,4,16]
"""
from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, TRACEBACK, Report

sys.path.insert(0, str(ROOT / "tests"))


def sample_turn() -> tuple[dict, dict, str]:
    """The state and reply of a real first turn, and its message."""
    from oomdoctor.consultation import State, default

    state, reply = default().take_turn(State(), TRACEBACK)
    return state.to_dict(), reply, TRACEBACK


def client(database: str, duration: float, start_at: float, sample: tuple[dict, dict, str], out) -> None:
    from oomdoctor.storage import Store

    state, reply, message = sample
    store = Store(database, migrate=False)
    cid = store.create({})
    while time.time() < start_at:
        time.sleep(0.001)
    done = 0
    latencies = []
    end = start_at + duration
    while time.time() < end:
        began = time.perf_counter()
        store.turn(cid, message, lambda raw: (state, reply))
        latencies.append(time.perf_counter() - began)
        done += 1
    store.close()
    out.put((done, latencies))


def measure(database: str, clients: int, duration: float, sample) -> tuple[float, float, float]:
    """(turns per second, p50 ms, p99 ms) with `clients` processes at once."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + 2.0 + 0.1 * clients  # every process started and connected before the clock runs
    procs = [ctx.Process(target=client, args=(database, duration, start_at, sample, out)) for _ in range(clients)]
    for p in procs:
        p.start()
    results = [out.get(timeout=duration + 120) for _ in procs]
    for p in procs:
        p.join()
    turns = sum(done for done, _ in results)
    latencies = sorted(x for _, lat in results for x in lat)
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    return turns / duration, p50, p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds each measurement runs")
    parser.add_argument("--clients", default="1,4,16", help="concurrent clients, comma-separated")
    args = parser.parse_args()
    counts = [int(c) for c in args.clients.split(",")]

    import pgcluster
    from oomdoctor.storage import Store
    from oomdoctor.storage.postgres import version

    report = Report("store_throughput")
    sample = sample_turn()
    size = len(str(sample[0])) + len(str(sample[1])) + len(sample[2])
    with tempfile.TemporaryDirectory() as folder, pgcluster.Cluster(durable=True) as cluster:
        report.say(f"# PostgreSQL {version(cluster.url())} (throw-away cluster, fsync and synchronous_commit on, "
                   f"TCP loopback); SQLite in WAL with synchronous=NORMAL")
        report.say(f"# one turn: read the state, store state + message + reply + facts (about {size // 1024} KiB "
                   f"of JSON); {args.duration:g} s per cell; each client a process with its own consultation")
        report.say()
        report.say("| clients | SQLite turns/s | SQLite p50 | SQLite p99 | PostgreSQL turns/s | PostgreSQL p50 "
                   "| PostgreSQL p99 |")
        report.say("|---|---|---|---|---|---|---|")
        for n in counts:
            cells = []
            for database in (str(Path(folder) / f"bench-{n}.sqlite3"), cluster.database("bench")):
                Store(database).close()  # migrate once, as the service's start does
                rate, p50, p99 = measure(database, n, args.duration, sample)
                cells += [f"{rate:,.0f}", f"{p50:.1f} ms", f"{p99:.1f} ms"]
            report.say(f"| {n} | " + " | ".join(cells) + " |")
    report.save()


if __name__ == "__main__":
    main()
