"""The store on a PostgreSQL server: for several hosts serving the same consultations.

psycopg 3 with psycopg_pool: one pool per process (gunicorn forks workers after the
app is loaded, so a pool opened before a fork is closed then, and each worker opens its
own on first use). Each store operation borrows a connection for one transaction.

Isolation is PostgreSQL's default, READ COMMITTED: a turn's `UPDATE … WHERE turns = n`
that meets a concurrent turn waits for it, then sees the new count and stores nothing,
which is the optimistic conflict the SQLite store sees too. The turn that runs after
repeated conflicts holds the consultation's row (`SELECT … FOR UPDATE`) instead of
SQLite's whole-file write lock.
"""
from __future__ import annotations

import hashlib
import os
import threading
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterator

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from . import migrations
from .errors import StorageError
from .store import Store

# Taken for the length of the migration transaction: hosts starting at once apply each step once.
MIGRATION_LOCK = int.from_bytes(hashlib.sha256(b"oomdoctor schema migrations").digest()[:8], "big", signed=True)
CONNECT_TIMEOUT = 10
# How long a request waits for a pooled connection before it is a 503 (a server that is down
# answers no request: better a quick 503 than every thread stuck).
POOL_TIMEOUT = 5.0

_pools: dict[tuple[int, str], ConnectionPool] = {}
_pools_lock = threading.Lock()


def where(url: str) -> str:
    """The server and database a URL names, without its password."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(an unreadable postgresql:// URL)"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or "5432"
    return f"postgresql://{parts.get('user') or ''}{'@' if parts.get('user') else ''}{host}:{port}/" \
           f"{parts.get('dbname') or ''}"


def explain(url: str, exc: BaseException) -> str:
    """What is wrong with the server or the database, and what to do about it, in one message."""
    reason = " ".join((str(exc) or type(exc).__name__).split())
    low = reason.lower()
    place = where(url)
    if "password authentication failed" in low or "no password supplied" in low or "role" in low and \
            "does not exist" in low:
        return f"database {place} refused the login ({reason}); check the user and password in OOMDOCTOR_DATABASE"
    if "database" in low and "does not exist" in low:
        return f"database {place} does not exist ({reason}); create it (createdb) or name another one"
    if "permission denied" in low or "read-only transaction" in low:
        return (f"database {place} cannot be written by this user ({reason}); the service creates its tables "
                f"at start and writes every turn: grant CREATE and write access, or use a primary, not a replica")
    if any(word in low for word in ("connection refused", "could not connect", "timeout", "timed out",
                                    "could not translate host", "connection failed", "server closed",
                                    "terminating connection", "couldn't get a connection")):
        return (f"cannot reach the PostgreSQL server of {place} ({reason}); check that it runs and that "
                f"OOMDOCTOR_DATABASE names it")
    return f"cannot use database {place}: {reason}"


@lru_cache(maxsize=256)
def _dialect(sql: str) -> str:
    # The shared statements use `?`; none of them holds a literal `?` or `%`.
    return sql.replace("?", "%s")


class _Connection:
    """A psycopg connection that takes the statements as the shared store writes them."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.raw = conn

    def execute(self, sql: str, params: tuple = ()) -> psycopg.Cursor:
        return self.raw.execute(_dialect(sql), params)

    def executemany(self, sql: str, rows: list[tuple]) -> None:
        if rows:
            with self.raw.cursor() as cur:
                cur.executemany(_dialect(sql), rows)


def _pool_size() -> int:
    from .. import config
    return max(1, int(config.from_environment()["DATABASE_POOL_SIZE"]))


def pool(url: str) -> ConnectionPool:
    """This process's pool for `url`, opened on first use."""
    key = (os.getpid(), url)
    with _pools_lock:
        found = _pools.get(key)
        if found is None:
            found = ConnectionPool(url, min_size=1, max_size=_pool_size(), timeout=POOL_TIMEOUT, open=True,
                                   kwargs={"connect_timeout": CONNECT_TIMEOUT},
                                   check=ConnectionPool.check_connection, name="oomdoctor")
            _pools[key] = found
        return found


def discard(url: str) -> None:
    """Drop this process's pool for `url` after a connection error: the next operation opens a new
    one at once. (A pool keeps retrying a lost server on its own, but with a backoff that grows
    to minutes; a new pool connects as soon as the server is back.)"""
    with _pools_lock:
        found = _pools.pop((os.getpid(), url), None)
    if found is not None:
        # Connections other threads hold are closed when they come back.
        threading.Thread(target=found.close, kwargs={"timeout": 5}, daemon=True).start()


def close_pools() -> None:
    """Close this process's pools (before a fork: a connection must never be shared by two processes)."""
    with _pools_lock:
        mine = [key for key in _pools if key[0] == os.getpid()]
        closing = [_pools.pop(key) for key in mine]
        # Pools inherited from a parent are dropped without closing: closing would end the parent's sessions.
        for key in list(_pools):
            _orphans.append(_pools.pop(key))
    for each in closing:
        each.close(timeout=5)


_orphans: list[ConnectionPool] = []
os.register_at_fork(before=close_pools)


class PostgresStore(Store):
    kind = "postgresql"
    LOCK_ROW = " FOR UPDATE"

    def __init__(self, database: str, migrate: bool = True) -> None:
        self.url = str(database)
        if migrate:
            try:
                with psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT) as conn:
                    self._migrate(conn)
            except psycopg.Error as exc:
                raise StorageError(explain(self.url, exc)) from None

    def _migrate(self, conn: psycopg.Connection) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, what TEXT NOT NULL, "
                     "applied TIMESTAMPTZ NOT NULL DEFAULT now())")
        version = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0]
        if version > migrations.SCHEMA_VERSION:
            raise StorageError(f"database {where(self.url)} has schema version {version}, newer than this "
                               f"OOM Doctor's ({migrations.SCHEMA_VERSION}): run the newer version")
        for step in migrations.after(version):
            for statement in step.postgresql:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations (version, what) VALUES (%s, %s)", (step.version, step.what))
        # Fail at start, not on the first turn, when this user may read but not write.
        conn.execute("INSERT INTO rate_limits (client, minute, hits) SELECT '', 0, 0 WHERE false")

    @contextmanager
    def transaction(self) -> Iterator[_Connection]:
        try:
            with pool(self.url).connection() as conn:
                yield _Connection(conn)
        except psycopg.OperationalError as exc:
            discard(self.url)
            raise StorageError(explain(self.url, exc)) from None

    reading = transaction

    def close(self) -> None:
        """Nothing to do: connections go back to the process's pool after each operation."""

    def tables(self) -> list[str]:
        with self.reading() as conn:
            return [row[0] for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename").fetchall()]


def version(url: str) -> str:
    with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT) as conn:
        return conn.execute("SHOW server_version").fetchone()[0]

