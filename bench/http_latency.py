"""Latency and throughput of a consultation turn under gunicorn, each against /healthz of the same server.

One gunicorn (the project's gunicorn.conf.py, 2 workers x 2 threads by default, the
production 60 s timeout) on loopback. For each payload (a typical traceback, a 1 MiB
log, a 10 MiB log) two phases:

- alone: one client, requests one after another; /healthz the same way just before;
- under load: --clients clients send the payload as fast as they get answers (each
  request starts a consultation: POST /api/v1/consultations) while one probe client
  asks /healthz every 50 ms. Both latencies come from the same server in the same run.

Every phase is bounded by a count and a time (--seconds); it stops by itself and writes
bench/results/http_latency-<date>.txt. Rate limiting stays on (a very high limit), so its
SQLite counter is in every figure.

    .venv/bin/python bench/http_latency.py                 # about 10 minutes on 2 cores
    .venv/bin/python bench/http_latency.py --skip-10mib    # about 3 minutes
"""
from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

import requests

from common import MiB, TRACEBACK, Gunicorn, Report, percentile, training_log


def timed(session: requests.Session, method: str, url: str, body: bytes | None, timeout: float):
    start = time.perf_counter()
    try:
        r = session.request(method, url, data=body, headers={"Content-Type": "application/json"} if body else {},
                            timeout=timeout)
        status = r.status_code
    except requests.RequestException as exc:
        status = type(exc).__name__
    return time.perf_counter() - start, status


def alone(url: str, body: bytes | None, count: int, seconds: float, timeout: float) -> tuple[list[float], list]:
    session = requests.Session()
    times, statuses = [], []
    end = time.monotonic() + seconds
    for _ in range(count):
        if time.monotonic() > end:
            break
        t, s = timed(session, "POST" if body else "GET", url, body, timeout)
        times.append(t)
        statuses.append(s)
    return times, statuses


def under_load(server: Gunicorn, body: bytes, clients: int, count: int, seconds: float, timeout: float):
    payload_times, payload_status, probe_times = [], [], []
    lock = threading.Lock()
    stop = threading.Event()
    sent = [0]

    def load() -> None:
        session = requests.Session()
        while not stop.is_set():
            with lock:
                if sent[0] >= count:
                    return
                sent[0] += 1
            t, s = timed(session, "POST", server.url + "/api/v1/consultations", body, timeout)
            with lock:
                payload_times.append(t)
                payload_status.append(s)

    def probe() -> None:
        session = requests.Session()
        while not stop.is_set():
            t, s = timed(session, "GET", server.url + "/healthz", None, timeout)
            if s == 200:
                probe_times.append(t)
            stop.wait(0.05)

    threads = [threading.Thread(target=load) for _ in range(clients)]
    prober = threading.Thread(target=probe)
    started = time.perf_counter()
    prober.start()
    for t in threads:
        t.start()
    deadline = time.monotonic() + seconds
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    for t in threads:
        t.join(timeout + 5)
    elapsed = time.perf_counter() - started
    prober.join(5)
    return payload_times, payload_status, probe_times, elapsed


def ms(values: list[float], q: float) -> str:
    return f"{percentile(values, q) * 1e3:9.1f}" if values else "      n/a"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=45, help="the most one phase may run")
    parser.add_argument("--skip-10mib", action="store_true")
    args = parser.parse_args()
    report = Report("http_latency")
    payloads = [("typical traceback", TRACEBACK, 400, 300), ("1 MiB log", training_log(MiB), 40, 12)]
    if not args.skip_10mib:
        payloads.append(("10 MiB log", training_log(10 * MiB), 4, 2))
    with tempfile.TemporaryDirectory(prefix="oomdoctor-bench-") as folder:
        env = {"OOMDOCTOR_RATE_LIMIT_PER_MINUTE": str(10**9)}
        with Gunicorn(Path(folder), workers=args.workers, env=env) as server:
            timeout = 120.0
            report.say(f"# gunicorn: {args.workers} workers x 2 threads, timeout 60 s; load: {args.clients} clients "
                       f"+ 1 /healthz probe every 50 ms; a phase stops after {args.seconds:.0f} s or its count")
            report.say(f"{'payload':<20}{'phase':<12}{'n':>5}{'p50 ms':>10}{'p99 ms':>10}{'req/s':>8}"
                       f"{'healthz p50':>13}{'healthz p99':>13}{'p50 ratio':>11}{'p99 ratio':>11}  statuses")
            warm = json.dumps({"message": TRACEBACK}).encode()
            alone(server.url + "/api/v1/consultations", warm, 20, 10, timeout)
            for name, text, load_count, alone_count in payloads:
                body = json.dumps({"message": text}).encode()
                health, _ = alone(server.url + "/healthz", None, 200, 10, timeout)
                times, statuses = alone(server.url + "/api/v1/consultations", body, alone_count, args.seconds, timeout)
                ok = [t for t, s in zip(times, statuses) if s == 201]
                report.say(f"{name:<20}{'alone':<12}{len(times):>5}{ms(ok, .5)}{ms(ok, .99)}"
                           f"{len(ok) / max(sum(times), 1e-9):>8.1f}{ms(health, .5)}    {ms(health, .99)}   "
                           f"{percentile(ok, .5) / percentile(health, .5):>9.2f}  {percentile(ok, .99) / percentile(health, .99):>9.2f}"
                           f"  {summarise(statuses)}")
                times, statuses, probes, elapsed = under_load(server, body, args.clients, load_count, args.seconds, timeout)
                ok = [t for t, s in zip(times, statuses) if s == 201]
                report.say(f"{name:<20}{'under load':<12}{len(times):>5}{ms(ok, .5)}{ms(ok, .99)}"
                           f"{len(ok) / elapsed:>8.1f}{ms(probes, .5)}    {ms(probes, .99)}   "
                           f"{percentile(ok, .5) / percentile(probes, .5):>9.2f}  {percentile(ok, .99) / percentile(probes, .99):>9.2f}"
                           f"  {summarise(statuses)}")
            report.say(f"# worker timeouts in the gunicorn log: {server.worker_timeouts()}")
    report.say("# ratio = payload latency / /healthz latency in the same phase (alone: one client; under load: the "
               "probe's latency while the payload load runs)")
    report.save()


def summarise(statuses: list) -> str:
    counts: dict[str, int] = {}
    for s in statuses:
        counts[str(s)] = counts.get(str(s), 0) + 1
    return " ".join(f"{k}x{v}" for k, v in sorted(counts.items()))


if __name__ == "__main__":
    main()
