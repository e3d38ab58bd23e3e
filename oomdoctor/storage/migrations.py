"""The schema, as numbered steps written once for each database.

A database records the last step applied (SQLite: `PRAGMA user_version`; PostgreSQL: the
`schema_migrations` table) and a start applies the steps after it, in one transaction
that holds the database's write lock (SQLite) or an advisory lock (PostgreSQL), so
several processes or hosts starting at once apply each step exactly once.

Steps 1 and 2 were the first SQLite schema; they create only what is missing, because
files of that time may hold some of their tables already.
"""
from __future__ import annotations

from typing import NamedTuple


class Step(NamedTuple):
    version: int
    what: str
    sqlite: tuple[str, ...]
    postgresql: tuple[str, ...]


STEPS: tuple[Step, ...] = (
    Step(1, "consultations, their messages, a fact snapshot per turn", sqlite=(
        "CREATE TABLE IF NOT EXISTS consultations (id TEXT PRIMARY KEY, created FLOAT, updated FLOAT, owner TEXT, "
        "channel TEXT, lang TEXT, state TEXT, turns INTEGER)",
        "CREATE INDEX IF NOT EXISTS idx_consultations_owner_channel ON consultations (owner, channel)",
        "CREATE INDEX IF NOT EXISTS idx_consultations_updated ON consultations (updated)",
        "CREATE TABLE IF NOT EXISTS messages (consultation_id TEXT REFERENCES consultations(id), seq INTEGER, "
        "role TEXT, text TEXT, reply TEXT, created FLOAT, PRIMARY KEY (consultation_id, seq))",
        "CREATE TABLE IF NOT EXISTS snapshots (consultation_id TEXT REFERENCES consultations(id), seq INTEGER, "
        "facts TEXT, PRIMARY KEY (consultation_id, seq))",
    ), postgresql=(
        "CREATE TABLE consultations (id TEXT PRIMARY KEY, created DOUBLE PRECISION NOT NULL, "
        "updated DOUBLE PRECISION NOT NULL, owner TEXT NOT NULL DEFAULT '', channel TEXT NOT NULL DEFAULT '', "
        "lang TEXT NOT NULL DEFAULT '', state TEXT NOT NULL, turns INTEGER NOT NULL DEFAULT 0)",
        "CREATE INDEX idx_consultations_owner_channel ON consultations (owner, channel)",
        "CREATE INDEX idx_consultations_updated ON consultations (updated)",
        # Deferred: a deletion removes the consultation first (which waits for a turn holding its
        # row) and its messages after, so the reference is checked at commit, not per statement.
        "CREATE TABLE messages (consultation_id TEXT NOT NULL REFERENCES consultations(id) "
        "DEFERRABLE INITIALLY DEFERRED, seq INTEGER NOT NULL, role TEXT NOT NULL, text TEXT NOT NULL, "
        "reply TEXT NOT NULL, created DOUBLE PRECISION NOT NULL, PRIMARY KEY (consultation_id, seq))",
        "CREATE TABLE snapshots (consultation_id TEXT NOT NULL REFERENCES consultations(id) "
        "DEFERRABLE INITIALLY DEFERRED, seq INTEGER NOT NULL, facts TEXT NOT NULL, "
        "PRIMARY KEY (consultation_id, seq))",
    )),
    Step(2, "rate-limit counters, one row per client and minute, shared by every worker and host", sqlite=(
        "CREATE TABLE IF NOT EXISTS rate_limits (client TEXT, minute INTEGER, hits INTEGER, "
        "PRIMARY KEY (client, minute))",
    ), postgresql=(
        "CREATE TABLE rate_limits (client TEXT NOT NULL, minute BIGINT NOT NULL, hits INTEGER NOT NULL, "
        "PRIMARY KEY (client, minute))",
    )),
    Step(3, "turns that can be retried without being stored twice; Slack's outbox and its post counts", sqlite=(
        "ALTER TABLE messages ADD COLUMN request_id TEXT",
        "CREATE UNIQUE INDEX idx_messages_request ON messages (consultation_id, request_id) "
        "WHERE request_id IS NOT NULL",
        "CREATE TABLE outbox (id TEXT PRIMARY KEY, kind TEXT NOT NULL, args TEXT NOT NULL, "
        "response_url TEXT NOT NULL, message TEXT, state TEXT NOT NULL, holder TEXT NOT NULL, due FLOAT NOT NULL, "
        "attempts INTEGER NOT NULL, created FLOAT NOT NULL)",
        "CREATE INDEX idx_outbox_due ON outbox (state, due)",
        "CREATE TABLE response_posts (url TEXT PRIMARY KEY, first FLOAT NOT NULL, posts INTEGER NOT NULL)",
    ), postgresql=(
        "ALTER TABLE messages ADD COLUMN request_id TEXT",
        "CREATE UNIQUE INDEX idx_messages_request ON messages (consultation_id, request_id) "
        "WHERE request_id IS NOT NULL",
        "CREATE TABLE outbox (id TEXT PRIMARY KEY, kind TEXT NOT NULL, args TEXT NOT NULL, "
        "response_url TEXT NOT NULL, message TEXT, state TEXT NOT NULL, holder TEXT NOT NULL, "
        "due DOUBLE PRECISION NOT NULL, attempts INTEGER NOT NULL, created DOUBLE PRECISION NOT NULL)",
        "CREATE INDEX idx_outbox_due ON outbox (state, due)",
        "CREATE TABLE response_posts (url TEXT PRIMARY KEY, first DOUBLE PRECISION NOT NULL, "
        "posts INTEGER NOT NULL)",
    )),
    Step(4, "deliveries already handled (a chat platform's event id), claimed once by one worker on any host", sqlite=(
        "CREATE TABLE deliveries (key TEXT PRIMARY KEY, seen FLOAT NOT NULL)",
        "CREATE INDEX idx_deliveries_seen ON deliveries (seen)",
    ), postgresql=(
        "CREATE TABLE deliveries (key TEXT PRIMARY KEY, seen DOUBLE PRECISION NOT NULL)",
        "CREATE INDEX idx_deliveries_seen ON deliveries (seen)",
    )),
)

SCHEMA_VERSION = STEPS[-1].version
# SQLite files below this version were made by code that created whichever tables were missing
# and then set the version: steps 1 and 2 are applied again on them (they create only what is missing).
SQLITE_RECHECKED_BELOW = 3


def after(version: int) -> list[Step]:
    """The steps a database at `version` still needs, in order."""
    return [step for step in STEPS if step.version > version]
