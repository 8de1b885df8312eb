"""Fixtures of the processor tests: the same tests on every store.

``store`` is parametrised over the in-memory store, SQLite (a file, full durability), the
EventStoreDB adapter on an in-process test server (one server per test, so no test sees
another's log) and PostgreSQL (a fresh schema per test on ``PG_URI``, dropped afterwards).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from decider.stores.memory import MemoryEventStore
from decider.stores.protocol import EventStore
from decider.stores.sqlite import SqliteEventStore

STORES = ["memory", "sqlite", "esdb", "postgres"]
_names = itertools.count()


def open_store(kind: str, tmp_path: Path) -> tuple[EventStore, list[Callable[[], None]]]:
    """A fresh store of ``kind`` and what to call, in order, to clean up after it."""
    if kind == "memory":
        store: EventStore = MemoryEventStore()
        return store, [store.close]
    if kind == "sqlite":
        store = SqliteEventStore(tmp_path / "events.db")
        return store, [store.close]
    if kind == "postgres":
        import psycopg

        from decider.stores.postgres import PostgresEventStore
        from tests.pg_support import PG_URI, drop_schema, new_schema_name

        schema = new_schema_name()
        try:
            store = PostgresEventStore(PG_URI, schema=schema)
        except BaseException:
            with contextlib.suppress(psycopg.Error):  # keep the first error
                drop_schema(schema)
            raise
        return store, [store.close, lambda: drop_schema(schema)]
    from decider.stores._esdb_batch import open_esdb_store
    from decider.stores.esdb_testserver import EsdbTestServer

    server = EsdbTestServer().start()
    store = open_esdb_store(server.uri)  # transactional with kurrentdbclient (AppendSession)
    return store, [store.close, server.stop]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    """A fresh, empty store of each kind."""
    opened, cleanups = open_store(request.param, tmp_path)
    try:
        yield opened
    finally:
        for cleanup in cleanups:
            cleanup()


@pytest.fixture
def app_name() -> str:
    """A name no other test's app uses."""
    return f"app{next(_names)}"
