"""Fixtures of the processor tests: the same tests on every store.

``store`` is parametrised over the in-memory store, SQLite (a file, full durability) and the
EventStoreDB adapter on an in-process test server (one server per test, so no test sees
another's log).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from stores.memory import MemoryEventStore
from stores.protocol import EventStore
from stores.sqlite import SqliteEventStore

STORES = ["memory", "sqlite", "esdb"]
_names = itertools.count()


def open_store(kind: str, tmp_path: Path) -> tuple[EventStore, list[object]]:
    """A fresh store of ``kind`` and what must be closed after it."""
    if kind == "memory":
        store: EventStore = MemoryEventStore()
        return store, [store]
    if kind == "sqlite":
        store = SqliteEventStore(tmp_path / "events.db")
        return store, [store]
    from stores.esdb import EsdbEventStore
    from stores.esdb_testserver import EsdbTestServer

    server = EsdbTestServer().start()
    store = EsdbEventStore(server.uri)
    return store, [store, server]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    """A fresh, empty store of each kind."""
    opened, resources = open_store(request.param, tmp_path)
    yield opened
    for resource in resources:
        if hasattr(resource, "close"):
            resource.close()
        else:
            resource.stop()  # type: ignore[attr-defined]


@pytest.fixture
def app_name() -> str:
    """A name no other test's app uses."""
    return f"app{next(_names)}"
