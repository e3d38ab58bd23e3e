"""Where consultations live: one interface (`Store`), two databases.

`Store(database)` opens what OOMDOCTOR_DATABASE names (`oomdoctor.config.database` reads it):
an SQLite file (a path or `sqlite:///path`, the default, for one host) or a PostgreSQL
server (`postgresql://…`, for several hosts behind one address). Both keep the same
things with the same semantics: consultations, turns in optimistic order, a fact
snapshot per turn, retention, rate-limit counters, the Slack outbox; both apply the
schema's migrations at start (`migrations.py`).
"""
from __future__ import annotations

from .errors import NotFound, StorageError
from .migrations import SCHEMA_VERSION
from .sqlite import SQLiteStore, explain, keep_open
from .store import TURN_TRIES, OutboxEntry, Store

__all__ = ["NotFound", "OutboxEntry", "SCHEMA_VERSION", "SQLiteStore", "Store", "StorageError", "TURN_TRIES",
           "explain", "keep_open"]
