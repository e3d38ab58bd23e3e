"""What a store does, the same on SQLite and on PostgreSQL.

Every statement here is written once, in the SQL both databases accept (`?` placeholders;
the PostgreSQL store passes them on as `%s`). A subclass only says how to open a
connection, how to begin a write, and how to lock a consultation's row.

A turn is computed outside any transaction and stored only if no other turn was stored
meanwhile (the turn counter is the version); otherwise it is computed again on the newer
state, so two workers (or hosts) answering the same consultation take turns instead of
overwriting each other, and a slow turn never holds up the others' writes. After
TURN_TRIES conflicts it runs with the consultation locked.
"""
from __future__ import annotations

import hashlib
import json
import secrets
import time
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Iterator, NamedTuple

from .errors import NotFound

# Optimistic tries before a turn is computed under the lock instead.
TURN_TRIES = 4


class _Conflict(Exception):
    """Another turn was stored between reading the state and writing the new one."""


class _Stored(Exception):
    """The turn with this request id is stored already; its reply is the answer."""

    def __init__(self, reply: dict) -> None:
        super().__init__("stored")
        self.reply = reply


class OutboxEntry(NamedTuple):
    """An outbox entry: work to do for a channel and the URL its result goes to."""
    id: str
    kind: str
    args: dict
    response_url: str
    message: dict | None  # the result, once computed
    holder: str  # whoever claimed it last; only they may settle or finish it
    attempts: int


# Platforms deliver an unanswered event again for a few hours at most; a day keeps every retry's key.
DELIVERY_KEEP_SECONDS = 24 * 3600


