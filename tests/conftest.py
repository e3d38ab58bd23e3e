"""Shared fixtures: an app on a temporary database, and a real gunicorn server."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() == "true"


def require(module: str):
    """Import a heavy test dependency (torch, transformers, peft): skip without it, except in
    CI, where `make test` installs bench/accuracy/requirements.txt and a skip would hide a gap."""
    try:
        return pytest.importorskip(module)
    except pytest.skip.Exception as exc:
        if IN_CI:
            pytest.fail(f"{module} is missing in CI: {exc}", pytrace=False)
        raise


@pytest.fixture(scope="session")
def postgres():
    """A throw-away PostgreSQL server for the session (tests/pgcluster.py): skipped where none can
    start, except in CI, where `.ci/run` installs one and a skip would hide the second store."""
    import pgcluster

    try:
        cluster = pgcluster.Cluster().start()
    except (pgcluster.Unavailable, OSError) as exc:
        if IN_CI:
            pytest.fail(f"PostgreSQL is needed in CI: {exc}", pytrace=False)
        pytest.skip(f"no PostgreSQL server here: {exc}")
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path) -> str:
    """OOMDOCTOR_DATABASE for a fresh, empty store: an SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "test.sqlite3")
    return request.getfixturevalue("postgres").database()


@pytest.fixture
def app(tmp_path):
    from oomdoctor.web import create_app

    return create_app({"TESTING": True, "DATABASE": str(tmp_path / "test.sqlite3")})


@pytest.fixture
def client(app):
    return app.test_client()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """gunicorn in a subprocess, on a free port, with the project's own config file."""

    def __init__(self, tmp_path: Path, workers: int = 2, env: dict[str, str] | None = None,
                 database: str | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / f"gunicorn-{self.port}.log"
        self.database = database or tmp_path / "live.sqlite3"
        self.env = {**os.environ, "OOMDOCTOR_DATABASE": str(self.database), "OOMDOCTOR_BIND": f"127.0.0.1:{self.port}",
                    "OOMDOCTOR_WORKERS": str(workers), **(env or {})}
        self.proc: subprocess.Popen | None = None

    def start(self, deadline: float = 30.0) -> "LiveServer":
        gunicorn = Path(sys.executable).parent / "gunicorn"
        self._fh = open(self.log, "wb")
        self.proc = subprocess.Popen([str(gunicorn), "-c", "gunicorn.conf.py", "app:app"], cwd=ROOT, env=self.env,
                                     stdout=self._fh, stderr=subprocess.STDOUT)
        import urllib.request
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {self.proc.returncode}:\n{self.output()}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"gunicorn did not answer within {deadline}s:\n{self.output()}")

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def log_once_it_holds(self, *needles: str, deadline: float = 10.0) -> str:
        """The whole log once every needle is in it: gunicorn writes the access line after the response has gone,
        so a test reading the log right after its request can be ahead of the writer."""
        end = time.monotonic() + deadline
        while True:
            text = self.log.read_text(errors="replace")
            if all(n in text for n in needles) or time.monotonic() > end:
                return text
            time.sleep(0.05)

    def stop(self, sig: int | None = None) -> None:
        if self.proc and self.proc.poll() is None:
            if sig is None:
                self.proc.terminate()
            else:
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "_fh", None):
            self._fh.close()


@pytest.fixture
def live_server(tmp_path, request):
    server = LiveServer(tmp_path).start()
    yield server
    server.stop()
    if request.node.rep_call.failed if hasattr(request.node, "rep_call") else False:
        print("---- gunicorn output ----\n" + server.output())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)
