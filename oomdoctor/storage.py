"""Consultations in SQLite: one row each, their messages, and a fact snapshot per turn.

Several gunicorn workers share one file: WAL lets readers run beside the writer,
and every write is one short IMMEDIATE transaction. A turn is computed outside
the write lock and stored only if no other turn was stored meanwhile (the turn
counter is the version); otherwise it is computed again on the newer state, so
two workers answering the same consultation take turns instead of overwriting
each other, and a slow turn never holds up the others' writes.
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import sqlite_utils


class StorageError(RuntimeError):
    """The database cannot be used (corrupt, read-only, wrong schema); said once at start."""


class NotFound(KeyError):
    pass


class _Conflict(Exception):
    """Another turn was stored between reading the state and writing the new one."""


SCHEMA_VERSION = 2
# Optimistic tries before a turn is computed under the write lock instead.
TURN_TRIES = 4

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


def keep_open(path: str | Path) -> None:
    """Hold one idle connection to the file in this process, opened once.

    When the last connection to a WAL database closes, SQLite checkpoints the WAL into
    the file and deletes it; with a connection per request that would happen on every
    request. The idle connection keeps the WAL in place between requests (SQLite still
    checkpoints it every 1000 pages). Keyed by process id: a connection never crosses a fork.
    """
    key = (os.getpid(), str(path))
    if key in _KEEPERS or str(path) == ":memory:":
        return
    conn = connect(path)
    conn.execute("SELECT count(*) FROM sqlite_master").fetchall()  # a read opens the WAL and keeps it open
    _KEEPERS[key] = conn
    while len(_KEEPERS) > _MAX_KEEPERS:
        oldest = next(iter(_KEEPERS))
        old = _KEEPERS.pop(oldest)
        if oldest[0] == os.getpid():
            old.close()


class Store:
    def __init__(self, path: str | Path, migrate: bool = True) -> None:
        self.path = str(path)
        try:
            self.conn = connect(path)
            self.db = sqlite_utils.Database(self.conn)
            if migrate:
                # Once per process start: WAL is a property of the file, it stays on.
                mode = self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise sqlite3.OperationalError(f"unable to open the write-ahead log (journal mode {mode})")
                result = self.conn.execute("PRAGMA quick_check").fetchone()
                if result[0] != "ok":
                    raise sqlite3.DatabaseError(f"database disk image is malformed: {result[0]}")
                # _migrate writes (user_version at least), so a file that cannot be written fails here, at start.
                self._migrate()
            self.conn.execute("PRAGMA synchronous = NORMAL")
        except (sqlite3.DatabaseError, OSError) as exc:
            raise StorageError(explain(self.path, exc)) from None

    def _migrate(self) -> None:
        db = self.db
        tables = set(db.table_names())
        if "consultations" not in tables:
            db["consultations"].create({
                "id": str, "created": float, "updated": float, "owner": str, "channel": str,
                "lang": str, "state": str, "turns": int,
            }, pk="id")
            db["consultations"].create_index(["owner", "channel"])
            db["consultations"].create_index(["updated"])
        if "messages" not in tables:
            db["messages"].create({
                "consultation_id": str, "seq": int, "role": str, "text": str, "reply": str, "created": float,
            }, pk=("consultation_id", "seq"), foreign_keys=[("consultation_id", "consultations", "id")])
        if "snapshots" not in tables:
            db["snapshots"].create({"consultation_id": str, "seq": int, "facts": str},
                                   pk=("consultation_id", "seq"),
                                   foreign_keys=[("consultation_id", "consultations", "id")])
        if "rate_limits" not in tables:
            # One row per client and minute; shared by every worker through the file.
            db["rate_limits"].create({"client": str, "minute": int, "hits": int}, pk=("client", "minute"))
        if "seen_requests" not in tables:
            # Signed requests already answered (Slack's), so that a replay inside the signature's
            # window is refused; rows older than the window are deleted as new ones come.
            db["seen_requests"].create({"key": str, "at": float}, pk="key")
            db["seen_requests"].create_index(["at"])
        db.execute("DROP TABLE IF EXISTS _write_probe")
        with self.transaction():
            self.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

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

    def create(self, state: dict, owner: str = "", channel: str = "api") -> str:
        cid = uuid.uuid4().hex
        now = time.time()
        with self.transaction():
            self.db["consultations"].insert({
                "id": cid, "created": now, "updated": now, "owner": owner, "channel": channel,
                "lang": state.get("lang") or "", "state": json.dumps(state), "turns": 0,
            })
        return cid

    def turn(self, cid: str, message: str, step: Callable[[dict], tuple[dict, dict]]) -> dict:
        """Run one turn: read the state, compute the next one, store it with the message, reply and facts.

        The step runs outside the write lock; if another turn was stored meanwhile the
        step runs again on the newer state. After TURN_TRIES conflicts it runs under the lock.
        """
        for _ in range(TURN_TRIES):
            row = self._state(cid)
            state, reply = step(json.loads(row[0]))
            try:
                with self.transaction():
                    self._store_turn(cid, row[1], message, state, reply)
                return reply
            except _Conflict:
                continue
        with self.transaction():
            row = self._state(cid)
            state, reply = step(json.loads(row[0]))
            self._store_turn(cid, row[1], message, state, reply)
        return reply

    def _state(self, cid: str) -> tuple[str, int]:
        row = self.conn.execute("SELECT state, turns FROM consultations WHERE id = ?", (cid,)).fetchone()
        if row is None:
            raise NotFound(cid)
        return row

    def _store_turn(self, cid: str, turns: int, message: str, state: dict, reply: dict) -> None:
        seq = turns + 1
        now = time.time()
        cur = self.conn.execute(
            "UPDATE consultations SET state = ?, turns = ?, updated = ?, lang = ? WHERE id = ? AND turns = ?",
            (json.dumps(state), seq, now, state.get("lang") or "", cid, turns))
        if cur.rowcount != 1:
            raise _Conflict(cid)
        self.conn.execute(
            "INSERT INTO messages (consultation_id, seq, role, text, reply, created) VALUES (?, ?, 'user', ?, ?, ?)",
            (cid, seq, message, json.dumps(reply), now))
        self.conn.execute("INSERT INTO snapshots (consultation_id, seq, facts) VALUES (?, ?, ?)",
                          (cid, seq, json.dumps(state.get("facts", []))))

    def get(self, cid: str) -> dict[str, Any]:
        row = self.conn.execute(
            "SELECT id, created, updated, owner, channel, lang, state, turns FROM consultations WHERE id = ?",
            (cid,)).fetchone()
        if row is None:
            raise NotFound(cid)
        messages = [
            {"seq": seq, "text": text, "reply": json.loads(reply), "created": created}
            for seq, text, reply, created in self.conn.execute(
                "SELECT seq, text, reply, created FROM messages WHERE consultation_id = ? ORDER BY seq", (cid,))
        ]
        return {"id": row[0], "created": row[1], "updated": row[2], "owner": row[3], "channel": row[4],
                "lang": row[5], "state": json.loads(row[6]), "turns": row[7], "messages": messages}

    def owner(self, cid: str) -> str:
        row = self.conn.execute("SELECT owner FROM consultations WHERE id = ?", (cid,)).fetchone()
        if row is None:
            raise NotFound(cid)
        return row[0] or ""

    def find(self, owner: str, channel: str) -> str | None:
        row = self.conn.execute(
            "SELECT id FROM consultations WHERE owner = ? AND channel = ? ORDER BY updated DESC LIMIT 1",
            (owner, channel)).fetchone()
        return row[0] if row else None

    def delete(self, cid: str) -> bool:
        with self.transaction():
            self.conn.execute("DELETE FROM snapshots WHERE consultation_id = ?", (cid,))
            self.conn.execute("DELETE FROM messages WHERE consultation_id = ?", (cid,))
            cur = self.conn.execute("DELETE FROM consultations WHERE id = ?", (cid,))
        return cur.rowcount > 0

    def expire(self, older_than_seconds: float, now: float | None = None) -> int:
        """Delete consultations not touched for `older_than_seconds`, and stale rate counters; how many went."""
        now = time.time() if now is None else now
        cutoff = now - older_than_seconds
        old = "SELECT id FROM consultations WHERE updated < ?"
        with self.transaction():
            self.conn.execute(f"DELETE FROM snapshots WHERE consultation_id IN ({old})", (cutoff,))
            self.conn.execute(f"DELETE FROM messages WHERE consultation_id IN ({old})", (cutoff,))
            cur = self.conn.execute("DELETE FROM consultations WHERE updated < ?", (cutoff,))
            self.conn.execute("DELETE FROM rate_limits WHERE minute < ?", (int(now // 60) - 1,))
        return cur.rowcount

    def hit(self, client: str, minute: int) -> int:
        """Count one request from `client` in `minute`; the count so far, this one included."""
        rows = self.conn.execute(
            "INSERT INTO rate_limits (client, minute, hits) VALUES (?, ?, 1) "
            "ON CONFLICT (client, minute) DO UPDATE SET hits = hits + 1 RETURNING hits",
            (client, minute)).fetchall()
        # fetchall, not fetchone: the statement must finish for its implicit transaction to commit.
        return int(rows[0][0])

    def first_sighting(self, key: str, now: float, window_seconds: float) -> bool:
        """Record a signed request by `key`; False when it was seen within `window_seconds` (a replay)."""
        with self.transaction():
            self.conn.execute("DELETE FROM seen_requests WHERE at < ?", (now - window_seconds,))
            cur = self.conn.execute("INSERT OR IGNORE INTO seen_requests (key, at) VALUES (?, ?)", (key, now))
        return cur.rowcount == 1

    def close(self) -> None:
        self.conn.close()
