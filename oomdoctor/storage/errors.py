"""What a store raises, whichever database is behind it."""
from __future__ import annotations


class StorageError(RuntimeError):
    """The database cannot be used (corrupt, read-only, unreachable, wrong schema); said once at start,
    and a 503 at run time."""


class NotFound(KeyError):
    pass
