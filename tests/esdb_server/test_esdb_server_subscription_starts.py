"""Where a ``$all`` subscription starts, and the checkpoints it sends, as EventStoreDB does.

EventStoreDB's subscription enumerators (``Enumerator.AllSubscription*``) go live at once when
the requested position is at or past the last event: caught-up comes first, with no
checkpoint, and live events at or before that position are never sent. A checkpoint is never
sent twice (that is checked in ``test_esdb_server_subscriptions``).
"""

from __future__ import annotations

from esdbclient import EventStoreDBClient, StreamState
from esdbclient.events import CaughtUp

from tests.esdb_server.esdb_server_helpers import events


def test_filtered_subscription_from_the_last_event_is_caught_up_without_a_checkpoint(
    client: EventStoreDBClient, stream: str
) -> None:
    last = client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(2))
    with client.subscribe_to_all(
        commit_position=last,
        filter_include=[f"{stream}.*"],
        filter_by_stream_name=True,
        include_checkpoints=True,
        include_caught_up=True,
        timeout=5,
    ) as subscription:
        first = next(subscription)
        assert isinstance(first, CaughtUp), f"expected caught-up first, got {first!r}"
        live = events(1)
        client.append_to_stream(stream, current_version=1, events=live)
        assert next(subscription).id == live[0].id


def test_subscription_from_a_position_past_the_end_skips_events_up_to_it(
    fresh_client: EventStoreDBClient,
) -> None:
    start = fresh_client.get_commit_position(filter_exclude=()) + 1000
    with fresh_client.subscribe_to_all(
        commit_position=start, filter_exclude=(), include_caught_up=True, timeout=5
    ) as subscription:
        assert isinstance(next(subscription), CaughtUp)
        fresh_client.append_to_stream("s", current_version=StreamState.NO_STREAM, events=events(30))
        stored = fresh_client.get_stream("s")
        wanted = [
            e.id for e in stored if e.commit_position is not None and e.commit_position > start
        ]
        assert 0 < len(wanted) < len(stored), "the test needs events on both sides of the start"
        received = [next(subscription).id for _ in wanted]
    assert received == wanted
