"""The EventStoreDB adapter passes the shared store contract."""

from collections.abc import Iterator

import pytest

from decider.stores.contract import EventStoreContract
from decider.stores.esdb._batch import open_esdb_store
from decider.stores.esdb.store import CLIENT, EsdbEventStore
from decider.stores.protocol import TransactionalStore


class TestEsdbStore(EventStoreContract):
    @pytest.fixture
    def store(self, esdb_uri: str) -> Iterator[EsdbEventStore]:
        store = EsdbEventStore(esdb_uri)
        yield store
        store.close()


class TestTransactionalEsdbStore(EventStoreContract):
    """The store :func:`open_esdb_store` opens: a TransactionalStore on a server that offers
    AppendRecords (KurrentDB 26.1, the test server: either client), or AppendSession (25.1,
    with kurrentdbclient)."""

    @pytest.fixture
    def store(self, esdb_uri: str) -> Iterator[EsdbEventStore]:
        store = open_esdb_store(esdb_uri)
        if not isinstance(store, TransactionalStore):
            store.close()
            pytest.skip(f"no atomic multi-stream append with {CLIENT.package} on this server")
        yield store
        store.close()


class TestSessionEsdbStore(EventStoreContract):
    """The store :func:`open_esdb_store` opens on a KurrentDB 25.1 node: with kurrentdbclient,
    a TransactionalStore whose batches are ``AppendSession`` calls."""

    @pytest.fixture
    def store(self, session_node_uri: str | None) -> Iterator[EsdbEventStore]:
        if session_node_uri is None:
            pytest.skip("ESDB_URI names one server: the 26.1 tests above run on it")
        store = open_esdb_store(session_node_uri)
        if not isinstance(store, TransactionalStore):
            store.close()
            pytest.skip(f"no AppendSession with {CLIENT.package}")
        yield store
        store.close()
