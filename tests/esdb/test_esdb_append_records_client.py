"""KurrentDB 26.1's ``AppendRecords`` through kurrentdbclient's public ``append_records``: records
that name their streams, consistency checks, every failed check in
``ConsistencyChecksFailedError.failures``. Runs on the adapter tests' server (``ESDB_URI``'s
node when it serves the call, else the in-process test server) where kurrentdbclient is
installed (``.venv-kurrentdb``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("kurrentdbclient")

from kurrentdbclient import KurrentDBClient, NewEvent, NewRecord, StreamState, StreamStateCheck
from kurrentdbclient.exceptions import ConsistencyChecksFailedError

from decider.stores.esdb._batch import open_esdb_store, supports_append_records

ANY, DELETED, TOMBSTONED = -2, -5, -6
"""States in a failure beside revisions: unchecked, soft-deleted, tombstoned."""

Failure = tuple[int, str, int, int]
"""One failed check: check index, stream, expected state, actual state."""


@pytest.fixture(scope="module")
def client(esdb_uri: str) -> Iterator[KurrentDBClient]:
    """A kurrentdbclient on the server, which must serve ``AppendRecords`` (26.1+)."""
    store = open_esdb_store(esdb_uri)
    try:
        if not supports_append_records(store):
            pytest.skip("the server does not serve AppendRecords (KurrentDB 26.1+)")
    finally:
        store.close()
    opened = KurrentDBClient(esdb_uri)
    yield opened
    opened.close()


@pytest.fixture
def stream() -> str:
    """A stream-name prefix no other test uses."""
    return f"records-{uuid.uuid4().hex[:12]}"


def names(stream: str, *suffixes: str) -> list[str]:
    return [f"{stream}-{suffix}" for suffix in suffixes]


def new(stream: str, event_type: str, metadata: bytes = b"") -> NewRecord:
    return NewRecord(stream_name=stream, type=event_type, data=b'{"n":1}', metadata=metadata)


def seed(client: KurrentDBClient, stream: str, count: int, then: str = "") -> None:
    """Write ``count`` events to ``stream``, then soft-delete (``"delete"``) or tombstone it."""
    client.append_to_stream(
        stream,
        current_version=StreamState.NO_STREAM,
        events=[NewEvent(type="Seeded", data=b"{}") for _ in range(count)],
    )
    if then == "delete":
        client.delete_stream(stream, current_version=count - 1)
    elif then == "tombstone":
        client.tombstone_stream(stream, current_version=count - 1)


def failures(error: ConsistencyChecksFailedError) -> list[Failure]:
    found: list[Failure] = []
    for failure in error.failures:
        state = failure.stream_state_failure
        assert state is not None
        found.append(
            (failure.check_index, state.stream_name, state.expected_state, state.actual_state)
        )
    return found


def test_records_are_appended_in_request_order(client: KurrentDBClient, stream: str) -> None:
    a, b = names(stream, "a", "b")
    seed(client, b, 1)
    sent = [
        new(b, "B1"),
        new(a, "A1", metadata=b'{"user":"ann"}'),
        new(b, "B2"),
        new(a, "A2"),
    ]
    checks = [StreamStateCheck(a, StreamState.NO_STREAM), StreamStateCheck(b, 0)]
    result = client.append_records(sent, checks)
    # one position per written stream, in the order each first appears among the records
    assert [(p.stream_name, p.stream_position) for p in result.stream_positions] == [
        (b, 2),
        (a, 1),
    ]
    logged = list(client.read_all(filter_include=[f"{stream}-.*"], filter_by_stream_name=True))
    assert [(e.stream_name, e.id, e.type) for e in logged[1:]] == [
        (r.stream_name, r.id, r.type) for r in sent
    ]
    assert [e.stream_position for e in logged[1:]] == [1, 0, 2, 1]
    assert result.commit_position == logged[-1].commit_position
    assert json.loads(logged[2].metadata)["user"] == "ann"


def test_checks_of_streams_not_written_hold(client: KurrentDBClient, stream: str) -> None:
    at_two, existing, missing, written = names(stream, "x", "y", "z", "w")
    seed(client, at_two, 3)
    seed(client, existing, 1)
    checks = [
        StreamStateCheck(at_two, 2),
        StreamStateCheck(existing, StreamState.EXISTS),
        StreamStateCheck(missing, StreamState.NO_STREAM),
    ]
    result = client.append_records(new(written, "W"), checks)
    assert [(p.stream_name, p.stream_position) for p in result.stream_positions] == [(written, 0)]
    [event] = client.get_stream(written)
    assert result.commit_position == event.commit_position
    assert client.get_current_version(at_two) == 2
    assert client.get_current_version(missing) is StreamState.NO_STREAM


def test_every_failed_check_is_reported_and_nothing_is_written(
    client: KurrentDBClient, stream: str
) -> None:
    at_two, missing, soft, written, unborn, tombstoned = names(
        stream, "x", "y", "soft", "w", "v", "t"
    )
    seed(client, at_two, 3)
    seed(client, soft, 1, then="delete")
    seed(client, tombstoned, 1, then="tombstone")
    checks = [
        StreamStateCheck(at_two, 5),
        StreamStateCheck(missing, StreamState.EXISTS),
        StreamStateCheck(soft, StreamState.EXISTS),
        StreamStateCheck(written, StreamState.NO_STREAM),
        StreamStateCheck(unborn, 0),
    ]
    with pytest.raises(ConsistencyChecksFailedError) as caught:
        client.append_records([new(written, "W"), new(tombstoned, "T"), new(unborn, "V")], checks)
    # the check of `written` holds; the tombstoned stream has no check: its index follows them
    assert failures(caught.value) == [
        (0, at_two, 5, 2),
        (1, missing, -4, -1),
        (2, soft, -4, DELETED),
        (4, unborn, 0, -1),
        (5, tombstoned, ANY, TOMBSTONED),
    ]
    assert client.get_current_version(written) is StreamState.NO_STREAM
    assert client.get_current_version(unborn) is StreamState.NO_STREAM
    assert client.get_current_version(at_two) == 2


def test_a_retry_returns_the_original_result(client: KurrentDBClient, stream: str) -> None:
    a, b = names(stream, "a", "b")
    sent = [new(a, "A1"), new(b, "B1"), new(a, "A2")]
    checks = [
        StreamStateCheck(a, StreamState.NO_STREAM),
        StreamStateCheck(b, StreamState.NO_STREAM),
    ]
    first = client.append_records(sent, checks)
    assert client.append_records(sent, checks) == first
    assert [e.id for e in client.get_stream(a)] == [sent[0].id, sent[2].id]
    assert [e.id for e in client.get_stream(b)] == [sent[1].id]


def test_stored_and_new_records_together_fail(client: KurrentDBClient, stream: str) -> None:
    a, b = names(stream, "a", "b")
    stored = new(a, "A1")
    client.append_records(stored)
    with pytest.raises(ConsistencyChecksFailedError) as caught:
        client.append_records([stored, new(b, "B1")])
    assert failures(caught.value) == [(0, a, ANY, 0)]
    assert client.get_current_version(b) is StreamState.NO_STREAM
