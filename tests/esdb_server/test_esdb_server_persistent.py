"""Persistent subscriptions on the test server, used through esdbclient as an application
would: groups, competing consumers, acks, retries, parking, replay, checkpoints."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import grpc
import pytest
from esdbclient import EventStoreDBClient, StreamState
from esdbclient.exceptions import AlreadyExists, NotFound

from decider.stores.esdb._proto import shared_pb2
from decider.stores.esdb.testserver import EsdbTestServer
from tests.esdb_server.esdb_server_helpers import events
from tests.support.waiting import wait_until


def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def read(client: EventStoreDBClient, stream: str) -> list[Any]:
    """The stream's events, none if it does not exist (yet)."""
    try:
        return list(client.get_stream(stream))
    except NotFound:
        return []


def take(subscription: Any, count: int, *, ack: bool = True) -> list[Any]:
    """The next ``count`` events of a persistent subscription (acked unless told not to)."""
    received = []
    for event in subscription:
        received.append(event)
        if ack:
            subscription.ack(event)
        if len(received) == count:
            break
    return received


def restart_subsystem(server: EsdbTestServer) -> None:
    """``RestartSubsystem`` (esdbclient has no call for it), over plain gRPC."""
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        call = channel.unary_unary(
            "/event_store.client.persistent_subscriptions.PersistentSubscriptions/RestartSubsystem",
            request_serializer=shared_pb2.Empty.SerializeToString,
            response_deserializer=shared_pb2.Empty.FromString,
        )
        call(shared_pb2.Empty(), timeout=10)


def test_groups_are_created_listed_described_and_deleted(
    client: EventStoreDBClient, stream: str
) -> None:
    name = group()
    client.create_subscription_to_stream(name, stream, consumer_strategy="RoundRobin")
    with pytest.raises(AlreadyExists):
        client.create_subscription_to_stream(name, stream)
    info = client.get_subscription_info(name, stream)
    assert (info.group_name, info.event_source, info.consumer_strategy) == (
        name,
        stream,
        "RoundRobin",
    )
    assert [i.group_name for i in client.list_subscriptions_to_stream(stream)] == [name]
    assert name in {i.group_name for i in client.list_subscriptions()}
    client.update_subscription_to_stream(name, stream, max_retry_count=3)
    assert client.get_subscription_info(name, stream).max_retry_count == 3
    client.delete_subscription(name, stream)
    with pytest.raises(NotFound):
        client.get_subscription_info(name, stream)
    with pytest.raises(NotFound):
        client.delete_subscription(name, stream)


def test_a_consumer_gets_the_stream_from_the_start_and_live(
    client: EventStoreDBClient, stream: str
) -> None:
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(3))
    name = group()
    client.create_subscription_to_stream(name, stream, min_checkpoint_count=1)
    subscription = client.read_subscription_to_stream(name, stream)
    try:
        assert [e.stream_position for e in take(subscription, 3)] == [0, 1, 2]
        client.append_to_stream(stream, current_version=2, events=events(1))
        [live] = take(subscription, 1)
        assert (live.stream_position, live.retry_count) == (3, 0)
    finally:
        subscription.stop()
    wait_until(
        lambda: client.get_subscription_info(name, stream).last_checkpointed_event_position == "3"
    )


def test_a_nacked_event_comes_again_then_is_parked_and_replayed(
    client: EventStoreDBClient, stream: str
) -> None:
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(1))
    name = group()
    client.create_subscription_to_stream(name, stream, max_retry_count=2)
    subscription = client.read_subscription_to_stream(name, stream)
    try:
        counts = []
        for event in subscription:
            counts.append(event.retry_count)
            subscription.nack(event, action="retry")
            if len(counts) == 3:
                break
        assert counts == [0, 1, 2]  # the next retry passes max_retry_count: parked
        parked = f"$persistentsubscription-{stream}::{name}-parked"
        wait_until(lambda: len(read(client, parked)) == 1)
        assert client.get_stream(parked)[0].data == f"0@{stream}".encode()
        assert client.get_subscription_info(name, stream).parked_message_count == 1
        client.replay_parked_events(name, stream)
        [again] = take(subscription, 1)
        assert (again.stream_position, again.retry_count) == (0, 0)
    finally:
        subscription.stop()


