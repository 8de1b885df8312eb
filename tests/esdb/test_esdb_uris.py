"""Every EventStoreDB/KurrentDB URI scheme opens the store, with whichever client is installed."""

from __future__ import annotations

import uuid

import pytest

from decider.stores._esdb_client import CLIENT, SCHEMES
from decider.stores.errors import UnsupportedStoreURI
from decider.stores.esdb import EsdbEventStore
from decider.stores.protocol import NO_STREAM, NewEvent
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
