"""Catch-up subscriptions: confirmation, history, checkpoints, caught-up, live, stop."""

from __future__ import annotations

import threading

import pytest
from esdbclient import EventStoreDBClient, StreamState
from esdbclient.events import CaughtUp, Checkpoint, RecordedEvent
from esdbclient.exceptions import DeadlineExceeded, StreamIsDeleted

from decider.stores.esdb.testserver import EsdbTestServer
from tests.esdb_server.esdb_server_helpers import commit_position, events
from tests.support.waiting import wait_until


def test_subscribe_to_all_catches_up_then_goes_live(
    client: EventStoreDBClient, stream: str
) -> None:
    history = events(3)
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=history)
    start = client.get_stream(stream)[0].commit_position
    with client.subscribe_to_all(
        commit_position=start,
        include_caught_up=True,
        filter_include=[f"{stream}.*"],
        filter_by_stream_name=True,
    ) as subscription:
        assert subscription.subscription_id
        # a subscription from a position starts after it
        first = [next(subscription), next(subscription)]
        assert [e.id for e in first] == [e.id for e in history[1:]]
        assert isinstance(next(subscription), CaughtUp)
        live = events(2)
        client.append_to_stream(stream, current_version=2, events=live)
        assert [next(subscription).id for _ in live] == [e.id for e in live]


def test_unfiltered_subscription_from_start_begins_with_a_system_event(
    fresh_client: EventStoreDBClient,
) -> None:
    with fresh_client.subscribe_to_all(filter_exclude=()) as subscription:
        assert next(subscription).type.startswith("$")


def test_filtered_subscription_checkpoints_end_at_the_last_record(
    fresh_client: EventStoreDBClient,
) -> None:
    for i in range(4):
        fresh_client.append_to_stream(f"s-{i}", current_version=StreamState.ANY, events=events(2))
    last = fresh_client.get_commit_position(filter_exclude=())
    with fresh_client.subscribe_to_all(
        filter_include=["Nothing"],
        include_checkpoints=True,
        include_caught_up=True,
        window_size=1,
        checkpoint_interval_multiplier=1,
    ) as subscription:
        received = []
        for item in subscription:
            received.append(item)
            if isinstance(item, CaughtUp):
                break
    checkpoints = [commit_position(i) for i in received if isinstance(i, Checkpoint)]
    # strictly increasing: the checkpoint that ends the catch-up does not repeat the last
    # interval checkpoint (EventStoreDB drops a checkpoint not after the previous one)
    assert checkpoints and checkpoints == sorted(set(checkpoints))
    assert checkpoints[-1] == last, "the last checkpoint is the last record, never beyond"
    assert not [i for i in received if type(i) is RecordedEvent]


def test_live_checkpoints_follow_the_interval(fresh_client: EventStoreDBClient) -> None:
    with fresh_client.subscribe_to_all(
        filter_include=["Nothing"],
        include_checkpoints=True,
        include_caught_up=True,
        window_size=2,
        checkpoint_interval_multiplier=2,
        from_end=True,
    ) as subscription:
        assert isinstance(next(subscription), CaughtUp)
        fresh_client.append_to_stream("s", current_version=StreamState.ANY, events=events(8))
        stored = fresh_client.get_stream("s")
        assert [next(subscription).commit_position for _ in range(2)] == [
            stored[3].commit_position,
            stored[7].commit_position,
        ]


def test_unfiltered_subscription_sends_no_checkpoints(fresh_client: EventStoreDBClient) -> None:
    fresh_client.append_to_stream("s", current_version=StreamState.ANY, events=events(3))
    with fresh_client.subscribe_to_all(
        filter_exclude=(), include_checkpoints=True, include_caught_up=True
    ) as subscription:
        items = []
        for item in subscription:
            items.append(item)
            if isinstance(item, CaughtUp):
                break
    assert not [i for i in items if isinstance(i, Checkpoint)]
    assert [i.stream_name for i in items[-4:-1]] == ["s", "s", "s"]


def test_subscribe_from_end_is_live_only(client: EventStoreDBClient, stream: str) -> None:
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(1))
    with client.subscribe_to_all(from_end=True, include_caught_up=True) as subscription:
        assert isinstance(next(subscription), CaughtUp)
        live = events(1)
        client.append_to_stream(stream, current_version=0, events=live)
        assert next(subscription).id == live[0].id


def test_subscribe_to_stream_from_a_revision_and_live(
    client: EventStoreDBClient, stream: str
) -> None:
    history = events(3)
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=history)
    with client.subscribe_to_stream(
        stream, stream_position=0, include_caught_up=True
    ) as subscription:
        assert [next(subscription).id for _ in range(2)] == [e.id for e in history[1:]]
        assert isinstance(next(subscription), CaughtUp)
        live = events(1)
        client.append_to_stream(stream, current_version=2, events=live)
        recorded = next(subscription)
        assert (recorded.id, recorded.stream_position) == (live[0].id, 3)


def test_subscribe_to_a_missing_stream_waits_for_it(
    client: EventStoreDBClient, stream: str
) -> None:
    with client.subscribe_to_stream(stream, include_caught_up=True) as subscription:
        assert isinstance(next(subscription), CaughtUp)
        first = events(1)
        client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=first)
        assert next(subscription).id == first[0].id


def test_tombstone_ends_a_stream_subscription(client: EventStoreDBClient, stream: str) -> None:
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(1))
    with client.subscribe_to_stream(stream, include_caught_up=True) as subscription:
        next(subscription)
        assert isinstance(next(subscription), CaughtUp)
        client.tombstone_stream(stream, current_version=0)
        with pytest.raises(StreamIsDeleted):
            next(subscription)
    with pytest.raises(StreamIsDeleted):
        next(iter(client.subscribe_to_stream(stream)))


def test_stop_ends_the_call_on_the_server(esdb_server: EsdbTestServer) -> None:
    client = EventStoreDBClient(esdb_server.uri)
    try:
        before = esdb_server.log.subscriptions
        subscriptions = [client.subscribe_to_all(from_end=True) for _ in range(3)]
        wait_until(lambda: esdb_server.log.subscriptions == before + 3)
        for subscription in subscriptions:
            subscription.stop()
        wait_until(lambda: esdb_server.log.subscriptions == before, timeout=2.0)
    finally:
        client.close()


def test_stop_from_another_thread_ends_a_blocked_iteration(client: EventStoreDBClient) -> None:
    subscription = client.subscribe_to_all(from_end=True, include_caught_up=True)
    assert isinstance(next(subscription), CaughtUp)
    ended = threading.Event()

    def consume() -> None:
        for _ in subscription:
            pass
        ended.set()

    threading.Thread(target=consume, daemon=True).start()
    subscription.stop()
    assert ended.wait(5.0)


def test_deadline_ends_a_subscription(client: EventStoreDBClient, stream: str) -> None:
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(1))
    subscription = client.subscribe_to_all(timeout=0.25)
    received: list[RecordedEvent] = []
    with pytest.raises(DeadlineExceeded):
        received.extend(subscription)
    assert received, "history is delivered before the deadline ends the call"


def test_many_open_subscriptions_do_not_starve_the_server(
    client: EventStoreDBClient, stream: str
) -> None:
    subscriptions = [
        client.subscribe_to_all(
            from_end=True, filter_include=[f"{stream}.*"], filter_by_stream_name=True
        )
        for _ in range(60)
    ]
    try:
        written = events(1)
        client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=written)
        assert client.get_current_version(stream) == 0
        for subscription in subscriptions:
            assert next(subscription).id == written[0].id
    finally:
        for subscription in subscriptions:
            subscription.stop()
