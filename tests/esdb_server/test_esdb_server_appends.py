"""Appends: Append (one event) and BatchAppend (a list), expected versions, idempotency."""

from __future__ import annotations

import itertools

import pytest
from esdbclient import EventStoreDBClient, NewEvent, StreamState
from esdbclient.exceptions import (
    DeadlineExceeded,
    MaximumAppendSizeExceededError,
    NotFound,
    WrongCurrentVersion,
)

from tests.esdb_server.esdb_server_helpers import commit_position, events


def test_append_one_event_uses_revision_zero_and_returns_its_position(
    client: EventStoreDBClient, stream: str
) -> None:
    [event] = events(1)
    position = client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=event)
    [stored] = client.get_stream(stream)
    assert (stored.id, stored.stream_position, stored.commit_position) == (event.id, 0, position)
    assert stored.prepare_position == stored.commit_position
    assert (stored.type, stored.data, stored.content_type) == (
        "Tested",
        event.data,
        event.content_type,
    )
    assert stored.recorded_at is not None and stored.recorded_at.tzinfo is not None


def test_batch_append_is_one_write_with_increasing_positions(
    client: EventStoreDBClient, stream: str
) -> None:
    batch = events(3)
    position = client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=batch)
    stored = client.get_stream(stream)
    assert [e.id for e in stored] == [e.id for e in batch]
    assert [e.stream_position for e in stored] == [0, 1, 2]
    positions = [commit_position(e) for e in stored]
    assert positions == sorted(set(positions))
    assert positions[0] < position and positions[-1] == position
    # positions are opaque offsets: gaps between consecutive events
    assert all(b - a > 1 for a, b in itertools.pairwise(positions))


def test_expected_versions_that_hold(client: EventStoreDBClient, stream: str) -> None:
    client.append_to_stream(stream, current_version=StreamState.ANY, events=events(2))
    client.append_to_stream(stream, current_version=StreamState.EXISTS, events=events(1))
    client.append_to_stream(stream, current_version=2, events=events(1))
    client.append_event(stream, current_version=3, event=events(1)[0])
    assert client.get_current_version(stream) == 4


@pytest.mark.parametrize("batch", [False, True], ids=["append", "batch-append"])
def test_wrong_expected_version_messages(
    client: EventStoreDBClient, stream: str, batch: bool
) -> None:
    def append(current: int | StreamState) -> None:
        chosen = events(2) if batch else events(1)[0]
        client.append_to_stream(stream, current_version=current, events=chosen)

    def message(current: int | StreamState) -> str:
        with pytest.raises(WrongCurrentVersion) as caught:
            append(current)
        return str(caught.value)

    assert message(0) == f"Stream '{stream}' does not exist"
    assert message(StreamState.EXISTS) == f"Stream '{stream}' does not exist"
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(1))
    assert message(StreamState.NO_STREAM) == (
        "Stream position of last event is 0 not StreamState.NO_STREAM"
    )
    assert message(5) == "Stream position of last event is 0 not 5"
    assert len(client.get_stream(stream)) == 1


def test_idempotent_reappend_with_no_stream_returns_the_original_position(
    client: EventStoreDBClient, stream: str
) -> None:
    event1, event2, event3 = events(3)
    first = client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=event1)
    client.append_to_stream(stream, current_version=0, events=[event2, event3])
    again = client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=event1)
    assert again == first
    assert len(client.get_stream(stream)) == 3


def test_idempotent_reappend_of_a_batch_by_revision_and_by_id(
    client: EventStoreDBClient, stream: str
) -> None:
    event1, event2, event3, event4 = events(4)
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=event1)
    position = client.append_to_stream(stream, current_version=0, events=[event2, event3])
    assert client.append_to_stream(stream, current_version=0, events=[event2, event3]) == position
    for state in (StreamState.ANY, StreamState.EXISTS):
        assert client.append_to_stream(stream, current_version=state, events=[event2, event3]) == (
            position
        )
    # a partial overlap is a conflict, and writes nothing
    with pytest.raises(WrongCurrentVersion):
        client.append_to_stream(stream, current_version=0, events=[event2, event3, event4])
    with pytest.raises(WrongCurrentVersion):
        client.append_to_stream(stream, current_version=StreamState.ANY, events=[event3, event4])
    assert [e.id for e in client.get_stream(stream)] == [e.id for e in (event1, event2, event3)]


def test_append_with_any_writes_when_the_first_id_is_new(
    client: EventStoreDBClient, stream: str
) -> None:
    # EventStoreDB's check looks at the first id only to decide "new write" (IndexWriter)
    old = events(1)
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=old)
    new = events(1)
    client.append_to_stream(stream, current_version=StreamState.ANY, events=[*new, *old])
    assert [e.id for e in client.get_stream(stream)] == [old[0].id, new[0].id, old[0].id]


def test_append_with_timeout_zero_leaves_no_trace(client: EventStoreDBClient, stream: str) -> None:
    before = client.get_commit_position(filter_exclude=())
    with pytest.raises(DeadlineExceeded):
        client.append_to_stream(
            stream, current_version=StreamState.NO_STREAM, events=events(1)[0], timeout=0
        )
    with pytest.raises(DeadlineExceeded):
        client.append_to_stream(
            stream, current_version=StreamState.NO_STREAM, events=events(2), timeout=0
        )
    with pytest.raises(NotFound):
        client.get_stream(stream)
    assert client.get_commit_position(filter_exclude=()) == before


def test_append_larger_than_one_mebibyte_is_refused(
    client: EventStoreDBClient, stream: str
) -> None:
    big = [NewEvent(type="Big", data=b"x" * (600 * 1024)) for _ in range(2)]
    with pytest.raises(MaximumAppendSizeExceededError):
        client.append_to_stream(stream, current_version=StreamState.ANY, events=big)
    with pytest.raises(NotFound):
        client.get_stream(stream)


def test_many_events_in_one_batch(client: EventStoreDBClient, stream: str) -> None:
    batch = events(500)
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=batch)
    assert client.get_current_version(stream) == 499
