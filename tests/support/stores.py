"""A fresh store of each kind, and readers of what a store holds.

``open_store`` gives the in-memory store, SQLite (a file, full durability), the EventStoreDB
adapter on an in-process test server (one server per store, so no test sees another's log) or
PostgreSQL (a fresh schema on ``PG_URI``, dropped afterwards).
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable
from pathlib import Path

from decider.stores.memory import MemoryEventStore
from decider.stores.protocol import EventStore, Filter, RecordedEvent
from decider.stores.sqlite import SqliteEventStore

STORES = ["memory", "sqlite", "esdb", "postgres"]
"""Every kind of store :func:`open_store` opens."""


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
        from tests.support.postgres import PG_URI, drop_schema, new_schema_name

        schema = new_schema_name()
        try:
            store = PostgresEventStore(PG_URI, schema=schema)
        except BaseException:
            with contextlib.suppress(psycopg.Error):  # keep the first error
                drop_schema(schema)
            raise
        return store, [store.close, lambda: drop_schema(schema)]
    from decider.stores.esdb._batch import open_esdb_store
    from decider.stores.esdb.testserver import EsdbTestServer

    server = EsdbTestServer().start()
    store = open_esdb_store(server.uri)  # transactional with kurrentdbclient (AppendSession)
    return store, [store.close, server.stop]


def events(store: EventStore, prefix: str = "") -> list[RecordedEvent]:
    """Every event of streams starting with ``prefix``, in log order."""
    found: list[RecordedEvent] = []
    after: int | None = None
    flt = Filter(stream_prefixes=(prefix,)) if prefix else Filter()
    while page := store.read_all(after, 1000, flt):
        found.extend(page)
        after = page[-1].position
    return found


def counts(store: EventStore, prefix: str = "") -> collections.Counter[str]:
    """How many events each stream starting with ``prefix`` holds."""
    return collections.Counter(e.stream for e in events(store, prefix))


def types(store: EventStore, stream: str) -> list[str]:
    """The event types of ``stream``, in order."""
    return [e.type for e in store.read_stream(stream)]


def instance_streams(store: EventStore, prefix: str) -> dict[str, list[RecordedEvent]]:
    """Every stream starting with ``prefix``, with its events."""
    streams: dict[str, list[RecordedEvent]] = {}
    for event in events(store, prefix):
        streams.setdefault(event.stream, []).append(event)
    return streams
