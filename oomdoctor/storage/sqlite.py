"""The store on an SQLite file: the default, for one host.

Several gunicorn workers share one file: WAL lets readers run beside the writer, and
every write is one short IMMEDIATE transaction (which also serializes turns under the
lock: SQLite has one writer at a time, so no row lock is needed).
"""
from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import sqlite_utils

from . import migrations
from .errors import StorageError
from .store import Store

_CORRUPT = ("file is not a database", "malformed", "not a database", "corrupt")


def explain(path: str, exc: BaseException) -> str:
    """What is wrong with the database file, and what to do about it, in one message."""
    reason = str(exc) or type(exc).__name__
    low = reason.lower()
    if any(word in low for word in _CORRUPT):
        return (f"database {path} is not an SQLite database or is damaged ({reason}); move it aside to start "
                f"with an empty one (OOMDOCTOR_DATABASE names another file), or restore a backup")
    if any(word in low for word in ("readonly", "read-only", "unable to open", "i/o error", "permission",
                                    "not a directory", "is a directory", "file exists")):
        return (f"database {path} cannot be opened for writing ({reason}); the service writes the file and creates "
                f"{Path(path).name}-wal and {Path(path).name}-shm beside it: check the permissions of the file and "
                f"its folder, and that nothing else has those names")
    return f"cannot use database {path}: {reason}"


def file_of(database: str | Path) -> str:
    from .. import config
    return config.database(str(database)).target


def connect(path: str | Path) -> sqlite3.Connection:
    path = Path(path)
    if str(path) != ":memory:":
        path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


_KEEPERS: dict[tuple[int, str], sqlite3.Connection] = {}
# A process serves one database; a test process opens many, so only the latest few are kept.
_MAX_KEEPERS = 4


def keep_open(database: str | Path) -> None:
    """Hold one idle connection to the file in this process, opened once (nothing for PostgreSQL).

    When the last connection to a WAL database closes, SQLite checkpoints the WAL into
    the file and deletes it; with a connection per request that would happen on every
    request. The idle connection keeps the WAL in place between requests (SQLite still
    checkpoints it every 1000 pages). Keyed by process id: a connection never crosses a fork.
    """
    from .. import config
    if config.database(str(database)).kind != "sqlite":
        return
    path = file_of(database)
    key = (os.getpid(), path)
    if key in _KEEPERS or path == ":memory:":
        return
    conn = connect(path)
    conn.execute("SELECT count(*) FROM sqlite_master").fetchall()  # a read opens the WAL and keeps it open
    _KEEPERS[key] = conn
    while len(_KEEPERS) > _MAX_KEEPERS:
        oldest = next(iter(_KEEPERS))
        old = _KEEPERS.pop(oldest)
        if oldest[0] == os.getpid():
            old.close()


class SQLiteStore(Store):
    kind = "sqlite"

    def __init__(self, database: str | Path, migrate: bool = True) -> None:
        self.path = file_of(database)
        try:
            self.conn = connect(self.path)
            # sqlite-utils over the same connection: the file's pragmas and tables by name, no SQL typed
            # for them; the turns' statements stay plain SQL shared with PostgreSQL (store.py).
            self.db = sqlite_utils.Database(self.conn, execute_plugins=False)
            if migrate:
                # Once per process start: WAL is a property of the file, it stays on.
                self.db.enable_wal()
                if self.db.journal_mode != "wal":
                    raise sqlite3.OperationalError(
                        f"unable to open the write-ahead log (journal mode {self.db.journal_mode})")
                result = self.conn.execute("PRAGMA quick_check").fetchone()
                if result[0] != "ok":
                    raise sqlite3.DatabaseError(f"database disk image is malformed: {result[0]}")
                # The migration writes (user_version at least), so a file that cannot be written fails here.
                self._migrate()
            self.conn.execute("PRAGMA synchronous = NORMAL")
        except (sqlite3.DatabaseError, OSError) as exc:
            raise StorageError(explain(self.path, exc)) from None

    def _migrate(self) -> None:
        with self.transaction() as conn:
            # Read inside the write lock: of several processes starting at once, one applies the steps.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > migrations.SCHEMA_VERSION:
                raise StorageError(f"database {self.path} has schema version {version}, newer than this "
                                   f"OOM Doctor's ({migrations.SCHEMA_VERSION}): run the newer version")
            for step in migrations.after(0 if version < migrations.SQLITE_RECHECKED_BELOW else version):
                for statement in step.sqlite:
                    conn.execute(statement)
            conn.execute("DROP TABLE IF EXISTS _write_probe")
            conn.execute(f"PRAGMA user_version = {migrations.SCHEMA_VERSION}")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        yield self.conn

    def close(self) -> None:
        self.conn.close()

    def tables(self) -> list[str]:
        return sorted(self.db.table_names())
