"""Fixtures of the sample apps' service tests: the same test on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path

import pytest

from decider.stores.memory import MemoryEventStore
from decider.stores.protocol import EventStore, Filter, RecordedEvent
from decider.stores.sqlite import SqliteEventStore


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    """A fresh, empty store of each kind the samples run on."""
    if request.param == "postgres":
        from tests.pg_support import fresh_store

        with fresh_store() as pg:
            yield pg
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
