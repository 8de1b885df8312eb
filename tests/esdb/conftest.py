"""Fixtures of the EventStoreDB adapter tests: a server URI, real or in-process.

With ``ESDB_URI`` set (e.g. ``esdb://localhost:2113?Tls=false``) every adapter test runs
against that server; otherwise against one in-process test server for the session.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from decider.stores.esdb.testserver import EsdbTestServer


@pytest.fixture(scope="session")
def esdb_uri() -> Iterator[str]:
    """The URI of the EventStoreDB the adapter tests use."""
    real = os.environ.get("ESDB_URI")
    if real:
        yield real
        return
    with EsdbTestServer() as server:
        yield server.uri


@pytest.fixture(scope="session")
def session_node_uri() -> Iterator[str | None]:
    """The URI of a KurrentDB 25.1 node (``AppendSession``, no ``AppendRecords``): an in-process
    test server acting as one; ``None`` with ``ESDB_URI`` set (a real server is one version)."""
    if os.environ.get("ESDB_URI"):
        yield None
        return
    with EsdbTestServer(append_records=False) as server:
        yield server.uri
