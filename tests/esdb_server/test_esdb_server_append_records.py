"""KurrentDB 26.1's v2 ``AppendRecords`` on the test server, called over plain gRPC with the v2
protocol's messages, as any client calls it: records that name their own streams, written in
request order once every consistency check holds, and every failed check reported.

Where a case is unusual (a soft-deleted stream reported by its last revision, ``NO_STREAM``
holding for a tombstoned stream, ``ANY`` refused as a check), the answer is the one KurrentDB
26.1 gives in its own tests (``src/KurrentDB.Api.V2.Tests/Modules/Streams/AppendRecords``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import grpc
import pytest
from esdbclient import EventStoreDBClient, StreamState

from decider.stores.esdb._proto import (
    serverfeatures_pb2,
    shared_pb2,
    streams_v2_errors_pb2,
    streams_v2_pb2,
)
from decider.stores.esdb.testserver import EsdbTestServer
from tests.esdb_server.esdb_server_helpers import commit_position, events
from tests.esdb_server.test_esdb_server_append_session import rich_error

NO_STREAM, ANY, EXISTS, DELETED, TOMBSTONED = -1, -2, -4, -5, -6
"""Expected (and actual) states of a stream in a check, beside revisions >= 0."""

APPEND_RECORDS = "/kurrentdb.protocol.v2.streams.StreamsService/AppendRecords"
V2_STREAMS = "kurrentdb.protocol.v2.streams.streamsservice"

Violation = tuple[int, str, int, int]
"""One reported violation: check index, stream, expected state, actual state."""


@pytest.fixture
def channel(esdb_server: EsdbTestServer) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{esdb_server.port}") as opened:
        yield opened


def append(
    channel: grpc.Channel, records: Sequence[Any], checks: Sequence[tuple[str, int]] = ()
) -> Any:
    """One ``AppendRecords`` call; ``checks`` are (stream, expected state) in this order."""
    call = channel.unary_unary(
        APPEND_RECORDS,
        request_serializer=streams_v2_pb2.AppendRecordsRequest.SerializeToString,
        response_deserializer=streams_v2_pb2.AppendRecordsResponse.FromString,
    )
    request = streams_v2_pb2.AppendRecordsRequest(
        records=records,
        checks=[
            streams_v2_pb2.ConsistencyCheck(
                stream_state=streams_v2_pb2.ConsistencyCheck.StreamStateCheck(
                    stream=stream, expected_state=expected
                )
            )
            for stream, expected in checks
        ],
    )
    return call(request, timeout=10)


def record(stream: str, event_type: str, record_id: str | None = None) -> Any:
    return streams_v2_pb2.AppendRecord(
        stream=stream,
        record_id=record_id or str(uuid.uuid4()),
        schema=streams_v2_pb2.SchemaInfo(format=streams_v2_pb2.SCHEMA_FORMAT_JSON, name=event_type),
        data=b'{"n":1}',
    )


def revisions(reply: Any) -> list[tuple[str, int]]:
    return [(r.stream, r.revision) for r in reply.revisions]


def violations(
    channel: grpc.Channel, records: Sequence[Any], checks: Sequence[tuple[str, int]] = ()
) -> list[Violation]:
    """The violations the call is refused with (it must be refused for them)."""
    with pytest.raises(grpc.RpcError) as caught:
        append(channel, records, checks)
    error = caught.value
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    reason, detail = rich_error(error)
    assert reason == "APPEND_CONSISTENCY_VIOLATION"
    assert error.details().startswith("Append failed due to consistency violations.")
    details = streams_v2_errors_pb2.AppendConsistencyViolationErrorDetails()
    assert detail.Unpack(details)
    return [
        (
            v.check_index,
            v.stream_state.stream,
            v.stream_state.expected_state,
            v.stream_state.actual_state,
        )
        for v in details.violations
    ]


def names(stream: str, *suffixes: str) -> list[str]:
    return [f"{stream}-{suffix}" for suffix in suffixes]


def seed(client: EventStoreDBClient, stream: str, count: int, then: str = "") -> None:
    """Write ``count`` events to ``stream``, then soft-delete (``"delete"``) or tombstone it."""
    client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(count))
    if then == "delete":
        client.delete_stream(stream, current_version=count - 1)
    elif then == "tombstone":
        client.tombstone_stream(stream, current_version=count - 1)


def test_interleaved_records_are_written_in_request_order(
    client: EventStoreDBClient, channel: grpc.Channel, stream: str
) -> None:
    a, b = names(stream, "a", "b")
    seed(client, b, 1)
    sent = [record(b, "B1"), record(a, "A1"), record(b, "B2"), record(a, "A2"), record(a, "A3")]
    reply = append(channel, sent, [(a, NO_STREAM)])
    # one revision per written stream, in the order each first appears among the records
    assert revisions(reply) == [(b, 2), (a, 2)]
    logged = list(client.read_all(filter_include=[f"{stream}-.*"], filter_by_stream_name=True))
    assert [(e.stream_name, e.type, e.stream_position) for e in logged[1:]] == [
        (b, "B1", 1),
        (a, "A1", 0),
        (b, "B2", 2),
        (a, "A2", 1),
        (a, "A3", 2),
    ]
    assert [str(e.id) for e in logged[1:]] == [r.record_id for r in sent]
    assert reply.position == commit_position(logged[-1])


def test_checks_of_streams_not_written_hold_and_write_nothing(
    client: EventStoreDBClient, channel: grpc.Channel, stream: str
) -> None:
    at_two, existing, missing, written = names(stream, "x", "y", "z", "w")
    seed(client, at_two, 3)
    seed(client, existing, 1)
    reply = append(
        channel,
        [record(written, "W")],
        [(at_two, 2), (existing, EXISTS), (missing, NO_STREAM), (written, NO_STREAM)],
    )
    assert revisions(reply) == [(written, 0)]
    [event] = client.get_stream(written)
    assert reply.position == commit_position(event)
    assert client.get_current_version(at_two) == 2
    assert client.get_current_version(existing) == 0
    assert client.get_current_version(missing) is StreamState.NO_STREAM


def test_every_failed_check_is_reported_and_nothing_is_written(
    esdb_server: EsdbTestServer, client: EventStoreDBClient, channel: grpc.Channel, stream: str
) -> None:
    at_two, missing, written, unborn, tombstoned = names(stream, "x", "y", "w", "v", "t")
    seed(client, at_two, 3)
    seed(client, tombstoned, 1, then="tombstone")
    length = len(esdb_server.log.records)
    found = violations(
        channel,
        [record(written, "W"), record(tombstoned, "T"), record(unborn, "V")],
        [(at_two, 5), (missing, EXISTS), (written, NO_STREAM), (unborn, 0)],
    )
    # the check of `written` holds; the tombstoned stream has no check: its index follows them
    assert found == [
        (0, at_two, 5, 2),
        (1, missing, EXISTS, NO_STREAM),
        (3, unborn, 0, NO_STREAM),
        (4, tombstoned, ANY, TOMBSTONED),
    ]
    assert len(esdb_server.log.records) == length


def test_deleted_and_tombstoned_streams_pass_the_checks_of_their_state(
    client: EventStoreDBClient, channel: grpc.Channel, stream: str
) -> None:
    soft, gone, written = names(stream, "soft", "gone", "w")
    seed(client, soft, 2, then="delete")
    seed(client, gone, 1, then="tombstone")
    reply = append(channel, [record(written, "W1")], [(soft, DELETED), (gone, TOMBSTONED)])
    assert revisions(reply) == [(written, 0)]
    # as a stream-revision check in KurrentDB: neither is "a stream", a soft-deleted one keeps
    # its last revision
    reply = append(channel, [record(written, "W2")], [(soft, NO_STREAM), (gone, NO_STREAM)])
    assert revisions(reply) == [(written, 1)]
    reply = append(channel, [record(written, "W3")], [(soft, 1)])
    assert revisions(reply) == [(written, 2)]


def test_deleted_and_tombstoned_checks_fail_on_other_streams(
    esdb_server: EsdbTestServer, client: EventStoreDBClient, channel: grpc.Channel, stream: str
) -> None:
    live, missing, gone, soft, written = names(stream, "live", "missing", "gone", "soft", "w")
    seed(client, live, 3)
    seed(client, gone, 1, then="tombstone")
    seed(client, soft, 2, then="delete")
    length = len(esdb_server.log.records)
    checks = [(live, DELETED), (missing, DELETED), (gone, EXISTS), (soft, TOMBSTONED)]
    assert violations(channel, [record(written, "W")], checks) == [
        (0, live, DELETED, 2),
        (1, missing, DELETED, NO_STREAM),
        (2, gone, EXISTS, TOMBSTONED),
        (3, soft, TOMBSTONED, 1),  # soft-deleted shows as such only to EXISTS
    ]
    checks = [(live, TOMBSTONED), (missing, TOMBSTONED), (gone, DELETED), (soft, EXISTS)]
    assert violations(channel, [record(written, "W")], checks) == [
        (0, live, TOMBSTONED, 2),
        (1, missing, TOMBSTONED, NO_STREAM),
        (2, gone, DELETED, TOMBSTONED),
        (3, soft, EXISTS, DELETED),
    ]
    assert violations(channel, [record(written, "W")], [(soft, 5)]) == [(0, soft, 5, 1)]
    assert len(esdb_server.log.records) == length


def test_a_soft_deleted_stream_expected_deleted_is_written_again(
    client: EventStoreDBClient, channel: grpc.Channel, stream: str
) -> None:
    soft, live, gone = names(stream, "soft", "live", "gone")
    seed(client, soft, 2, then="delete")
    seed(client, live, 1)
    seed(client, gone, 1, then="tombstone")
    sent = [record(soft, "Again")]
    reply = append(channel, sent, [(soft, DELETED)])
    # its revisions go on; its old events stay hidden
    assert revisions(reply) == [(soft, 2)]
    [again] = client.get_stream(soft)
    assert (str(again.id), again.stream_position) == (sent[0].record_id, 2)
    assert reply.position == commit_position(again)
    # the retry is idempotent, though the stream is no longer deleted
    assert append(channel, sent, [(soft, DELETED)]) == reply
    # records go to no stream expected tombstoned, nor to one that is
    checks = [(live, TOMBSTONED), (gone, TOMBSTONED), (soft, DELETED)]
    records = [record(live, "L"), record(gone, "G"), record(soft, "S")]
    assert violations(channel, records, checks) == [
        (0, live, TOMBSTONED, 0),
        (1, gone, TOMBSTONED, TOMBSTONED),
        (2, soft, DELETED, 2),
    ]
    assert [e.type for e in client.get_stream(soft)] == ["Again"]


def test_a_retry_returns_the_original_reply_and_writes_nothing(
    esdb_server: EsdbTestServer, client: EventStoreDBClient, channel: grpc.Channel, stream: str
) -> None:
    a, b, checked = names(stream, "a", "b", "c")
    sent = [record(a, "A1"), record(b, "B1"), record(a, "A2")]
    checks = [(a, NO_STREAM), (b, NO_STREAM), (checked, NO_STREAM)]
    first = append(channel, sent, checks)
    assert revisions(first) == [(a, 1), (b, 0)]
    length = len(esdb_server.log.records)
    assert append(channel, sent, checks) == first
    assert append(channel, sent) == first  # the same records without their checks
    # a stream only checked has moved on since: a retry still answers what the call did
    seed(client, checked, 1)
    length = len(esdb_server.log.records)
    assert append(channel, sent, checks) == first
    assert len(esdb_server.log.records) == length
    assert [e.type for e in client.get_stream(a)] == ["A1", "A2"]


def test_stored_and_new_records_together_are_a_violation(
    esdb_server: EsdbTestServer, channel: grpc.Channel, stream: str
) -> None:
    a, b = names(stream, "a", "b")
    stored = [record(a, "A1"), record(b, "B1")]
    append(channel, stored)
    length = len(esdb_server.log.records)
    # one stream's records are stored, the other's are new: the stored stream is reported
    assert violations(channel, [stored[0], record(b, "B2")]) == [(0, a, ANY, 0)]
    assert violations(channel, [record(b, "B2"), stored[0]], [(a, NO_STREAM)]) == [
        (0, a, NO_STREAM, 0)
    ]
    # part of one stream's records stored, part new
    assert violations(channel, [stored[0], record(a, "A2")]) == [(0, a, ANY, 0)]
    assert len(esdb_server.log.records) == length


def test_invalid_requests_are_refused(
    esdb_server: EsdbTestServer, channel: grpc.Channel, stream: str
) -> None:
    other = f"{stream}-other"
    no_stream = streams_v2_pb2.AppendRecord(
        record_id=str(uuid.uuid4()),
        schema=streams_v2_pb2.SchemaInfo(format=streams_v2_pb2.SCHEMA_FORMAT_JSON, name="A"),
        data=b"{}",
    )
    requests: list[tuple[list[Any], list[tuple[str, int]]]] = [
        ([], [(stream, NO_STREAM)]),  # no records
        ([record(stream, "A")], [(other, NO_STREAM), (other.upper(), EXISTS)]),
        ([record(stream, "A")], [(other, ANY)]),  # KurrentDB refuses ANY as a check
        ([record(stream, "A")], [(other, -3)]),
        ([record(stream, "A")], [(other, -7)]),
        ([record(stream, "A")], [("", NO_STREAM)]),
        ([no_stream], []),
        ([record("", "A")], []),
        ([record(stream, "A", record_id="not-a-uuid")], []),
    ]
    length = len(esdb_server.log.records)
    for records, checks in requests:
        with pytest.raises(grpc.RpcError) as caught:
            append(channel, records, checks)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (records, checks)
    assert len(esdb_server.log.records) == length


@pytest.mark.parametrize(("append_records", "version"), [(False, "25.1.0"), (True, "26.1.0")])
def test_only_a_26_1_node_serves_append_records(
    append_records: bool, version: str, stream: str
) -> None:
    with (
        EsdbTestServer(append_records=append_records) as node,
        grpc.insecure_channel(f"127.0.0.1:{node.port}") as opened,
    ):
        features = opened.unary_unary(
            "/event_store.client.server_features.ServerFeatures/GetSupportedMethods",
            request_serializer=shared_pb2.Empty.SerializeToString,
            response_deserializer=serverfeatures_pb2.SupportedMethods.FromString,
        )
        supported = features(shared_pb2.Empty(), timeout=10)
        methods = {(m.service_name, m.method_name) for m in supported.methods}
        assert supported.event_store_server_version == version
        assert (V2_STREAMS, "appendsession") in methods
        assert ((V2_STREAMS, "appendrecords") in methods) is append_records
        if append_records:
            assert revisions(append(opened, [record(stream, "A")])) == [(stream, 0)]
            return
        length = len(node.log.records)
        with pytest.raises(grpc.RpcError) as caught:
            append(opened, [record(stream, "A")])
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert len(node.log.records) == length
