"""Persistent subscriptions where the test server once differed from KurrentDB, through
esdbclient as an application uses it (and plain gRPC where esdbclient refuses to send the
request): refused settings, redelivery on the server's 1 s timer, ``RoundRobin``'s order, and
the start a group reports after an update. Each case is one that esdbclient's own upstream
tests found (``PersistentSubscriptionService.cs``, ``PersistentSubscription.cs`` and the
consumer strategies of KurrentDB 24.10)."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest
from esdbclient import EventStoreDBClient, NewEvent, StreamState
from esdbclient.exceptions import InternalError

from decider.stores.esdb._proto import persistent_pb2
from decider.stores.esdb.testserver import EsdbTestServer
from tests.esdb_server.esdb_server_helpers import commit_position, events
from tests.esdb_server.test_esdb_server_persistent import read, take
from tests.support.waiting import wait_until


def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def test_an_unknown_consumer_strategy_is_refused_as_an_internal_error(
    client: EventStoreDBClient,
) -> None:
    name = group()
    with pytest.raises(InternalError, match="Consumer strategy InvalidStrategy does not exist"):
        client.create_subscription_to_all(name, consumer_strategy="InvalidStrategy")  # type: ignore[call-overload]
    assert all(info.group_name != name for info in client.list_subscriptions())


def test_an_update_with_an_unknown_strategy_number_is_refused_and_keeps_the_group(
    esdb_server: EsdbTestServer, client: EventStoreDBClient, stream: str
) -> None:
    # esdbclient maps a strategy's name to Update's enum itself (an unknown name is its
    # KeyError); the server names an unknown number by the number, as .NET's ToString does
    name = group()
    client.create_subscription_to_stream(name, stream, consumer_strategy="Pinned")
    request = persistent_pb2.UpdateReq()
    request.options.group_name = name
    request.options.stream.stream_identifier.stream_name = stream.encode()
    request.options.stream.start.SetInParent()
    settings = request.options.settings
    settings.read_batch_size, settings.history_buffer_size = 20, 500
    settings.named_consumer_strategy = 7  # type: ignore[assignment]
    with grpc.insecure_channel(f"127.0.0.1:{esdb_server.port}") as channel:
        update = channel.unary_unary(
            "/event_store.client.persistent_subscriptions.PersistentSubscriptions/Update",
            request_serializer=persistent_pb2.UpdateReq.SerializeToString,
            response_deserializer=persistent_pb2.UpdateResp.FromString,
        )
        with pytest.raises(grpc.RpcError) as refused:
            update(request, timeout=10)
    assert refused.value.code() == grpc.StatusCode.INTERNAL
    assert refused.value.details() == (
        f"Subscription group {name} on stream {stream} failed: "
        "'Consumer strategy 7 does not exist.'"
    )
    assert client.get_subscription_info(name, stream).consumer_strategy == "Pinned"


def test_a_read_batch_not_smaller_than_the_history_buffer_is_refused(
    client: EventStoreDBClient,
) -> None:
    name = group()
    reason = "ReadBatchSize may not be greater than or equal to BufferSize"
    with pytest.raises(InternalError, match=reason):
        client.create_subscription_to_all(name, history_buffer_size=100)  # read batch 200
    client.create_subscription_to_all(name, history_buffer_size=300)
    with pytest.raises(InternalError, match=reason):
        client.update_subscription_to_all(name, read_batch_size=300)
    info = client.get_subscription_info(name)
    assert (info.read_batch_size, info.history_buffer_size) == (200, 300)


def test_an_event_never_acked_is_sent_max_retry_count_times_more_then_parked(
    client: EventStoreDBClient, stream: str
) -> None:
    # timeouts take effect on the server's 1 s tick: the acks of the later events, batched by
    # the client for up to 0.2 s, arrive after their 0.1 s timeout but before a tick, and count
    name = group()
    client.create_subscription_to_stream(name, stream, message_timeout=0.1, max_retry_count=3)
    first, second, third = events(3)
    client.append_to_stream(
        stream, current_version=StreamState.NO_STREAM, events=[first, second, third]
    )
    subscription = client.read_subscription_to_stream(name, stream, event_buffer_size=1)
    received = []
    try:
        for event in subscription:
            received.append(event)
            if event.id != first.id:
                subscription.ack(event)
            if len(received) == 6:
                break
    finally:
        subscription.stop()
    delivered = [(bytes(e.data), e.retry_count) for e in received]
    assert delivered == [(first.data, n) for n in range(4)] + [(second.data, 0), (third.data, 0)]
    [parked] = read(client, f"$persistentsubscription-{stream}::{name}-parked")
    assert parked.data == f"0@{stream}".encode()


def test_round_robin_hands_events_alternately_starting_with_the_first_consumer(
    client: EventStoreDBClient, stream: str
) -> None:
    name = group()
    client.create_subscription_to_stream(name, stream, consumer_strategy="RoundRobin")
    # each read returns once the server confirmed it: the first is connected first
    consumers = [client.read_subscription_to_stream(name, stream) for _ in range(2)]
    appended: list[NewEvent] = events(4)
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=appended)
    try:
        received = [[e.id for e in take(consumer, 2)] for consumer in consumers]
    finally:
        for consumer in consumers:
            consumer.stop()
    ids = [e.id for e in appended]
    assert received == [[ids[0], ids[2]], [ids[1], ids[3]]]


def _start_after_update(client: EventStoreDBClient, name: str, stream: str | None) -> Any:
    if stream is None:
        client.update_subscription_to_all(name, resolve_links=True)
        return client.get_subscription_info(name).start_from
    client.update_subscription_to_stream(name, stream, resolve_links=True)
    return client.get_subscription_info(name, stream).start_from


def test_a_group_reports_its_start_as_given_also_after_an_update(
    client: EventStoreDBClient, stream: str
) -> None:
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(3))
    last = commit_position(client.get_stream(stream)[-1])
    from_start, from_end, from_position = group(), group(), group()
    client.create_subscription_to_all(from_start)
    client.create_subscription_to_all(from_end, from_end=True)
    client.create_subscription_to_all(from_position, commit_position=last)
    stream_from_end, stream_from_one = group(), group()
    client.create_subscription_to_stream(stream_from_end, stream, from_end=True)
    client.create_subscription_to_stream(stream_from_one, stream, stream_position=1)
    # the log grows: a start is what was asked for, not where the log ended then
    client.append_to_stream(stream, current_version=2, events=events(1))
    assert _start_after_update(client, from_start, None) == "C:0/P:0"
    assert _start_after_update(client, from_end, None) == "C:-1/P:-1"
    assert _start_after_update(client, from_position, None) == f"C:{last}/P:{last}"
    assert _start_after_update(client, stream_from_end, stream) == "-1"
    assert _start_after_update(client, stream_from_one, stream) == "1"


def test_an_event_of_a_streams_group_comes_with_its_position(
    client: EventStoreDBClient, stream: str
) -> None:
    # servers from 22.10 on: kurrentdbclient refuses a persistent event without a position
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(2))
    name = group()
    client.create_subscription_to_stream(name, stream)
    subscription = client.read_subscription_to_stream(name, stream)
    try:
        received = take(subscription, 2)
    finally:
        subscription.stop()
    stored = client.get_stream(stream)
    assert [e.commit_position for e in received] == [commit_position(e) for e in stored]


def _in_flight(server: EsdbTestServer, name: str, stream: str) -> dict[str, int]:
    """Each connection's unacknowledged events, by connection name (``GetInfo`` over plain
    gRPC: esdbclient does not show the connections)."""
    request = persistent_pb2.GetInfoReq()
    request.options.group_name = name
    request.options.stream_identifier.stream_name = stream.encode()
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        get_info = channel.unary_unary(
            "/event_store.client.persistent_subscriptions.PersistentSubscriptions/GetInfo",
            request_serializer=persistent_pb2.GetInfoReq.SerializeToString,
            response_deserializer=persistent_pb2.GetInfoResp.FromString,
        )
        info = get_info(request, timeout=10).subscription_info
    return {c.connection_name: c.in_flight_messages for c in info.connections}


def test_dispatch_to_single_moves_a_full_first_consumer_behind_the_next(
    esdb_server: EsdbTestServer, stream: str
) -> None:
    # the head keeps taking while it has room; once full it goes to the tail for good
    name = group()
    first = EventStoreDBClient(f"{esdb_server.uri}&ConnectionName=first")
    second = EventStoreDBClient(f"{esdb_server.uri}&ConnectionName=second")
    first.create_subscription_to_stream(name, stream, consumer_strategy="DispatchToSingle")
    small = first.read_subscription_to_stream(
        name, stream, event_buffer_size=1, max_ack_batch_size=1
    )
    large = second.read_subscription_to_stream(name, stream, event_buffer_size=10)
    try:
        first.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(3))
        [held] = take(small, 1, ack=False)
        assert [e.stream_position for e in take(large, 2, ack=False)] == [1, 2]
        small.ack(held)
        wait_until(lambda: _in_flight(esdb_server, name, stream) == {"first": 0, "second": 2})
        first.append_to_stream(stream, current_version=2, events=events(1))
        wait_until(lambda: _in_flight(esdb_server, name, stream) == {"first": 0, "second": 3})
    finally:
        for subscription in (small, large):
            subscription.stop()
        first.close()
        second.close()
