"""Fixtures of the EventStoreDB test-server tests: an in-process server and esdbclient.

These tests talk to the server only through ``esdbclient.EventStoreDBClient``, so each one
states a behaviour of real EventStoreDB that the server reproduces.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from esdbclient import EventStoreDBClient

from decider.stores.esdb.testserver import EsdbTestServer


@pytest.fixture(scope="session")
def esdb_server() -> Iterator[EsdbTestServer]:
    """One test server for the session (tests use unique stream names)."""
    with EsdbTestServer() as server:
        yield server


@pytest.fixture(scope="session")
def esdb_server_uri(esdb_server: EsdbTestServer) -> str:
    """``esdb://127.0.0.1:PORT?Tls=false`` of the session's server."""
    return esdb_server.uri


@pytest.fixture(scope="session")
def client(esdb_server_uri: str) -> Iterator[EventStoreDBClient]:
    """An esdbclient connected to the session's server."""
    client = EventStoreDBClient(esdb_server_uri)
    yield client
    client.close()


@pytest.fixture
def fresh_server() -> Iterator[EsdbTestServer]:
    """A server of its own, for tests that look at the whole log (it starts in milliseconds)."""
    with EsdbTestServer() as server:
        yield server


@pytest.fixture
def fresh_client(fresh_server: EsdbTestServer) -> Iterator[EventStoreDBClient]:
    """An esdbclient connected to :func:`fresh_server`."""
    client = EventStoreDBClient(fresh_server.uri)
    yield client
    client.close()


@pytest.fixture
def stream() -> str:
    """A stream name no other test uses."""
    return f"test-{uuid.uuid4().hex[:12]}"
