"""Protobuf shapes of EventStoreDB's gRPC API (v24.10), built and taken apart in one place.

Messages come from the test server's own generated modules
(:mod:`decider.stores.esdb._proto`), built from the ``.proto`` files it serves.
Error texts and trailers copy the server's ``RpcExceptions`` so that clients map them to the
same exceptions as against a real node.
"""

from __future__ import annotations

import uuid
from typing import Any, NoReturn, Protocol

import grpc

from decider.stores.esdb._proto import shared_pb2, status_pb2, streams_pb2
from decider.stores.esdb.testserver.log import ANY, NO_STREAM, STREAM_EXISTS, Record, WrongVersion

_ReadResp: Any = streams_pb2.ReadResp
_ReadEvent: Any = streams_pb2.ReadResp.ReadEvent


class Context(Protocol):
    """The part of ``grpc.ServicerContext`` the servicers use (typed for mypy)."""

    def is_active(self) -> bool:
        """Whether the call is still going on (the client has not gone away)."""
        ...

    def time_remaining(self) -> float | None:
        """Seconds left before the call's deadline; ``None`` without a deadline."""
        ...

    def add_callback(self, callback: Any) -> bool:
        """Call ``callback`` when the call ends."""
        ...

    def set_trailing_metadata(self, metadata: Any) -> None:
        """Send ``metadata`` with the call's status."""
        ...

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        """End the call with status ``code`` and ``details``."""
        ...

    def abort_with_status(self, status: grpc.Status) -> NoReturn:
        """End the call with a rich ``status`` (code, details and trailing metadata)."""
        ...


def stream_name(identifier: Any) -> str:
    """The stream name of a ``StreamIdentifier`` (UTF-8 bytes on the wire)."""
    return bytes(identifier.stream_name).decode("utf-8")


def identifier(name: str) -> Any:
    """A ``StreamIdentifier`` for ``name``."""
    return shared_pb2.StreamIdentifier(stream_name=name.encode("utf-8"))


def expected_version(options: Any, oneof: str, revision_field: str) -> int:
    """An expected-version option as EventStoreDB's number (-2 any, -1 none, -4 exists)."""
    which = options.WhichOneof(oneof)
    if which == revision_field:
        return int(getattr(options, revision_field))
    if which == "no_stream":
        return NO_STREAM
    if which == "stream_exists":
        return STREAM_EXISTS
    return ANY


MIN_CALL_TIME = 0.002
"""Seconds a write or read needs before its deadline; with less left it is refused, undone.

A real node takes about this long to commit or to read a page, so a client's near-zero
timeout fails there; gRPC rounds a zero timeout up to a millisecond on the wire, which this
server could otherwise beat.
"""


def too_late(context: Context) -> bool:
    """Whether the call's deadline leaves less than :data:`MIN_CALL_TIME`."""
    remaining = context.time_remaining()
    return remaining is not None and remaining < MIN_CALL_TIME


def proceed_while_wanted(context: Context) -> bool:
    """Whether the caller still waits: not cancelled, and time left to commit a write."""
    return context.is_active() and not too_late(context)


# ------------------------------------------------------------------------------------ reads


def event_resp(
    record: Record, structured_ids: bool = False, link_target: Record | None = None
) -> Any:
    """The ``ReadResp`` carrying one record; cached on the record (built once per record).

    With ``link_target`` the record is a ``$>`` link resolved to that event (the position is
    the link's, as in EventStoreDB).
    """
    if link_target is not None:
        return _ReadResp(
            event=_ReadEvent(
                event=_recorded(link_target, structured_ids),
                link=_recorded(record, structured_ids),
                commit_position=record.position,
            )
        )
    if not structured_ids and record.wire is not None:
        return record.wire
    resp = _ReadResp(
        event=_ReadEvent(event=_recorded(record, structured_ids), commit_position=record.position)
    )
    if not structured_ids:
        record.wire = resp
    return resp


def unresolved_link_resp(record: Record, structured_ids: bool) -> Any:
    """A ``$>`` link whose event is gone: an empty event (clients skip it) and the link."""
    return _ReadResp(
        event=_ReadEvent(link=_recorded(record, structured_ids), commit_position=record.position)
    )


def event_id(text: str, structured: bool) -> Any:
    """An event id as the client asked for it: a string, or two signed 64-bit halves."""
    if not structured:
        return shared_pb2.UUID(string=text)
    value = uuid.UUID(text).int
    return shared_pb2.UUID(
        structured=shared_pb2.UUID.Structured(
            most_significant_bits=_signed64(value >> 64),
            least_significant_bits=_signed64(value & (2**64 - 1)),
        )
    )