class Store:
    """Consultations, turns, fact snapshots, rate counters and the outbox, on one database.

    `Store(database)` opens the database OOMDOCTOR_DATABASE names: a PostgreSQL URL or an
    SQLite file. With `migrate=True` (once per process start) it also brings the schema up
    to date and checks that the database can be written.
    """

    kind = ""
    # Appended to the read of a consultation that a turn holds until it commits.
    LOCK_ROW = ""

    def __new__(cls, database: Any = None, migrate: bool = True):
        if cls is Store:
            from .. import config
            if config.database(str(database)).kind == "postgresql":
                from .postgres import PostgresStore as cls  # noqa: N806
            else:
                from .sqlite import SQLiteStore as cls  # noqa: N806
        return super().__new__(cls)

    # ---------------------------------------------------------------- what a database supplies

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A connection in a write transaction: committed at the end, rolled back on an error."""
        raise NotImplementedError

    @contextmanager
    def reading(self) -> Iterator[Any]:
        """A connection for reads."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def tables(self) -> list[str]:
        """The tables the database holds (for checks of the schema)."""
        raise NotImplementedError

    def ping(self) -> None:
        with self.reading() as conn:
            conn.execute("SELECT 1").fetchone()

    # ---------------------------------------------------------------- consultations

    def create(self, state: dict, owner: str = "", channel: str = "api") -> str:
        cid = uuid.uuid4().hex
        now = time.time()
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO consultations (id, created, updated, owner, channel, lang, state, turns) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
                (cid, now, now, owner, channel, state.get("lang") or "", json.dumps(state)))
        return cid

    def turn(self, cid: str, message: str, step: Callable[[dict], tuple[dict, dict]],
             request_id: str | None = None) -> dict:
        """Run one turn: read the state, compute the next one, store it with the message, reply and facts.

        The step runs outside any transaction; if another turn was stored meanwhile it runs
        again on the newer state. After TURN_TRIES conflicts it runs with the row locked.
        With a `request_id`, a turn already stored under it is not run again: its reply is
        returned, so work that is retried after a crash is stored once.
        """
        try:
            for _ in range(TURN_TRIES):
                with self.reading() as conn:
                    state, turns = self._state(conn, cid, request_id)
                new_state, reply = step(json.loads(state))
                try:
                    with self.transaction() as conn:
                        self._store_turn(conn, cid, turns, message, new_state, reply, request_id)
                    return reply
                except _Conflict:
                    continue
            with self.transaction() as conn:
                state, turns = self._state(conn, cid, request_id, lock=True)
                new_state, reply = step(json.loads(state))
                self._store_turn(conn, cid, turns, message, new_state, reply, request_id)
            return reply
        except _Stored as stored:
            return stored.reply

    def _state(self, conn: Any, cid: str, request_id: str | None, lock: bool = False) -> tuple[str, int]:
        row = conn.execute("SELECT state, turns FROM consultations WHERE id = ?" + (self.LOCK_ROW if lock else ""),
                           (cid,)).fetchone()
        if row is None:
            raise NotFound(cid)
        self._check_request(conn, cid, request_id)
        return row[0], row[1]

    def _check_request(self, conn: Any, cid: str, request_id: str | None) -> None:
        if request_id is None:
            return
        done = conn.execute("SELECT reply FROM messages WHERE consultation_id = ? AND request_id = ?",
                            (cid, request_id)).fetchone()
        if done is not None:
            raise _Stored(json.loads(done[0]))

    def _store_turn(self, conn: Any, cid: str, turns: int, message: str, state: dict, reply: dict,
                    request_id: str | None) -> None:
        seq = turns + 1
        now = time.time()
        cur = conn.execute(
            "UPDATE consultations SET state = ?, turns = ?, updated = ?, lang = ? WHERE id = ? AND turns = ?",
            (json.dumps(state), seq, now, state.get("lang") or "", cid, turns))
        if cur.rowcount != 1:
            if conn.execute("SELECT 1 FROM consultations WHERE id = ?", (cid,)).fetchone() is None:
                raise NotFound(cid)
            raise _Conflict(cid)
        # The row is ours until commit: a turn stored under this request id meanwhile is visible now.
        self._check_request(conn, cid, request_id)
        conn.execute(
            "INSERT INTO messages (consultation_id, seq, role, text, reply, created, request_id) "
            "VALUES (?, ?, 'user', ?, ?, ?, ?)",
            (cid, seq, message, json.dumps(reply), now, request_id))
        conn.execute("INSERT INTO snapshots (consultation_id, seq, facts) VALUES (?, ?, ?)",
                     (cid, seq, json.dumps(state.get("facts", []))))

    def answered(self, cid: str, request_id: str | None) -> bool:
        """Whether a turn was stored under this request id."""
        if request_id is None:
            return False
        with self.reading() as conn:
            return conn.execute("SELECT 1 FROM messages WHERE consultation_id = ? AND request_id = ?",
                                (cid, request_id)).fetchone() is not None

    def get(self, cid: str) -> dict[str, Any]:
        with self.reading() as conn:
            row = conn.execute(
                "SELECT id, created, updated, owner, channel, lang, state, turns FROM consultations WHERE id = ?",
                (cid,)).fetchone()
            if row is None:
                raise NotFound(cid)
            messages = [
                {"seq": seq, "text": text, "reply": json.loads(reply), "created": created}
                for seq, text, reply, created in conn.execute(
                    "SELECT seq, text, reply, created FROM messages WHERE consultation_id = ? ORDER BY seq",
                    (cid,)).fetchall()
            ]
        return {"id": row[0], "created": row[1], "updated": row[2], "owner": row[3], "channel": row[4],
                "lang": row[5], "state": json.loads(row[6]), "turns": row[7], "messages": messages}

    def owner(self, cid: str) -> str:
        with self.reading() as conn:
            row = conn.execute("SELECT owner FROM consultations WHERE id = ?", (cid,)).fetchone()
        if row is None:
            raise NotFound(cid)
        return row[0] or ""

    def find(self, owner: str, channel: str) -> str | None:
        with self.reading() as conn:
            row = conn.execute(
                "SELECT id FROM consultations WHERE owner = ? AND channel = ? ORDER BY updated DESC LIMIT 1",
                (owner, channel)).fetchone()
        return row[0] if row else None

    def delete(self, cid: str) -> bool:
        # The consultation first: on PostgreSQL that waits for a turn holding its row, so the
        # messages deleted next include that turn's.
        with self.transaction() as conn:
            gone = conn.execute("DELETE FROM consultations WHERE id = ?", (cid,)).rowcount
            conn.execute("DELETE FROM snapshots WHERE consultation_id = ?", (cid,))
            conn.execute("DELETE FROM messages WHERE consultation_id = ?", (cid,))
        return gone > 0

    def expire(self, older_than_seconds: float, now: float | None = None) -> int:
        """Delete consultations not touched for `older_than_seconds`, stale rate counters and outbox
        entries whose response URL has lapsed; how many consultations went."""
        now = time.time() if now is None else now
        cutoff = now - older_than_seconds
        with self.transaction() as conn:
            gone = [row[0] for row in conn.execute(
                "DELETE FROM consultations WHERE updated < ? RETURNING id", (cutoff,)).fetchall()]
            for table in ("snapshots", "messages"):
                conn.executemany(f"DELETE FROM {table} WHERE consultation_id = ?", [(cid,) for cid in gone])
            conn.execute("DELETE FROM rate_limits WHERE minute < ?", (int(now // 60) - 1,))
            conn.execute("DELETE FROM outbox WHERE created < ?", (now - OUTBOX_KEEP_SECONDS,))
            conn.execute("DELETE FROM response_posts WHERE first < ?", (now - OUTBOX_KEEP_SECONDS,))
        return len(gone)

    # ---------------------------------------------------------------- counters

    def hit(self, client: str, minute: int) -> int:
        """Count one request from `client` in `minute`; the count so far, this one included."""
        with self.transaction() as conn:
            rows = conn.execute(
                "INSERT INTO rate_limits (client, minute, hits) VALUES (?, ?, 1) "
                "ON CONFLICT (client, minute) DO UPDATE SET hits = rate_limits.hits + 1 RETURNING hits",
                (client, minute)).fetchall()
        return int(rows[0][0])

    def post_slot(self, url: str, limit: int, window: float, now: float | None = None) -> bool:
        """Count one post to `url`; False when `limit` posts were counted within `window` seconds
        of the first (Slack's rule for a response_url). The URL is kept only as its hash."""
        now = time.time() if now is None else now
        key = hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()
        with self.transaction() as conn:
            rows = conn.execute(
                "INSERT INTO response_posts (url, first, posts) VALUES (?, ?, 1) "
                "ON CONFLICT (url) DO UPDATE SET "
                "posts = CASE WHEN response_posts.first < ? THEN 1 ELSE response_posts.posts + 1 END, "
                "first = CASE WHEN response_posts.first < ? THEN excluded.first ELSE response_posts.first END "
                "RETURNING posts", (key, now, now - window, now - window)).fetchall()
        return int(rows[0][0]) <= limit

    def first_delivery(self, key: str, keep_seconds: float = DELIVERY_KEEP_SECONDS, now: float | None = None) -> bool:
        """Claim `key` (an event id a platform may deliver again, to any worker or host): True the
        first time within `keep_seconds`, False after. One INSERT decides, so two racing workers
        cannot both win."""
        now = time.time() if now is None else now
        with self.transaction() as conn:
            conn.execute("DELETE FROM deliveries WHERE seen < ?", (now - keep_seconds,))
            rows = conn.execute("INSERT INTO deliveries (key, seen) VALUES (?, ?) ON CONFLICT (key) DO NOTHING "
                                "RETURNING key", (key[:200], now)).fetchall()
        return bool(rows)

    # ---------------------------------------------------------------- the outbox

    def enqueue(self, kind: str, args: dict, response_url: str, lease: float) -> OutboxEntry:
        """Record work before it starts, claimed by the caller for `lease` seconds; any process may
        take it over after that (the caller died), and redo or deliver it."""
        entry = OutboxEntry(uuid.uuid4().hex, kind, args, response_url, None, secrets.token_hex(8), 1)
        now = time.time()
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO outbox (id, kind, args, response_url, message, state, holder, due, attempts, created) "
                "VALUES (?, ?, ?, ?, NULL, 'working', ?, ?, 1, ?)",
                (entry.id, kind, json.dumps(args), response_url, entry.holder, now + lease, now))
        return entry

    def claim_due(self, lease: float, now: float | None = None) -> OutboxEntry | None:
        """Take over one unfinished entry whose claim has lapsed, for `lease` seconds."""
        now = time.time() if now is None else now
        with self.reading() as conn:
            row = conn.execute("SELECT id FROM outbox WHERE state IN ('working', 'ready') AND due <= ? "
                               "ORDER BY due LIMIT 1", (now,)).fetchone()
        if row is None:
            return None
        holder = secrets.token_hex(8)
        with self.transaction() as conn:
            # `due <= ?` again: of two processes claiming the same entry, the second finds it taken.
            rows = conn.execute(
                "UPDATE outbox SET holder = ?, due = ?, attempts = attempts + 1 "
                "WHERE id = ? AND due <= ? AND state IN ('working', 'ready') "
                "RETURNING id, kind, args, response_url, message, holder, attempts",
                (holder, now + lease, row[0], now)).fetchall()
        if not rows:
            return None
        row = rows[0]
        return OutboxEntry(row[0], row[1], json.loads(row[2]), row[3], json.loads(row[4]) if row[4] else None,
                           row[5], row[6])

    def settle(self, entry: OutboxEntry, message: dict) -> bool:
        """Keep the work's result; False when another process has taken the entry over."""
        with self.transaction() as conn:
            return conn.execute("UPDATE outbox SET message = ?, state = 'ready' WHERE id = ? AND holder = ? "
                                "AND state IN ('working', 'ready')",
                                (json.dumps(message), entry.id, entry.holder)).rowcount == 1

    def finish(self, entry: OutboxEntry, state: str = "done") -> bool:
        """Mark the entry delivered (or given up); False when another process has taken it over."""
        with self.transaction() as conn:
            return conn.execute("UPDATE outbox SET state = ? WHERE id = ? AND holder = ?",
                                (state, entry.id, entry.holder)).rowcount == 1

    def outbox_state(self, entry_id: str) -> str | None:
        with self.reading() as conn:
            row = conn.execute("SELECT state FROM outbox WHERE id = ?", (entry_id,)).fetchone()
        return row[0] if row else None


# Slack's response URLs work for 30 minutes: an outbox entry older than an hour can only be dropped.
OUTBOX_KEEP_SECONDS = 3600
