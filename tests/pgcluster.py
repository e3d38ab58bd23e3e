"""A throw-away PostgreSQL server for tests and benches: initdb and pg_ctl in a temporary
folder, on a free loopback port, never the system's own service.

PostgreSQL refuses to run as root; as root the cluster is made and run by the `postgres`
user that Debian's package creates (through runuser). `scripts/install-postgres.sh`
installs the package; `.ci/run` calls it.
"""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path


class Unavailable(RuntimeError):
    """No PostgreSQL server can be started here (not installed, or no user to run it as)."""


def binaries() -> Path:
    """The folder holding initdb and pg_ctl: Debian keeps them out of PATH, one folder per version."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                      key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    if not versions:
        raise Unavailable("PostgreSQL is not installed (no initdb on PATH or in /usr/lib/postgresql/*/bin): "
                          "run scripts/install-postgres.sh as root")
    return Path(versions[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """One PostgreSQL server in its own folder; `url()` names a database on it, `database()` makes a new one."""

    USER = "oomdoctor"

    def __init__(self, durable: bool = False, max_connections: int = 200) -> None:
        self.bin = binaries()
        self.folder = Path(tempfile.mkdtemp(prefix="oomdoctor-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self.log = self.folder / "server.log"
        self.durable = durable
        self.max_connections = max_connections
        self.run_as: list[str] = []
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                raise Unavailable("running as root without runuser: PostgreSQL will not run as root")
            try:
                import pwd
                pwd.getpwnam("postgres")
            except KeyError:
                raise Unavailable("running as root and there is no 'postgres' user to run the server as") from None
            self.run_as = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.folder, "postgres")

    def _run(self, *args: str, timeout: float = 120) -> None:
        # cwd: the server's own folder, which its user can enter whoever runs the tests.
        done = subprocess.run([*self.run_as, *args], capture_output=True, text=True, timeout=timeout, cwd=self.folder)
        if done.returncode != 0:
            raise Unavailable(f"{Path(args[0]).name} failed ({done.returncode}): {done.stdout[-1500:]}"
                              f"{done.stderr[-1500:]}{self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return "\n" + self.log.read_text(errors="replace")[-1500:]
        except OSError:
            return ""

    def start(self) -> "Cluster":
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", self.USER, "--auth=trust",
                  "--encoding=UTF8", "--locale=C", "--no-sync")
        options = [f"-c port={self.port}", "-c listen_addresses=127.0.0.1", "-c unix_socket_directories=''",
                   f"-c max_connections={self.max_connections}"]
        if not self.durable:
            # Tests kill gunicorn, never this server: durability to disk only costs them time.
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
                  "-o", " ".join(options), "start")
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise Unavailable("PostgreSQL did not accept connections" + self._log_tail()) from None
                time.sleep(0.1)
        return self

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{self.USER}@127.0.0.1:{self.port}/{dbname}"

    def database(self, prefix: str = "t") -> str:
        """A new, empty database; its URL."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=60)
        except (Unavailable, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
