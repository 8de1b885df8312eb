"""The SQLite event store (the default): one file, stdlib ``sqlite3``."""

from decider.stores.sqlite.store import (
    SqliteEventStore,
)

__all__ = [
    "SqliteEventStore",
]
