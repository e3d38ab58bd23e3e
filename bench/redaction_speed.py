"""Redaction time, peak memory and size out/in for typical logs and for worst cases of 16 MiB.

Each case runs in a fresh Python process, so its peak RSS is its own: the input text, the
redaction and everything it holds at its peak (what a gunicorn worker would add to its
baseline). The worst cases are dense repetitions of what each detector reacts to, the one
that grew a 16 MiB message to 58.7 MiB among them (short `key=value` pairs). Targets (issue
#11): 16 MiB in <= 10 s and <= 300 MB, and out <= in for every case.

    .venv/bin/python bench/redaction_speed.py            # every case, about 2-4 minutes on 2 cores
    .venv/bin/python bench/redaction_speed.py --quick    # 1 MiB of each
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from common import MiB, ROOT, Report, training_log


def _repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


HEX40 = "0123456789abcdef0123456789abcdef01234567"
CASES = {
    "typical training log": training_log,
    "short key=value pairs (a=b)": lambda n: _repeat("a=b\n", n),
    "short secret pairs (password=x)": lambda n: _repeat("password=x\n", n),
    "secret pairs, longer values": lambda n: _repeat('"apiKey": "k3Y-value-0123456789abcdef", ', n),
    "credential names, no values": lambda n: _repeat("token key secret password auth ", n),
    "Hugging Face tokens": lambda n: _repeat("hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567 ", n),
    "sk- runs": lambda n: _repeat("sk-", n),
    "e-mail addresses": lambda n: _repeat("a@b.co ", n),
    "home folders": lambda n: _repeat("/home/al/x ", n),
    "URL passwords": lambda n: _repeat("s://u:p@h ", n),
    "PEM BEGIN lines": lambda n: _repeat("-----BEGIN PRIVATE KEY-----\n", n),
    "PEM END lines": lambda n: _repeat("-----END PRIVATE KEY-----\n", n),
    "wandb logins": lambda n: _repeat(f"wandb login {HEX40}\n", n),
    "bearer headers": lambda n: _repeat("Authorization: Bearer abcdefgh12345678\n", n),
    "all of the above, mixed": lambda n: _repeat(
        f"a=b password=x hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567 a@b.co /home/al/x s://u:p@h "
        f"-----BEGIN PRIVATE KEY-----\nMIIEv\n-----END PRIVATE KEY-----\nwandb login {HEX40}\n"
        "Authorization: Bearer abcdefgh12345678\n", n),
}


def child(case: str, size: int) -> None:
    sys.path.insert(0, str(ROOT))
    from oomdoctor.redaction import redact

    text = CASES[case](size)
    redact("warm up: HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567 /home/al/x")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start, cpu = time.perf_counter(), time.process_time()
    result = redact(text)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "cpu": cpu, "peak_mb": peak / 1024, "before_mb": before / 1024,
                      "bytes_in": len(text.encode()), "bytes_out": len(result.text.encode()),
                      "kinds": len(result.counts)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 MiB of each case instead of 16 MiB")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    report = Report("redaction_speed")
    # The machine is shared: wall time counts waiting for a core, CPU time does not.
    report.say("# load average at start: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    sizes = [MiB] if args.quick else [MiB, 16 * MiB]
    report.say(f"{'case':34s} {'size':>7s} {'wall s':>7s} {'CPU s':>6s} {'peak RSS MB':>12s} {'(before)':>9s} "
               f"{'out/in':>7s}")
    worst = {"seconds": 0.0, "cpu": 0.0, "peak_mb": 0.0, "ratio": 0.0}
    for case in CASES:
        for size in sizes:
            run = subprocess.run([sys.executable, __file__, "--child", case, str(size)], capture_output=True,
                                 text=True, cwd=ROOT, timeout=600)
            if run.returncode:
                report.say(f"{case:34s} {size // MiB:>5d}Mi FAILED: {run.stderr[-300:]}")
                continue
            got = json.loads(run.stdout.strip().splitlines()[-1])
            ratio = got["bytes_out"] / got["bytes_in"]
            report.say(f"{case:34s} {size // MiB:>5d}Mi {got['seconds']:7.2f} {got['cpu']:6.2f} {got['peak_mb']:12.0f} "
                       f"{got['before_mb']:9.0f} {ratio:7.3f}")
            if size == max(sizes):
                worst = {key: max(worst[key], got[key]) for key in ("seconds", "cpu", "peak_mb")} | \
                        {"ratio": max(worst["ratio"], ratio)}
    report.say("# load average at end: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    report.say()
    report.say(f"largest size, worst case: {worst['seconds']:.2f} s wall, {worst['cpu']:.2f} s CPU, "
               f"{worst['peak_mb']:.0f} MB peak RSS, out/in at most {worst['ratio']:.3f} "
               f"(targets: 10 s, 300 MB, 1.000)")
    if not args.quick:
        report.save()


if __name__ == "__main__":
    main()
