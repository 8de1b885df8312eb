"""Fixtures of the processor tests: the same tests on every store.

``store`` is parametrised over every kind :func:`tests.support.stores.open_store` opens: the
in-memory store, SQLite, the EventStoreDB adapter on an in-process test server and PostgreSQL
(a fresh schema per test on ``PG_URI``, dropped afterwards).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from decider.stores.protocol import EventStore
from tests.support.stores import STORES, open_store

_names = itertools.count()


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
