"""The EventStoreDB adapter passes the shared store contract."""

from collections.abc import Iterator

import pytest

from decider.stores.contract import EventStoreContract
from decider.stores.esdb import EsdbEventStore


class TestEsdbStore(EventStoreContract):
    @pytest.fixture
    def store(self, esdb_uri: str) -> Iterator[EsdbEventStore]:
        store = EsdbEventStore(esdb_uri)
        yield store
        store.close()
