"""Soft delete, tombstone, and stream metadata."""

from __future__ import annotations

import pytest
from esdbclient import EventStoreDBClient, StreamState
from esdbclient.exceptions import NotFound, StreamIsDeleted, WrongCurrentVersion

from tests.esdb_server.esdb_server_helpers import events

DELETED = 9223372036854775807


def test_soft_delete_hides_the_stream_until_it_is_written_again(
    client: EventStoreDBClient, stream: str
) -> None:
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(2))
    client.delete_stream(stream, current_version=1)
    with pytest.raises(NotFound):
        client.get_stream(stream)
    assert client.get_current_version(stream) is StreamState.NO_STREAM
    assert client.get_stream_metadata(stream)[0] == {"$tb": DELETED}
    # deleting again with ANY or the old revision is fine; EXISTS says "deleted"
    client.delete_stream(stream, current_version=StreamState.ANY)
    client.delete_stream(stream, current_version=1)
    with pytest.raises(StreamIsDeleted):
        client.delete_stream(stream, current_version=StreamState.EXISTS)
    # writing brings it back: revisions continue, old events stay hidden
    again = events(1)
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=again)
    [visible] = client.get_stream(stream)
    assert (visible.id, visible.stream_position) == (again[0].id, 2)
    assert client.get_stream_metadata(stream)[0] == {"$tb": 2}


def test_soft_deleted_stream_accepts_its_old_revision(
    client: EventStoreDBClient, stream: str
) -> None:
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(2))
    client.delete_stream(stream, current_version=StreamState.ANY)
    client.append_to_stream(stream, current_version=1, events=events(1))
    assert [e.stream_position for e in client.get_stream(stream)] == [2]


def test_deleted_events_stay_in_all(client: EventStoreDBClient, stream: str) -> None:
    written = events(2)
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=written)
    client.delete_stream(stream, current_version=1)
    in_all = [e.id for e in client.read_all(filter_include=[stream], filter_by_stream_name=True)]
    assert in_all == [e.id for e in written]


def test_delete_of_a_missing_stream_is_not_found(client: EventStoreDBClient, stream: str) -> None:
    for state in (StreamState.ANY, StreamState.NO_STREAM, StreamState.EXISTS, 0):
        with pytest.raises(NotFound):
            client.delete_stream(stream, current_version=state)


def test_delete_with_a_wrong_revision(client: EventStoreDBClient, stream: str) -> None:
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(2))
    with pytest.raises(WrongCurrentVersion) as caught:
        client.delete_stream(stream, current_version=0)
    assert str(caught.value) == (
        f"Delete failed due to WrongExpectedVersion. Stream: {stream}, "
        "Expected version: 0, Actual version: 1"
    )
    with pytest.raises(WrongCurrentVersion):
        client.tombstone_stream(stream, current_version=StreamState.NO_STREAM)


def test_tombstone_is_forever(client: EventStoreDBClient, stream: str) -> None:
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(1))
    client.tombstone_stream(stream, current_version=0)
    with pytest.raises(StreamIsDeleted):
        client.get_stream(stream)
    with pytest.raises(StreamIsDeleted):
        client.append_to_stream(stream, current_version=StreamState.ANY, events=events(2))
    for state in (StreamState.ANY, 0):
        with pytest.raises(StreamIsDeleted):
            client.delete_stream(stream, current_version=state)
        with pytest.raises(StreamIsDeleted):
            client.tombstone_stream(stream, current_version=state)
    # the metadata stream reads as deleted too, but can still be written
    with pytest.raises(StreamIsDeleted):
        client.get_stream(f"$${stream}")
    client.set_stream_metadata(stream, metadata={"k": 1})


def test_tombstone_of_a_missing_stream(client: EventStoreDBClient, stream: str) -> None:
    with pytest.raises(NotFound):
        client.tombstone_stream(stream, current_version=StreamState.EXISTS)
    client.tombstone_stream(stream, current_version=StreamState.ANY)
    with pytest.raises(StreamIsDeleted):
        client.get_stream(stream)


def test_stream_metadata_get_and_set(client: EventStoreDBClient, stream: str) -> None:
    assert client.get_stream_metadata(stream) == ({}, StreamState.NO_STREAM)
    client.set_stream_metadata(stream, metadata={"foo": "bar"})
    assert client.get_stream_metadata(stream) == ({"foo": "bar"}, 0)
    client.set_stream_metadata(stream, metadata={"foo": "baz"}, current_version=0)
    assert client.get_stream_metadata(stream) == ({"foo": "baz"}, 1)
    with pytest.raises(WrongCurrentVersion):
        client.set_stream_metadata(stream, metadata={}, current_version=0)
    # a metadata stream keeps one event by default
    assert [e.stream_position for e in client.get_stream(f"$${stream}")] == [1]


def test_max_count_and_truncate_before(client: EventStoreDBClient, stream: str) -> None:
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(5))
    client.set_stream_metadata(stream, metadata={"$maxCount": 2})
    assert [e.stream_position for e in client.get_stream(stream)] == [3, 4]
    client.set_stream_metadata(stream, metadata={"$tb": 1})
    assert [e.stream_position for e in client.get_stream(stream)] == [1, 2, 3, 4]
    assert client.get_current_version(stream) == 4


def test_metadata_write_undeletes_a_soft_deleted_stream(
    client: EventStoreDBClient, stream: str
) -> None:
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(2))
    client.delete_stream(stream, current_version=1)
    client.set_stream_metadata(stream, metadata={"foo": "bar"})
    metadata, _ = client.get_stream_metadata(stream)
    assert metadata == {"foo": "bar", "$tb": 2}
    assert client.get_stream(stream) == ()
