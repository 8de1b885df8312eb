"""Fixtures of the sample apps' service tests: the same test on every store."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path

import pytest

from decider.stores.memory import MemoryEventStore
from decider.stores.protocol import EventStore, Filter, RecordedEvent
from decider.stores.sqlite import SqliteEventStore


@pytest.fixture(params=["memory", "sqlite", "postgres", "esdb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    """A fresh, empty store of each kind the samples run on (EventStoreDB: the in-process
    test server, one per test)."""
    if request.param == "postgres":
        from tests.pg_support import fresh_store

        with fresh_store() as pg:
            yield pg
        return
    if request.param == "esdb":
        from decider.stores.esdb import EsdbEventStore
        from decider.stores.esdb_testserver import EsdbTestServer

        server = EsdbTestServer().start()
        try:
            esdb = EsdbEventStore(server.uri)
            try:
                yield esdb
            finally:
                esdb.close()
        finally:
            server.stop()
        return
    opened: EventStore = (
        MemoryEventStore() if request.param == "memory" else SqliteEventStore(tmp_path / "e.db")
    )
    try:
        yield opened
    finally:
        opened.close()


def events(store: EventStore, prefix: str) -> list[RecordedEvent]:
    """Every event of the streams starting with ``prefix``, in log order."""
    found: list[RecordedEvent] = []
    after: int | None = None
    while page := store.read_all(after, 1000, Filter(stream_prefixes=(prefix,))):
        found.extend(page)
        after = page[-1].position
    return found


def counts(store: EventStore, prefix: str) -> collections.Counter[str]:
    """How many events each stream starting with ``prefix`` holds."""
    return collections.Counter(e.stream for e in events(store, prefix))
