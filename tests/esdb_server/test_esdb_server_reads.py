"""Reads: streams and $all, forwards and backwards, positions, limits, filters."""

from __future__ import annotations

import pytest
from esdbclient import EventStoreDBClient, NewEvent, StreamState
from esdbclient.exceptions import NotFound

from tests.esdb_server.esdb_server_helpers import commit_position, events


@pytest.fixture
def ten(client: EventStoreDBClient, stream: str) -> list[NewEvent]:
    written = events(10)
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=written)
    return written


def ids(recorded: object) -> list[object]:
    return [e.id for e in recorded]  # type: ignore[attr-defined]


def test_stream_forwards_from_a_revision_with_limits(
    client: EventStoreDBClient, stream: str, ten: list[NewEvent]
) -> None:
    assert ids(client.get_stream(stream)) == ids(ten)
    assert ids(client.get_stream(stream, stream_position=3)) == ids(ten[3:])
    assert ids(client.get_stream(stream, stream_position=3, limit=4)) == ids(ten[3:7])
    assert ids(client.get_stream(stream, limit=2)) == ids(ten[:2])
    assert client.get_stream(stream, stream_position=10) == ()
    assert client.get_stream(stream, stream_position=50, limit=5) == ()


def test_stream_backwards_is_inclusive_of_its_start(
    client: EventStoreDBClient, stream: str, ten: list[NewEvent]
) -> None:
    assert ids(client.get_stream(stream, backwards=True)) == ids(ten[::-1])
    assert ids(client.get_stream(stream, backwards=True, limit=3)) == ids(ten[:-4:-1])
    assert ids(client.get_stream(stream, stream_position=4, backwards=True)) == ids(ten[4::-1])
    assert ids(client.get_stream(stream, stream_position=0, backwards=True)) == [ten[0].id]
    assert ids(client.get_stream(stream, stream_position=99, backwards=True, limit=1)) == [
        ten[-1].id
    ]


@pytest.mark.parametrize("backwards", [False, True])
@pytest.mark.parametrize("position", [None, 0, 5])
def test_missing_stream_is_not_found_however_read(
    client: EventStoreDBClient, stream: str, backwards: bool, position: int | None
) -> None:
    with pytest.raises(NotFound):
        client.get_stream(stream, stream_position=position, backwards=backwards, limit=3)
    assert client.get_current_version(stream) is StreamState.NO_STREAM


def test_current_version(client: EventStoreDBClient, stream: str, ten: list[NewEvent]) -> None:
    assert client.get_current_version(stream) == 9


def test_all_forwards_and_backwards_with_positions_and_limits(
    client: EventStoreDBClient, stream: str, ten: list[NewEvent]
) -> None:
    stored = client.get_stream(stream)
    positions = [commit_position(e) for e in stored]
    assert positions == sorted(positions)

    def ours(**kwargs: object) -> list[object]:
        mine = set(ids(ten))
        return [e.id for e in client.read_all(**kwargs) if e.id in mine]  # type: ignore[arg-type]

    assert ours() == ids(ten)
    # forwards from a position includes it
    assert ours(commit_position=positions[4]) == ids(ten[4:])
    assert ids(client.read_all(commit_position=positions[4], limit=2)) == ids(ten[4:6])
    # backwards from a position excludes it
    assert ours(commit_position=positions[4], backwards=True) == ids(ten[3::-1])
    last = list(client.read_all(backwards=True, limit=1))
    assert ids(last) == [ten[-1].id] or commit_position(last[0]) > positions[-1]


def test_log_starts_with_a_system_event(fresh_client: EventStoreDBClient) -> None:
    fresh_client.append_to_stream("user-1", current_version=StreamState.ANY, events=events(1))
    everything = list(fresh_client.read_all(filter_exclude=()))
    assert everything[0].type.startswith("$")
    user = [e for e in everything if e.stream_name == "user-1"]
    assert commit_position(user[0]) > 0
    # the default filter of esdbclient (system event types) hides the system events
    assert [e.stream_name for e in fresh_client.read_all()] == ["user-1"]


