"""The EventStoreDB adapter passes the shared store contract."""

from collections.abc import Iterator

import pytest

from decider.stores._esdb_batch import open_esdb_store
from decider.stores.contract import EventStoreContract
from decider.stores.esdb import CLIENT, EsdbEventStore
from decider.stores.protocol import TransactionalStore


class TestEsdbStore(EventStoreContract):
    @pytest.fixture
    def store(self, esdb_uri: str) -> Iterator[EsdbEventStore]:
        store = EsdbEventStore(esdb_uri)
        yield store
        store.close()


class TestTransactionalEsdbStore(EventStoreContract):
    """The store :func:`open_esdb_store` opens: with kurrentdbclient on a server that offers
    AppendSession (the test server does), a TransactionalStore."""

    @pytest.fixture
    def store(self, esdb_uri: str) -> Iterator[EsdbEventStore]:
        store = open_esdb_store(esdb_uri)
        if not isinstance(store, TransactionalStore):
            store.close()
            pytest.skip(f"no atomic multi-stream append with {CLIENT.package} on this server")
        yield store
        store.close()
