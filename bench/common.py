"""What every bench script shares: the machine's description, a report that goes to the
screen and to bench/results/, realistic logs of a given size, and a gunicorn on loopback."""
from __future__ import annotations

import datetime
import os
import platform
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
sys.path.insert(0, str(ROOT))

TRACEBACK = (ROOT / "tests" / "fixtures" / "logs" / "cuda_oom_new.txt").read_text(encoding="utf-8")
MiB = 2**20


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{platform.node() or 'host'}: {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
            f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.release()}")


class Report:
    """Lines printed as they come and written to bench/results/<name>-<date>.txt at the end."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lines: list[str] = []
        self.started = datetime.datetime.now(datetime.timezone.utc)
        self.say(f"# {name}  {self.started:%Y-%m-%d %H:%M UTC}")
        self.say(f"# {machine()}")

    def say(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)

    def save(self) -> Path:
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / f"{self.name}-{self.started:%Y-%m-%d}.txt"
        path.write_text("\n".join(self.lines) + "\n", encoding="utf-8")
        print(f"written to {path.relative_to(ROOT)}")
        return path


def training_log(size: int) -> str:
    """A realistic pasted log of `size` bytes: real lines from the corpus, the OOM traceback last."""
    lines = []
    for path in sorted((ROOT / "tests" / "corpus").glob("*.log")):
        lines.extend(path.read_text(encoding="utf-8").splitlines(keepends=True))
    body = "".join(lines)
    need = max(0, size - len(TRACEBACK.encode()))
    reps = need // max(1, len(body.encode())) + 1
    filler = (body * reps).encode()[:need].decode("utf-8", "ignore")
    return filler + TRACEBACK


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gunicorn:
    """The project's gunicorn.conf.py on a free loopback port, with a fresh database."""

    def __init__(self, folder: Path, workers: int = 2, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        folder.mkdir(parents=True, exist_ok=True)
        self.log = folder / "gunicorn.log"
        self.env = {**os.environ, "OOMDOCTOR_DATABASE": str(folder / "bench.sqlite3"),
                    "OOMDOCTOR_BIND": f"127.0.0.1:{self.port}", "OOMDOCTOR_WORKERS": str(workers),
                    "OOMDOCTOR_ACCESS_LOG": str(folder / "access.log"), **(env or {})}
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Gunicorn":
        gunicorn = Path(sys.executable).parent / "gunicorn"
        self._fh = open(self.log, "wb")
        self.proc = subprocess.Popen([str(gunicorn), "-c", "gunicorn.conf.py", "app:app"], cwd=ROOT, env=self.env,
                                     stdout=self._fh, stderr=subprocess.STDOUT)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited: {self.log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1):
                    return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("gunicorn did not start")

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._fh.close()

    def worker_timeouts(self) -> int:
        return self.log.read_text(errors="replace").count("WORKER TIMEOUT")
