"""KurrentDB's v2 ``AppendSession`` and ``ServerFeatures`` on the test server, called over plain
gRPC with the v2 protocol's messages, as any client (e.g. kurrentdbclient) calls them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from esdbclient import EventStoreDBClient, NewEvent, StreamState

from decider.stores.esdb._proto import (
    error_details_pb2,
    serverfeatures_pb2,
    shared_pb2,
    streams_v2_errors_pb2,
    streams_v2_pb2,
)
from decider.stores.esdb.testserver import EsdbTestServer

ANY, NO_STREAM, EXISTS = -2, -1, -4


@pytest.fixture
def channel(esdb_server: EsdbTestServer) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{esdb_server.port}") as opened:
        yield opened


def session(channel: grpc.Channel, *requests: Any) -> Any:
    call = channel.stream_unary(
        "/kurrentdb.protocol.v2.streams.StreamsService/AppendSession",
        request_serializer=streams_v2_pb2.AppendRequest.SerializeToString,
        response_deserializer=streams_v2_pb2.AppendSessionResponse.FromString,
    )
    return call(iter(requests), timeout=10)


def request(stream: str, expected: int | None, *types: str, ids: list[str] | None = None) -> Any:
    ids = ids or [str(uuid.uuid4()) for _ in types]
    made = streams_v2_pb2.AppendRequest(
        stream=stream,
        records=[
            streams_v2_pb2.AppendRecord(
                record_id=record_id,
                schema=streams_v2_pb2.SchemaInfo(format=1, name=t),  # type: ignore[arg-type]
                data=b'{"n":1}',
                properties={"user": _string("ann")},
            )
            for t, record_id in zip(types, ids, strict=True)
        ],
    )
    if expected is not None:
        made.expected_revision = expected
    return made


def _string(value: str) -> Any:
    parsed = streams_v2_pb2.AppendRecord().properties.get_or_create("x")
    parsed.string_value = value
    return parsed


def rich_error(error: grpc.RpcError) -> tuple[str, Any]:
    """The ErrorInfo reason and the typed detail of KurrentDB's rich error trailer."""
    trailer = dict(error.trailing_metadata())
    status = error_details_pb2.Status.FromString(trailer["grpc-status-details-bin"])
    assert status.code == error.code().value[0]
    assert status.message == error.details()
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert info.domain == "streams"
    return info.reason, status.details[1] if len(status.details) > 1 else None


def names(stream: str) -> tuple[str, str]:
    return f"{stream}-a", f"{stream}-b"


def test_server_features_advertise_append_session(channel: grpc.Channel) -> None:
    call = channel.unary_unary(
        "/event_store.client.server_features.ServerFeatures/GetSupportedMethods",
        request_serializer=shared_pb2.Empty.SerializeToString,
        response_deserializer=serverfeatures_pb2.SupportedMethods.FromString,
    )
    supported = call(shared_pb2.Empty(), timeout=10)
    methods = {(m.service_name, m.method_name) for m in supported.methods}
    assert ("kurrentdb.protocol.v2.streams.streamsservice", "appendsession") in methods
    assert ("event_store.client.streams.streams", "batchappend") in methods
    # the test server acts as a 26.1 node unless told otherwise
    assert ("kurrentdb.protocol.v2.streams.streamsservice", "appendrecords") in methods
    assert supported.event_store_server_version == "26.1.0"


def test_streams_are_written_together_in_request_order(
    channel: grpc.Channel, client: EventStoreDBClient, stream: str
) -> None:
    a, b = names(stream)
    client.append_to_stream(b, current_version=StreamState.NO_STREAM, events=[_v1()])
    reply = session(channel, request(a, NO_STREAM, "A1", "A2"), request(b, 0, "B1"))
    assert [(o.stream, o.stream_revision) for o in reply.output] == [(a, 1), (b, 1)]
    read_a, read_b = client.get_stream(a), client.get_stream(b)
    assert [e.type for e in read_a] == ["A1", "A2"]
    assert read_b[-1].commit_position == reply.position
    assert read_a[-1].commit_position is not None and read_b[-1].commit_position is not None
    assert read_a[-1].commit_position < read_b[-1].commit_position
    metadata = json.loads(read_a[0].metadata)
    assert metadata == {"user": "ann", "$schema.name": "A1", "$schema.format": "Json"}
    assert read_a[0].content_type == "application/json"


