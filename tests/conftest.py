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


# Test modules that need torch (they call `require` as they are imported); scheduled early, see below.
NEEDS_TORCH: set[str] = set()


def require(module: str):
    """Import a heavy test dependency (torch, transformers, peft): skip without it, except in
    CI, where `make test` installs bench/accuracy/requirements.txt and a skip would hide a gap."""
    NEEDS_TORCH.add(sys._getframe(1).f_globals.get("__name__", ""))
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

    def start(self, deadline: float = 60.0) -> "LiveServer":
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


# ---------------------------------------------------------------- the order the workers take the tests in
# `make test` runs the suite on every core (pytest-xdist). Each module goes to one worker whole, which computes its
# shared fixtures and cached runs (a module's server, the conversation scripts, the corpus) once instead of once
# per worker; the modules of long tests that each start their own servers are dealt out test by test instead.
# The long ones go first, so that no core is left idle at the end while another finishes one of them.
DEALT_ONE_BY_ONE = {"test_concurrency", "test_two_hosts", "test_server", "test_adversarial_time"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getoption("dist") != "load":  # another mode asked for by name: that one
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return nodeid if Path(module).stem in DEALT_ONE_BY_ONE else module

    config.option.loadscopereorder = False  # the order below, not the largest module first
    return ByModule(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def module(item: pytest.Item) -> str:
        return item.module.__name__ if isinstance(item, pytest.Function) else ""

    slow = {module(item) for item in items if item.get_closest_marker("server") or item.get_closest_marker("browser")}
    slow |= NEEDS_TORCH
    size: dict[str, int] = {}
    for item in items:
        size[module(item)] = size.get(module(item), 0) + 1

    def rank(item: pytest.Item) -> tuple[int, int]:
        name = module(item)
        if name.rpartition(".")[2] in DEALT_ONE_BY_ONE:
            return (0, 0)
        return (1, 0) if name in slow else (2, -size[name])

    items.sort(key=rank)  # stable: within a module, the collection's order
