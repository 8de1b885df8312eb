"""What the EventStoreDB adapter adds beyond the contract: error mapping, checkpoints in
streams, server-side filters, and subscriptions that end when the server goes away."""

from __future__ import annotations

import importlib
import json
import re
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from decider.stores.errors import (
    StoreError,
    StoreUnavailable,
    StreamDeleted,
    UnsupportedStoreURI,
    WrongExpectedVersion,
)
from decider.stores.esdb._errors import map_error
from decider.stores.esdb._filters import server_filter
from decider.stores.esdb.store import (
    CHECKPOINT_EVENT_TYPE,
    CHECKPOINT_STREAM_PREFIX,
    CLIENT,
    EsdbEventStore,
)
from decider.stores.esdb.testserver import EsdbTestServer
from decider.stores.protocol import ALL, ANY, EXISTS, NO_STREAM, CaughtUp, Filter, NewEvent


@pytest.fixture
def store(esdb_uri: str) -> Iterator[EsdbEventStore]:
    store = EsdbEventStore(esdb_uri)
    yield store
    store.close()


@pytest.fixture
def name() -> str:
    return f"adapter-{uuid.uuid4().hex[:12]}"


def new(count: int, event_type: str = "Tested") -> list[NewEvent]:
    return [NewEvent(id=uuid.uuid4(), type=event_type, data=b'{"a":1}') for _ in range(count)]


def client_error(esdb_name: str, kurrentdb_name: str, message: str) -> Exception:
    """An exception of the installed client package (the two name their classes apart)."""
    module = importlib.import_module(CLIENT.package + ".exceptions")
    kind = getattr(module, esdb_name if CLIENT.package == "esdbclient" else kurrentdb_name)
    error: Exception = kind(message)
    return error


def EventStoreDBClient(uri: str) -> Any:
    """A plain client of the installed package."""
    return CLIENT.client_class(uri)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            client_error(
                "WrongCurrentVersion",
                "WrongCurrentVersionError",
                "Stream position of last event is 4 not 3",
            ),
            4,
        ),
        (
            client_error(
                "WrongCurrentVersion", "WrongCurrentVersionError", "Stream 's' does not exist"
            ),
            None,
        ),
    ],
)
def test_wrong_version_carries_the_actual_revision(error: Exception, expected: int | None) -> None:
    mapped = map_error(error, "s", 3)
    assert isinstance(mapped, WrongExpectedVersion)
    assert (mapped.stream, mapped.expected, mapped.actual) == ("s", 3, expected)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (
            client_error("StreamIsDeleted", "StreamIsDeletedError", "Stream 's' is deleted"),
            StreamDeleted,
        ),
        (
            client_error(
                "FailedPrecondition", "FailedPreconditionError", "Event stream 's' is deleted."
            ),
            StreamDeleted,
        ),
        (client_error("ServiceUnavailable", "ServiceUnavailableError", "down"), StoreUnavailable),
        (
            client_error("GrpcDeadlineExceeded", "GrpcDeadlineExceededError", "slow"),
            StoreUnavailable,
        ),
        (
            client_error("AppendDeadlineExceeded", "AppendDeadlineExceededError", "slow"),
            StoreUnavailable,
        ),
        (client_error("DiscoveryFailed", "DiscoveryFailedError", "no leader"), StoreUnavailable),
        (client_error("AccessDeniedError", "AccessDeniedError", "no"), StoreError),
    ],
)
def test_error_kinds(error: Exception, kind: type[StoreError]) -> None:
    mapped = map_error(error, "s")
    assert type(mapped) is kind


def test_tombstoned_stream_is_stream_deleted(
    store: EsdbEventStore, esdb_uri: str, name: str
) -> None:
    store.append(name, new(1), NO_STREAM)
    with EventStoreDBClient(esdb_uri) as client:
        client.tombstone_stream(name, current_version=0)
    for events in (new(1), new(2)):
        with pytest.raises(StreamDeleted) as caught:
            store.append(name, events, ANY)
        assert caught.value.stream == name
    with pytest.raises(StreamDeleted):
        store.read_stream(name)


def test_soft_deleted_stream_reads_as_empty(
    store: EsdbEventStore, esdb_uri: str, name: str
) -> None:
    store.append(name, new(2), NO_STREAM)
    with EventStoreDBClient(esdb_uri) as client:
        client.delete_stream(name, current_version=1)
    assert store.read_stream(name) == []
    result = store.append(name, new(1), 1)
    assert result.next_expected_revision == 2
    assert [e.revision for e in store.read_stream(name)] == [2]


def test_unreachable_server_is_store_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = EsdbEventStore(f"esdb://127.0.0.1:{port}?Tls=false")
    try:
        with pytest.raises(StoreUnavailable):
            store.append("s", new(1), ANY)
        with pytest.raises(StoreUnavailable):
            store.read_all(None, 1)
    finally:
        store.close()


@pytest.mark.parametrize("uri", ["http://localhost:2113", "esdb://localhost:2113?Bogus=1"])
def test_bad_uri(uri: str) -> None:
    with pytest.raises(UnsupportedStoreURI):
        EsdbEventStore(uri)


def test_closed_store_refuses_calls(esdb_uri: str) -> None:
    store = EsdbEventStore(esdb_uri)
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.read_stream("s")


