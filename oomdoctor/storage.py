"""Consultations in SQLite: one row each, their messages, and a fact snapshot per turn.

Several gunicorn workers share one file: WAL lets readers run beside the writer,
and each turn is one short IMMEDIATE transaction, so two workers answering the
same consultation take turns instead of overwriting each other.
"""
from __future__ import annotations

import json
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


SCHEMA_VERSION = 1


def connect(path: str | Path) -> sqlite3.Connection:
    path = Path(path)
    if str(path) != ":memory:":
        path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


class Store:
    def __init__(self, path: str | Path, migrate: bool = True) -> None:
        self.path = str(path)
        try:
            self.conn = connect(path)
            self.db = sqlite_utils.Database(self.conn)
            if migrate:
                # Once per process start: WAL is a property of the file, it stays on.
                self.conn.execute("PRAGMA journal_mode = WAL")
                self._migrate()
                result = self.conn.execute("PRAGMA quick_check").fetchone()
                if result[0] != "ok":
                    raise sqlite3.DatabaseError(result[0])
                self.conn.execute("CREATE TABLE IF NOT EXISTS _write_probe (x)")
            self.conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"cannot use database {self.path}: {exc}") from None

    def _migrate(self) -> None:
        db = self.db
        if "consultations" not in db.table_names():
            db["consultations"].create({
                "id": str, "created": float, "updated": float, "owner": str, "channel": str,
                "lang": str, "state": str, "turns": int,
            }, pk="id")
            db["consultations"].create_index(["owner", "channel"])
            db["consultations"].create_index(["updated"])
        if "messages" not in db.table_names():
            db["messages"].create({
                "consultation_id": str, "seq": int, "role": str, "text": str, "reply": str, "created": float,
            }, pk=("consultation_id", "seq"), foreign_keys=[("consultation_id", "consultations", "id")])
        if "snapshots" not in db.table_names():
            db["snapshots"].create({"consultation_id": str, "seq": int, "facts": str},
                                   pk=("consultation_id", "seq"),
                                   foreign_keys=[("consultation_id", "consultations", "id")])
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

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
        """Run one turn under the write lock: read state, compute, store message, reply and facts."""
        with self.transaction():
            row = self.conn.execute("SELECT state, turns FROM consultations WHERE id = ?", (cid,)).fetchone()
            if row is None:
                raise NotFound(cid)
            state, reply = step(json.loads(row[0]))
            seq = row[1] + 1
            now = time.time()
            self.conn.execute(
                "UPDATE consultations SET state = ?, turns = ?, updated = ?, lang = ? WHERE id = ?",
                (json.dumps(state), seq, now, state.get("lang") or "", cid))
            self.conn.execute(
                "INSERT INTO messages (consultation_id, seq, role, text, reply, created) VALUES (?, ?, 'user', ?, ?, ?)",
                (cid, seq, message, json.dumps(reply), now))
            self.conn.execute("INSERT INTO snapshots (consultation_id, seq, facts) VALUES (?, ?, ?)",
                              (cid, seq, json.dumps(state.get("facts", []))))
        return reply

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

    def expire(self, older_than_seconds: float) -> int:
        cutoff = time.time() - older_than_seconds
        with self.transaction():
            ids = [r[0] for r in self.conn.execute("SELECT id FROM consultations WHERE updated < ?", (cutoff,))]
            for cid in ids:
                self.conn.execute("DELETE FROM snapshots WHERE consultation_id = ?", (cid,))
                self.conn.execute("DELETE FROM messages WHERE consultation_id = ?", (cid,))
                self.conn.execute("DELETE FROM consultations WHERE id = ?", (cid,))
        return len(ids)

    def close(self) -> None:
        self.conn.close()