def test_a_failed_check_writes_nothing(
    esdb_server: EsdbTestServer, channel: grpc.Channel, client: EventStoreDBClient, stream: str
) -> None:
    a, b = names(stream)
    client.append_to_stream(b, current_version=StreamState.NO_STREAM, events=[_v1(), _v1()])
    length = len(esdb_server.log.records)
    with pytest.raises(grpc.RpcError) as caught:
        session(channel, request(a, NO_STREAM, "A1"), request(b, 0, "B1"))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    reason, detail = rich_error(caught.value)
    assert reason == "STREAM_REVISION_CONFLICT"
    conflict = streams_v2_errors_pb2.StreamRevisionConflictErrorDetails()
    assert detail.Unpack(conflict)
    assert (conflict.stream, conflict.expected_revision, conflict.actual_revision) == (b, 0, 1)
    assert len(esdb_server.log.records) == length


def test_a_repeated_session_is_idempotent_and_a_partial_one_conflicts(
    esdb_server: EsdbTestServer, channel: grpc.Channel, stream: str
) -> None:
    a, b = names(stream)
    first = [request(a, NO_STREAM, "A"), request(b, ANY, "B")]
    reply = session(channel, *first)
    length = len(esdb_server.log.records)
    assert session(channel, *first) == reply
    assert len(esdb_server.log.records) == length
    with pytest.raises(grpc.RpcError) as caught:
        session(channel, first[0], request(b, ANY, "B2"))
    assert rich_error(caught.value)[0] == "STREAM_REVISION_CONFLICT"
    assert len(esdb_server.log.records) == length


def test_one_stream_twice_is_refused(channel: grpc.Channel, stream: str) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        session(channel, request(stream, ANY, "A"), request(stream.upper(), ANY, "B"))
    assert caught.value.code() == grpc.StatusCode.ABORTED
    assert rich_error(caught.value)[0] == "STREAM_ALREADY_IN_APPEND_SESSION"


def test_a_tombstoned_stream_fails_the_session(
    channel: grpc.Channel, client: EventStoreDBClient, stream: str
) -> None:
    a, b = names(stream)
    client.append_to_stream(b, current_version=StreamState.NO_STREAM, events=[_v1()])
    client.tombstone_stream(b, current_version=0)
    with pytest.raises(grpc.RpcError) as caught:
        session(channel, request(a, ANY, "A"), request(b, ANY, "B"))
    reason, detail = rich_error(caught.value)
    assert reason == "STREAM_TOMBSTONED"
    tombstoned = streams_v2_errors_pb2.StreamTombstonedErrorDetails()
    assert detail.Unpack(tombstoned)
    assert tombstoned.stream == b
    assert not [e for e in client.read_all() if e.stream_name == a]


def test_an_empty_session_and_bad_requests_are_refused(channel: grpc.Channel, stream: str) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        session(channel)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert rich_error(caught.value)[0] == "APPEND_SESSION_NO_REQUESTS"
    for bad in (
        request(stream, -3, "A"),
        request(stream, ANY, "has space"),
        request(stream, ANY, "A", ids=["not-a-uuid"]),
        streams_v2_pb2.AppendRequest(stream=stream),
    ):
        with pytest.raises(grpc.RpcError) as caught:
            session(channel, bad)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_an_unset_expected_revision_means_any(channel: grpc.Channel, stream: str) -> None:
    session(channel, request(stream, None, "A"))
    reply = session(channel, request(stream, None, "B"))
    assert reply.output[0].stream_revision == 1


def _v1() -> NewEvent:
    return NewEvent(type="Before", data=b"{}")
