"""Every EventStoreDB/KurrentDB URI scheme opens the store, with whichever client is installed."""

from __future__ import annotations

import uuid

import pytest

from decider.stores.errors import UnsupportedStoreURI
from decider.stores.esdb._batch import (
    open_esdb_store,
    supports_append_records,
    supports_append_session,
)
from decider.stores.esdb._client import SCHEMES
from decider.stores.esdb.store import CLIENT, EsdbEventStore
from decider.stores.esdb.testserver import EsdbTestServer
from decider.stores.protocol import NO_STREAM, NewEvent, TransactionalStore
from decider.stores.uri import open_store


@pytest.mark.parametrize("scheme", SCHEMES)
def test_each_scheme_opens_the_store(scheme: str, esdb_uri: str) -> None:
    if not esdb_uri.startswith("esdb://"):
        pytest.skip("rewrites the in-process server's esdb:// URI")
    uri = scheme + esdb_uri.removeprefix("esdb")
    store = open_store(uri)
    try:
        assert isinstance(store, EsdbEventStore)
        stream = f"uri-{uuid.uuid4().hex[:12]}"
        store.append(stream, [NewEvent(id=uuid.uuid4(), type="Opened", data=b"{}")], NO_STREAM)
        assert [e.type for e in store.read_stream(stream)] == ["Opened"]
    finally:
        store.close()


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("kurrentdb://h:2113?Tls=false", "kurrentdb://h:2113?Tls=false"),
        ("kdb+discover://h:2113", "kdb+discover://h:2113"),
        ("esdb://h", "esdb://h"),
    ],
)
def test_client_uri_keeps_or_rewrites_the_scheme(uri: str, expected: str) -> None:
    if CLIENT.package == "esdbclient":  # it reads only esdb:// and esdb+discover://
        expected = "esdb" + ("+discover" if "+discover" in expected else "") + uri[uri.index(":") :]
    assert CLIENT.client_uri(uri) == expected


def test_a_bad_query_parameter_is_unsupported_uri() -> None:
    with pytest.raises(UnsupportedStoreURI):
        open_store("kurrentdb://localhost:2113?NoSuchKey=1")


@pytest.mark.parametrize("version", ["24.10", "25.1", "26.1"])
def test_the_store_is_transactional_only_where_client_and_server_can_be(version: str) -> None:
    node = EsdbTestServer(append_session=version != "24.10", append_records=version == "26.1")
    with node as server:
        assert server.version == version
        store = open_esdb_store(server.uri)
        try:
            # 26.1's AppendRecords is the store's own call (either client); 25.1's
            # AppendSession goes through kurrentdbclient's multi_append_to_stream
            session = version == "25.1" and CLIENT.new_events is not None
            assert isinstance(store, TransactionalStore) is (version == "26.1" or session)
            assert supports_append_records(store) is (version == "26.1")
            assert supports_append_session(store) is (
                version != "24.10" and CLIENT.new_events is not None
            )
            plain = open_esdb_store(server.uri, multi_stream_append=False)
            assert not isinstance(plain, TransactionalStore)
            plain.close()
        finally:
            store.close()


def test_open_store_gives_the_transactional_store_where_it_can(esdb_uri: str) -> None:
    store = open_store(esdb_uri)
    try:
        assert isinstance(store, EsdbEventStore)
        atomic = supports_append_records(store) or supports_append_session(store)
        assert isinstance(store, TransactionalStore) is atomic
    finally:
        store.close()