def test_filters_by_type_and_by_stream_name(fresh_client: EventStoreDBClient) -> None:
    fresh_client.append_to_stream(
        "order-1", current_version=StreamState.ANY, events=events(1, "Placed")
    )
    fresh_client.append_to_stream(
        "fine-1", current_version=StreamState.ANY, events=events(1, "Issued")
    )
    fresh_client.append_to_stream(
        "order-2", current_version=StreamState.ANY, events=events(1, "Paid")
    )
    fresh_client.append_to_stream(
        "order-2", current_version=StreamState.ANY, events=events(1, "$Hidden")
    )

    def seen(**kwargs: object) -> list[tuple[str, str]]:
        return [(e.stream_name, e.type) for e in fresh_client.read_all(**kwargs)]  # type: ignore[arg-type]

    assert seen(filter_include=["Placed", "Paid"]) == [("order-1", "Placed"), ("order-2", "Paid")]
    assert seen(filter_exclude=["Placed", r"\$.*"]) == [("fine-1", "Issued"), ("order-2", "Paid")]
    assert seen(filter_include=["order-.*"], filter_by_stream_name=True) == [
        ("order-1", "Placed"),
        ("order-2", "Paid"),
        ("order-2", "$Hidden"),
    ]
    assert seen(filter_include=["Placed"], limit=1, backwards=True) == [("order-1", "Placed")]
    assert ("order-2", "$Hidden") in seen(filter_exclude=())
    assert ("order-2", "$Hidden") not in seen()


def test_commit_position_follows_the_default_filter(fresh_client: EventStoreDBClient) -> None:
    position = fresh_client.append_to_stream(
        "user-1", current_version=StreamState.ANY, events=events(1)
    )
    assert fresh_client.get_commit_position() == position
    fresh_client.set_stream_metadata("user-1", metadata={"k": 1})
    assert fresh_client.get_commit_position() == position
    assert fresh_client.get_commit_position(filter_exclude=()) > position


def test_commit_position_is_zero_when_nothing_matches(fresh_client: EventStoreDBClient) -> None:
    assert fresh_client.get_commit_position(filter_include=["Nothing"]) == 0


def test_stream_names_are_utf8(client: EventStoreDBClient, stream: str) -> None:
    name = f"{stream}-ünïcødé"
    client.append_to_stream(name, current_version=StreamState.NO_STREAM, events=events(1))
    assert [e.stream_name for e in client.get_stream(name)] == [name]


def test_links_resolve_to_their_events(client: EventStoreDBClient, stream: str) -> None:
    target = events(2)
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=target)
    links = f"{stream}-links"
    link = NewEvent(type="$>", data=f"1@{stream}".encode(), content_type="application/octet-stream")
    client.append_to_stream(links, current_version=StreamState.NO_STREAM, events=link)
    [unresolved] = client.get_stream(links)
    assert (unresolved.type, unresolved.link) == ("$>", None)
    [resolved] = client.get_stream(links, resolve_links=True)
    assert resolved.id == target[1].id and resolved.stream_position == 1
    assert resolved.link is not None and resolved.link.id == link.id
    assert resolved.link.commit_position == unresolved.commit_position
    client.tombstone_stream(stream, current_version=StreamState.ANY)
    assert client.get_stream(links, resolve_links=True) == ()


def test_restarted_server_object_serves_again(fresh_server: object) -> None:
    from decider.stores.esdb.testserver import EsdbTestServer

    assert isinstance(fresh_server, EsdbTestServer)
    fresh_server.stop()
    fresh_server.start()
    with EventStoreDBClient(fresh_server.uri) as client:
        client.append_to_stream("s", current_version=StreamState.NO_STREAM, events=events(1))
        assert client.get_current_version("s") == 0


def test_read_with_a_tiny_deadline_fails(client: EventStoreDBClient, ten: list[NewEvent]) -> None:
    from esdbclient.exceptions import GrpcDeadlineExceeded

    response = client.read_all(timeout=0.001)
    with pytest.raises(GrpcDeadlineExceeded):
        list(response)
