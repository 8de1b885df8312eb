"""Fixtures of the service tests: a store that another process can open (on each kind, or an
SQLite file), and the service processes a test starts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from decider.stores.protocol import EventStore
from decider.stores.uri import open_store
from tests.support.postgres import PG_URI, fresh_schema
from tests.support.service import ServiceProcess


@pytest.fixture(params=["sqlite", "postgres", "esdb"])
def uri(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store another process can open: an SQLite file, a fresh PostgreSQL schema, or an
    EventStoreDB test server of this process."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'events.db'}"
    elif request.param == "postgres":
        with fresh_schema() as schema:
            yield f"{PG_URI}?schema={schema}"
    else:
        from decider.stores.esdb.testserver import EsdbTestServer

        server = EsdbTestServer().start()
        try:
            yield server.uri
        finally:
            server.stop()


@pytest.fixture
def store(uri: str) -> Iterator[EventStore]:
    opened = open_store(uri)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[tuple[str, EventStore]]:
    """An SQLite file's URI, for the service processes to open, and this process's store on it."""
    uri = f"sqlite:///{tmp_path / 'events.db'}"
    opened = open_store(uri)
    try:
        yield uri, opened
    finally:
        opened.close()


@pytest.fixture
def processes() -> Iterator[list[ServiceProcess]]:
    """The service processes a test starts (it appends them), ended after the test."""
    started: list[ServiceProcess] = []
    try:
        yield started
    finally:
        for process in started:
            process.cleanup()
