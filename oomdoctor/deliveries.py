"""Deliveries already handled, so that a chat platform that delivers an event twice gets one reply.

Lark (like most event APIs) delivers an event again when it did not see a timely 200, and
may deliver it to another gunicorn worker or after a restart: the keys live in the same
SQLite file as the consultations, in a table of their own, one row per key, claimed with a
single INSERT so that two workers racing on one event cannot both win.
"""
from __future__ import annotations

import time

from .storage import connect

# Lark retries a delivery for a few hours at most; a day keeps every retry's key.
KEEP_SECONDS = 24 * 3600


class Deliveries:
    def __init__(self, path: str) -> None:
        self.conn = connect(path)
        self.conn.execute("CREATE TABLE IF NOT EXISTS deliveries (key TEXT PRIMARY KEY, seen REAL NOT NULL)")
        self.conn.execute("CREATE INDEX IF NOT EXISTS deliveries_seen ON deliveries (seen)")

    def first(self, key: str, now: float | None = None) -> bool:
        """Claim `key`: True the first time it is seen (within KEEP_SECONDS), False after."""
        now = time.time() if now is None else now
        self.conn.execute("DELETE FROM deliveries WHERE seen < ?", (now - KEEP_SECONDS,))
        cur = self.conn.execute("INSERT OR IGNORE INTO deliveries (key, seen) VALUES (?, ?)", (key[:200], now))
        return cur.rowcount == 1

    def close(self) -> None:
        self.conn.close()
