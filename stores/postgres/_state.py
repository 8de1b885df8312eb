"""The PostgreSQL store's state table: the rows of state-stored workflow instances.

Created on first use, under the schema's advisory lock. Each row is written in the transaction
of the outbox appends and the checkpoint (:class:`~decider.stores.protocol.StateStore`), with an
optimistic version check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql as pgsql

from decider.stores.errors import WrongExpectedVersion
from decider.stores.postgres._snapshots import OnDemandTable, Using
from decider.stores.postgres._sql import LOCK_CLASS, lock_key
from decider.stores.protocol import StateWrite, StoredState


class PostgresStates:
    """The states table of one store's schema."""

    def __init__(self, schema: str) -> None:
        s = pgsql.Identifier(schema).as_string(None)
        table = f"{s}.states"
        self._exists = "SELECT to_regclass('" + table.replace("'", "''") + "') IS NOT NULL"
        self._create = f"""
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT pg_advisory_xact_lock({LOCK_CLASS}, {lock_key(schema)});
CREATE TABLE IF NOT EXISTS {table} (
    key     text   PRIMARY KEY,
    version bigint NOT NULL,
    data    bytea  NOT NULL
);
COMMIT;
"""
        self._load = f"SELECT version, data FROM {table} WHERE key = %s"
        self._insert = (
            f"INSERT INTO {table} (key, version, data) VALUES (%s, %s, %s)"
            " ON CONFLICT (key) DO NOTHING RETURNING 1"
        )
        checked = "WHERE key = %s AND version = %s RETURNING 1"
        self._update = f"UPDATE {table} SET version = %s, data = %s {checked}"
        self._version = f"SELECT version FROM {table} WHERE key = %s"
        self._table = OnDemandTable(self._exists, self._create)

    def load(self, using: Using, key: str) -> StoredState | None:
        """The stored state of ``key``, or ``None``."""
        self.ensure(using)
        with using() as connection:
            row = connection.execute(self._load, (key,)).fetchone()
        return None if row is None else StoredState(int(row[0]), bytes(row[1]))

    def write(self, connection: Any, states: Sequence[StateWrite]) -> None:
        """Write ``states`` inside the caller's write transaction; raises
        :class:`~decider.stores.errors.WrongExpectedVersion` on the first failed check."""
        for state in states:
            if state.expected_version == 0:
                cursor = connection.execute(self._insert, (state.key, state.version, state.data))
            else:
                cursor = connection.execute(
                    self._update, (state.version, state.data, state.key, state.expected_version)
                )
            if cursor.fetchone() is None:
                found = connection.execute(self._version, (state.key,)).fetchone()
                raise WrongExpectedVersion(
                    state.key, state.expected_version, None if found is None else int(found[0])
                )

    def ensure(self, using: Using) -> None:
        """Create the table if this store has not seen it yet."""
        self._table.ensure(using)
