"""The PostgreSQL store's snapshot table: the latest snapshot of each stream, beside the events.

The table is created on first use (stores opened before snapshots existed gain it then), under
the schema's advisory lock, as the store's other tables are. A snapshot is a cache of a fold
(:class:`~decider.stores.protocol.SnapshotStore`): it is written in its own transaction, after
the events it reflects are committed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import psycopg
from psycopg import sql as pgsql
from psycopg.pq import TransactionStatus

from decider.stores.postgres._sql import LOCK_CLASS, lock_key
from decider.stores.protocol import Snapshot

_OPEN = (TransactionStatus.INTRANS, TransactionStatus.INERROR)

Using = Callable[[], AbstractContextManager[Any]]
"""The store's ``_using``: its thread's connection, with psycopg's errors mapped."""


class PostgresSnapshots:
    """The snapshots table of one store's schema."""

    def __init__(self, schema: str) -> None:
        s = pgsql.Identifier(schema).as_string(None)
        table = f"{s}.snapshots"
        self._exists = f"SELECT to_regclass({_literal(table)}) IS NOT NULL"
        self._create = f"""
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT pg_advisory_xact_lock({LOCK_CLASS}, {lock_key(schema)});
CREATE TABLE IF NOT EXISTS {table} (
    stream        text   PRIMARY KEY,
    revision      bigint NOT NULL,  -- the last stream revision folded into it
    state_version text   NOT NULL,
    data          bytea  NOT NULL
);
COMMIT;
"""
        self._load = f"SELECT revision, state_version, data FROM {table} WHERE stream = %s"
        # The WHERE clause is decider.stores._snapshots.replaces, in SQL.
        self._save = (
            f"INSERT INTO {table} AS t (stream, revision, state_version, data)"
            " VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (stream) DO UPDATE SET revision = excluded.revision,"
            " state_version = excluded.state_version, data = excluded.data"
            " WHERE t.state_version <> excluded.state_version OR t.revision <= excluded.revision"
        )
        self._table = OnDemandTable(self._exists, self._create)

    def load(self, using: Using, stream: str) -> Snapshot | None:
        """The stored snapshot of ``stream``, or ``None``."""
        self._ensure(using)
        with using() as connection:
            row = connection.execute(self._load, (stream,)).fetchone()
        if row is None:
            return None
        revision, state_version, data = row
        return Snapshot(int(revision), str(state_version), bytes(data))

    def save(self, using: Using, stream: str, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` unless the stored one is of its state version and later."""
        self._ensure(using)
        with using() as connection:
            connection.execute(
                self._save, (stream, snapshot.revision, snapshot.state_version, snapshot.data)
            )

    def _ensure(self, using: Using) -> None:
        self._table.ensure(using)


class OnDemandTable:
    """A table created the first time a store needs it: ``exists`` tells whether it is there,
    ``create`` is the script (its own transaction) that makes it."""

    def __init__(self, exists: str, create: str) -> None:
        self._exists = exists
        self._create = create
        self._ready = False
        self._lock = threading.Lock()

    def ensure(self, using: Using) -> None:
        """Create the table if this store has not seen it yet (once per store object)."""
        if not self._ready:
            self._create_once(using)

    def _create_once(self, using: Using) -> None:
        with self._lock, using() as connection:
            if self._ready:
                return
            (exists,) = connection.execute(self._exists).fetchone()
            if not exists:
                try:  # the script begins and commits its own transaction
                    connection.execute(self._create)
                except BaseException:
                    if connection.info.transaction_status in _OPEN:
                        with contextlib.suppress(psycopg.Error):
                            connection.execute("ROLLBACK")
                    raise
            self._ready = True


def _literal(name: str) -> str:
    return "'" + name.replace("'", "''") + "'"