def test_an_unacknowledged_event_is_sent_again_after_the_timeout(
    client: EventStoreDBClient, stream: str
) -> None:
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(1))
    name = group()
    client.create_subscription_to_stream(name, stream, message_timeout=0.2)
    subscription = client.read_subscription_to_stream(name, stream)
    try:
        first, second = take(subscription, 2, ack=False)
        assert (first.id, first.retry_count) == (second.id, 0) and second.retry_count == 1
    finally:
        subscription.stop()


@pytest.mark.parametrize("strategy", ["RoundRobin", "DispatchToSingle", "Pinned"])
def test_competing_consumers_share_a_group(
    client: EventStoreDBClient, stream: str, strategy: str
) -> None:
    name = group()
    client.create_subscription_to_stream(name, stream, consumer_strategy=strategy)  # type: ignore[call-overload]
    consumers = [client.read_subscription_to_stream(name, stream) for _ in range(2)]
    received: list[list[int]] = [[], []]
    done = threading.Event()

    def consume(index: int) -> None:
        for event in consumers[index]:
            received[index].append(event.stream_position)
            consumers[index].ack(event)
            if sum(map(len, received)) >= 10:
                done.set()

    threads = [threading.Thread(target=consume, args=(i,), daemon=True) for i in range(2)]
    for thread in threads:
        thread.start()
    # each read returned once the server confirmed it: both consumers are connected
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(10))
    assert done.wait(10)
    for consumer in consumers:
        consumer.stop()
    assert sorted(received[0] + received[1]) == list(range(10))
    sizes = sorted(map(len, received))
    if strategy == "RoundRobin":
        assert sizes == [5, 5]
    else:  # DispatchToSingle fills the first consumer's buffer; Pinned keeps a stream on one
        assert sizes == [0, 10]


def test_a_group_on_all_follows_its_filter_and_resumes_from_its_checkpoint(
    fresh_server: EsdbTestServer, fresh_client: EventStoreDBClient
) -> None:
    fresh_client.append_to_stream("order-1", current_version=StreamState.ANY, events=events(2))
    fresh_client.append_to_stream("other-1", current_version=StreamState.ANY, events=events(2))
    name = group()
    fresh_client.create_subscription_to_all(
        name, filter_include=["order-.*"], filter_by_stream_name=True, min_checkpoint_count=1
    )
    subscription = fresh_client.read_subscription_to_all(name)
    try:
        first = take(subscription, 2)
        assert {e.stream_name for e in first} == {"order-1"}
    finally:
        subscription.stop()
    checkpoints = f"$persistentsubscription-$all::{name}-checkpoint"
    wait_until(lambda: bool(read(fresh_client, checkpoints)))
    last = json.loads(fresh_client.get_stream(checkpoints)[-1].data)
    commit, prepare = (int(part[2:]) for part in last.split("/"))
    # the last record considered: at or past the last event the group delivered
    assert commit == prepare >= first[-1].commit_position
    fresh_client.append_to_stream("order-2", current_version=StreamState.ANY, events=events(1))
    restart_subsystem(fresh_server)
    subscription = fresh_client.read_subscription_to_all(name)
    try:
        [next_one] = take(subscription, 1)
        assert next_one.stream_name == "order-2"
    finally:
        subscription.stop()


def test_reading_a_missing_group_is_not_found(client: EventStoreDBClient, stream: str) -> None:
    with pytest.raises(NotFound):
        subscription = client.read_subscription_to_stream("no-such-group", stream)
        next(iter(subscription))
