"""The SQLite store's snapshot table: the latest snapshot of each stream, beside the events.

A snapshot is a cache of a fold (:class:`~decider.stores.protocol.SnapshotStore`): it is
written in its own transaction, after the events it reflects are committed.
"""

from __future__ import annotations

SCHEMA = """
CREATE TABLE IF NOT EXISTS snapshots (
    stream        TEXT    PRIMARY KEY,
    revision      INTEGER NOT NULL,   -- the last stream revision folded into it
    state_version TEXT    NOT NULL,
    data          BLOB    NOT NULL
) WITHOUT ROWID;
"""

LOAD = "SELECT revision, state_version, data FROM snapshots WHERE stream = ?"

# The WHERE clause is decider.stores._snapshots.replaces, in SQL.
SAVE = (
    "INSERT INTO snapshots (stream, revision, state_version, data) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (stream) DO UPDATE SET revision = excluded.revision,"
    " state_version = excluded.state_version, data = excluded.data"
    " WHERE snapshots.state_version <> excluded.state_version"
    " OR snapshots.revision <= excluded.revision"
)