def test_close_returns_once_no_thread_works_on_the_append_call(
    store: EsdbEventStore, name: str
) -> None:
    # a daemon thread still in the call when the interpreter exits may be frozen holding the
    # call's lock, which the call's __del__ then waits for (tests/esdb/test_esdb_exit.py)
    store.append(name, new(1), NO_STREAM)
    call = store._line._call
    assert call is not None
    store.close()
    assert not call.reader.is_alive()
    assert call.consumer is not None
    assert not call.consumer.is_alive()
    assert call.responses._state.due == set()  # what _client.settle waits for, gRPC's names


def test_bad_input_is_refused_before_any_call(store: EsdbEventStore, name: str) -> None:
    with pytest.raises(ValueError, match="at least one event"):
        store.append(name, [], ANY)
    with pytest.raises(ValueError, match="expected revision"):
        store.append(name, new(1), -1)
    with pytest.raises(ValueError, match="limit"):
        store.read_all(None, -1)


def test_idempotent_reappend_with_any_finds_the_stored_revision(
    store: EsdbEventStore, name: str
) -> None:
    first = new(2)
    original = store.append(name, first, NO_STREAM)
    for _ in range(3):
        store.append(name, new(10), ANY)
    for expected in (ANY, EXISTS, NO_STREAM):
        assert store.append(name, first, expected) == original


def test_checkpoints_live_in_a_stream_hidden_from_user_reads(
    store: EsdbEventStore, esdb_uri: str, name: str
) -> None:
    store.save_checkpoint(name, 42)
    store.save_checkpoint(name, 43)
    assert store.load_checkpoint(name) == 43
    with EventStoreDBClient(esdb_uri) as client:
        stored = client.get_stream(CHECKPOINT_STREAM_PREFIX + name)
        assert {e.type for e in stored} == {CHECKPOINT_EVENT_TYPE}
        # esdbclient's default filter hides them too
        assert CHECKPOINT_STREAM_PREFIX + name not in {
            e.stream_name for e in client.read_all(backwards=True, limit=50)
        }
    everything = store.read_all(None, None, Filter(stream_prefixes=(CHECKPOINT_STREAM_PREFIX,)))
    assert not [e for e in everything if e.stream == CHECKPOINT_STREAM_PREFIX + name]


def test_two_writers_of_one_checkpoint_race_without_errors(esdb_uri: str, name: str) -> None:
    # two processes of one app on one node save the same checkpoints: the last save wins
    first, second = EsdbEventStore(esdb_uri), EsdbEventStore(esdb_uri)
    try:
        first.save_checkpoint(name, 1)
        second.save_checkpoint(name, 2)
        first.save_checkpoint(name, 3)
        assert second.load_checkpoint(name) == 3
        second.save_checkpoint(name, 4)
        assert first.load_checkpoint(name) == 4
        stored = first.read_stream(CHECKPOINT_STREAM_PREFIX + name)
        assert [json.loads(e.data)["position"] for e in stored] == [1, 2, 3, 4]
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize(
    ("filter", "stream", "event_type", "passes"),
    [
        (Filter(stream_prefixes=("a.b-",)), "a.b-1", "T", True),
        (Filter(stream_prefixes=("a.b-",)), "axb-1", "T", False),
        (Filter(stream_prefixes=("a-", "b-")), "x-b-1", "T", False),
        (Filter(event_types=("Paid",)), "s", "Paid", True),
        (Filter(event_types=("Paid",)), "s", "PaidLate", False),
        (Filter(event_type_prefixes=("Order.",)), "s", "Order.Placed", True),
        (Filter(event_type_prefixes=("Order.",)), "s", "OrderXPlaced", False),
        (ALL, "s", "$metadata", False),
        (ALL, "s", "Paid", True),
        (Filter(include_system=True), "s", "$metadata", True),
    ],
)
def test_server_filters_select_what_the_filter_would(
    filter: Filter, stream: str, event_type: str, passes: bool
) -> None:
    arguments = server_filter(filter)
    subject = stream if arguments.get("filter_by_stream_name") else event_type
    # the regexes esdbclient builds (common.construct_filter_*_regex), searched as .NET does
    if arguments.get("filter_include"):
        regex = "^" + "|".join(arguments["filter_include"]) + "$"
    elif arguments.get("filter_exclude"):
        regex = "^(?!(" + "|".join(p + "$" for p in arguments["filter_exclude"]) + "))"
    else:
        regex = ""
    assert (re.search(regex, subject) is not None) is passes


def test_subscription_ends_with_an_error_when_the_server_goes_away() -> None:
    server = EsdbTestServer().start()
    store = EsdbEventStore(server.uri)
    try:
        subscription = store.subscribe(None, ALL)
        assert isinstance(subscription.poll(5.0), CaughtUp)
        server.stop()
        with pytest.raises(StoreUnavailable):
            subscription.poll(5.0)
        assert subscription.poll(0) is None
    finally:
        store.close()
        server.stop()


def test_close_stops_open_subscriptions(esdb_uri: str) -> None:
    store = EsdbEventStore(esdb_uri)
    subscriptions = [store.subscribe(None, ALL) for _ in range(3)]
    store.close()
    assert all(s.stopped for s in subscriptions)
    # ended, not left inside their calls (see test_close_returns_once_no_thread_works_on...)
    assert all(s._thread is not None and not s._thread.is_alive() for s in subscriptions)
    assert all(s.poll(1.0) is None for s in subscriptions)
