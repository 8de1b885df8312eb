"""The SQLite store's state table: the rows of state-stored workflow instances.

Each row is written in the transaction of the outbox appends and the checkpoint
(:class:`~decider.stores.protocol.StateStore`), with an optimistic version check.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from decider.stores.errors import WrongExpectedVersion
from decider.stores.protocol import StateWrite, StoredState

SCHEMA = """
CREATE TABLE IF NOT EXISTS states (
    key     TEXT    PRIMARY KEY,
    version INTEGER NOT NULL,
    data    BLOB    NOT NULL
) WITHOUT ROWID;
"""

LOAD = "SELECT version, data FROM states WHERE key = ?"
INSERT = "INSERT INTO states (key, version, data) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING"
UPDATE = "UPDATE states SET version = ?, data = ? WHERE key = ? AND version = ?"


def load(rows: list[tuple[int, bytes]]) -> StoredState | None:
    """The state a :data:`LOAD` query's rows hold."""
    return StoredState(int(rows[0][0]), bytes(rows[0][1])) if rows else None


def write(connection: sqlite3.Connection, states: Sequence[StateWrite]) -> None:
    """Write ``states`` inside the caller's write transaction; raises
    :class:`~decider.stores.errors.WrongExpectedVersion` on the first failed version check."""
    for state in states:
        if state.expected_version == 0:
            cursor = connection.execute(INSERT, (state.key, state.version, state.data))
        else:
            cursor = connection.execute(
                UPDATE, (state.version, state.data, state.key, state.expected_version)
            )
        if cursor.rowcount != 1:
            row = connection.execute("SELECT version FROM states WHERE key = ?", (state.key,))
            found = row.fetchone()
            raise WrongExpectedVersion(
                state.key, state.expected_version, None if found is None else int(found[0])
            )