def _recorded(record: Record, structured_ids: bool) -> Any:
    return _ReadEvent.RecordedEvent(
        id=event_id(record.id, structured_ids),
        stream_identifier=identifier(record.stream),
        stream_revision=record.revision,
        prepare_position=record.position,
        commit_position=record.position,
        metadata={
            "type": record.type,
            "content-type": record.content_type,
            "created": str(record.created),
        },
        custom_metadata=record.metadata,
        data=record.data,
    )


def _signed64(value: int) -> int:
    return value - 2**64 if value >= 2**63 else value


def confirmation_resp() -> Any:
    """The first message of every subscription."""
    return _ReadResp(
        confirmation=_ReadResp.SubscriptionConfirmation(subscription_id=str(uuid.uuid4()))
    )


def checkpoint_resp(position: int) -> Any:
    """A filtered subscription's checkpoint at ``position``."""
    return _ReadResp(
        checkpoint=_ReadResp.Checkpoint(commit_position=position, prepare_position=position)
    )


def caught_up_resp() -> Any:
    """The message that ends a subscription's catch-up phase."""
    return _ReadResp(caught_up=_ReadResp.CaughtUp())


def not_found_resp(name: str) -> Any:
    """What a read of a missing stream returns (instead of an error)."""
    return _ReadResp(stream_not_found=_ReadResp.StreamNotFound(stream_identifier=identifier(name)))


# ----------------------------------------------------------------------------------- errors


def abort_deleted(context: Context, name: str) -> NoReturn:
    """EventStoreDB's ``StreamDeleted`` RPC exception."""
    context.set_trailing_metadata((("exception", "stream-deleted"), ("stream-name", name)))
    context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"Event stream '{name}' is deleted.")


def abort_wrong_version(context: Context, error: WrongVersion, operation: str) -> NoReturn:
    """EventStoreDB's ``WrongExpectedVersion`` RPC exception (delete and tombstone)."""
    context.set_trailing_metadata(
        (
            ("exception", "wrong-expected-version"),
            ("stream-name", error.stream),
            ("expected-version", str(error.expected)),
            ("actual-version", str(error.current)),
        )
    )
    context.abort(
        grpc.StatusCode.FAILED_PRECONDITION,
        f"{operation} failed due to WrongExpectedVersion. Stream: {error.stream}, "
        f"Expected version: {error.expected}, Actual version: {error.current}",
    )


def append_wrong_version(error: WrongVersion) -> Any:
    """``AppendResp.wrong_expected_version``, with the legacy 20.6 fields filled too."""
    wev = streams_pb2.AppendResp.WrongExpectedVersion()
    empty = shared_pb2.Empty()
    if error.current == NO_STREAM:
        wev.current_no_stream.CopyFrom(empty)
        wev.no_stream_20_6_0.CopyFrom(empty)
    else:
        wev.current_revision = error.current
        wev.current_revision_20_6_0 = error.current
    if error.expected == ANY:
        wev.expected_any.CopyFrom(empty)
        wev.any_20_6_0.CopyFrom(empty)
    elif error.expected == STREAM_EXISTS:
        wev.expected_stream_exists.CopyFrom(empty)
        wev.stream_exists_20_6_0.CopyFrom(empty)
    elif error.expected == NO_STREAM:
        wev.expected_no_stream.CopyFrom(empty)
        wev.expected_revision_20_6_0 = 2**64 - 1  # -1 as the uint64 the legacy field holds
    else:
        wev.expected_revision = error.expected
        wev.expected_revision_20_6_0 = error.expected
    return streams_pb2.AppendResp(wrong_expected_version=wev)


def status(code: grpc.StatusCode, message: str, detail: Any) -> Any:
    """A ``google.rpc.Status`` whose details pack ``detail`` (BatchAppend errors)."""
    result = status_pb2.Status(code=code.value[0], message=message)
    result.details.Pack(detail)
    return result


def batch_wrong_version(error: WrongVersion) -> Any:
    """The ``WrongExpectedVersion`` status of a failed batch append."""
    wev = shared_pb2.WrongExpectedVersion()
    if error.current == NO_STREAM:
        wev.current_no_stream.SetInParent()
    else:
        wev.current_stream_revision = error.current
    if error.expected == ANY:
        wev.expected_any.SetInParent()
    elif error.expected == STREAM_EXISTS:
        wev.expected_stream_exists.SetInParent()
    elif error.expected == NO_STREAM:
        wev.expected_no_stream.SetInParent()
    else:
        wev.expected_stream_position = error.expected
    return status(grpc.StatusCode.ALREADY_EXISTS, "WrongExpectedVersion", wev)
