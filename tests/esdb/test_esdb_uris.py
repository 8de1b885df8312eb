"""Every EventStoreDB/KurrentDB URI scheme opens the store, with whichever client is installed."""

from __future__ import annotations

import uuid

import pytest

from decider.stores._esdb_batch import open_esdb_store, supports_append_session
from decider.stores._esdb_client import SCHEMES
from decider.stores.errors import UnsupportedStoreURI
from decider.stores.esdb import CLIENT, EsdbEventStore
from decider.stores.esdb_testserver import EsdbTestServer
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


def test_the_store_is_transactional_only_where_client_and_server_can_be() -> None:
    for append_session in (True, False):
        with EsdbTestServer(append_session=append_session) as server:
            store = open_esdb_store(server.uri)
            try:
                expected = append_session and CLIENT.new_events is not None
                assert isinstance(store, TransactionalStore) is expected
                assert supports_append_session(store) is expected
                plain = open_esdb_store(server.uri, multi_stream_append=False)
                assert not isinstance(plain, TransactionalStore)
                plain.close()
            finally:
                store.close()


def test_open_store_gives_the_transactional_store_where_it_can(esdb_uri: str) -> None:
    store = open_store(esdb_uri)
    try:
        assert isinstance(store, EsdbEventStore)
        assert isinstance(store, TransactionalStore) is supports_append_session(store)
    finally:
        store.close()
