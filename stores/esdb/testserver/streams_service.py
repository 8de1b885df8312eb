"""The ``event_store.client.streams.Streams`` servicer: Read, Append, BatchAppend, Delete,
Tombstone, translating between protobuf and
:class:`~decider.stores.esdb.testserver.log.EventLog`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import grpc

from decider.stores.esdb._proto import shared_pb2, streams_pb2, streams_pb2_grpc
from decider.stores.esdb.testserver import reads, wire
from decider.stores.esdb.testserver.log import (
    Deleted,
    EventLog,
    Expired,
    Proposed,
    TooLarge,
    WriteResult,
    WrongVersion,
)
from decider.stores.esdb.testserver.wire import Context

_MAX_DURATION_SECONDS = 315576000000


def _proposed(message: Any, context: Context) -> Proposed:
    metadata = message.metadata
    for key in ("type", "content-type"):
        if key not in metadata:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"Required Metadata Property '{key}' is missing"
            )
    event_id = message.id
    if event_id.WhichOneof("value") == "structured":
        bits = (event_id.structured.most_significant_bits % 2**64) << 64
        bits |= event_id.structured.least_significant_bits % 2**64
        text = str(uuid.UUID(int=bits))
    else:
        text = event_id.string
    return Proposed(
        id=text,
        type=metadata["type"],
        content_type=metadata["content-type"],
        data=bytes(message.data),
        metadata=bytes(message.custom_metadata),
    )


class StreamsServicer(streams_pb2_grpc.StreamsServicer):
    """EventStoreDB's Streams service over one :class:`EventLog`."""

    def __init__(self, log: EventLog) -> None:
        self._log = log

    def Read(self, request: Any, context: Context) -> Iterator[Any]:
        """Stream and ``$all`` reads, and catch-up subscriptions."""
        return reads.read(self._log, request, context)

    def Append(self, request_iterator: Iterator[Any], context: Context) -> Any:
        """Append events from a client stream: options first, then one message per event."""
        options = None
        events: list[Proposed] = []
        for request in request_iterator:
            if request.WhichOneof("content") == "options":
                options = request.options
            else:
                events.append(_proposed(request.proposed_message, context))
        if options is None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Append options are missing")
        name = wire.stream_name(options.stream_identifier)
        expected = wire.expected_version(options, "expected_stream_revision", "revision")
        try:
            result = self._log.append(
                name, expected, events, lambda: wire.proceed_while_wanted(context)
            )
        except WrongVersion as error:
            return wire.append_wrong_version(error)
        except Deleted:
            wire.abort_deleted(context, name)
        except TooLarge as error:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        except Expired:
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "Operation timed out")
        success = streams_pb2.AppendResp.Success()
        _fill_success(success, result, streams_pb2.AppendResp.Position)
        return streams_pb2.AppendResp(success=success)

    def BatchAppend(self, request_iterator: Iterator[Any], context: Context) -> Iterator[Any]:
        """Atomic batches by correlation id; one response per batch once it is final."""
        pending: dict[str, tuple[Any, list[Proposed]]] = {}
        try:
            for request in request_iterator:
                key = request.correlation_id.SerializeToString()
                options, events = pending.setdefault(key, (request.options, []))
                events.extend(_proposed(m, context) for m in request.proposed_messages)
                if request.is_final:
                    del pending[key]
                    yield self._batch(request.correlation_id, options, events, context)
        except grpc.RpcError:
            return  # the client went away (it cancels after reading its response)

    def _batch(
        self, correlation_id: Any, options: Any, events: list[Proposed], context: Context
    ) -> Any:
        name = wire.stream_name(options.stream_identifier)
        expected = wire.expected_version(options, "expected_stream_position", "stream_position")
        resp = streams_pb2.BatchAppendResp(
            correlation_id=correlation_id, stream_identifier=options.stream_identifier
        )
        which = options.WhichOneof("expected_stream_position")
        if which == "stream_position":
            resp.stream_position = options.stream_position
        elif which is not None:
            getattr(resp, which).SetInParent()
        if options.WhichOneof("deadline_option") == "deadline":
            deadline = options.deadline
            if deadline.seconds < 0 or (deadline.seconds == 0 and deadline.nanos <= 0):
                resp.error.CopyFrom(
                    wire.status(grpc.StatusCode.DEADLINE_EXCEEDED, "Timeout", shared_pb2.Timeout())
                )
                return resp
        try:
            result = self._log.append(
                name, expected, events, lambda: wire.proceed_while_wanted(context)
            )
        except WrongVersion as error:
            resp.error.CopyFrom(wire.batch_wrong_version(error))
            return resp
        except Deleted:
            detail = shared_pb2.StreamDeleted(stream_identifier=options.stream_identifier)
            resp.error.CopyFrom(wire.status(grpc.StatusCode.NOT_FOUND, "StreamDeleted", detail))
            return resp
        except TooLarge as error:
            detail = shared_pb2.MaximumAppendSizeExceeded(maxAppendSize=self._log.max_append_size)
            resp.error.CopyFrom(wire.status(grpc.StatusCode.INVALID_ARGUMENT, str(error), detail))
            return resp
        except Expired:
            resp.error.CopyFrom(
                wire.status(grpc.StatusCode.DEADLINE_EXCEEDED, "Timeout", shared_pb2.Timeout())
            )
            return resp
        _fill_success(resp.success, result, shared_pb2.AllStreamPosition)
        return resp

    def Delete(self, request: Any, context: Context) -> Any:
        """Soft delete: the stream reads as missing until it is written again."""
        options = request.options
        name = wire.stream_name(options.stream_identifier)
        expected = wire.expected_version(options, "expected_stream_revision", "revision")
        position = self._delete(self._log.delete, name, expected, context)
        return streams_pb2.DeleteResp(
            position=streams_pb2.DeleteResp.Position(
                commit_position=position, prepare_position=position
            )
        )

    def Tombstone(self, request: Any, context: Context) -> Any:
        """Hard delete: the stream can be neither read nor written again."""
        options = request.options
        name = wire.stream_name(options.stream_identifier)
        expected = wire.expected_version(options, "expected_stream_revision", "revision")
        position = self._delete(self._log.tombstone, name, expected, context)
        return streams_pb2.TombstoneResp(
            position=streams_pb2.TombstoneResp.Position(
                commit_position=position, prepare_position=position
            )
        )

    @staticmethod
    def _delete(operation: Any, name: str, expected: int, context: Context) -> int:
        try:
            position: int = operation(name, expected, lambda: wire.proceed_while_wanted(context))
        except WrongVersion as error:
            # EventStoreDB names both deletes "Delete" in this message
            wire.abort_wrong_version(context, error, "Delete")
        except Deleted:
            wire.abort_deleted(context, name)
        except Expired:
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "Operation timed out")
        return position


def _fill_success(success: Any, result: WriteResult, position_type: Any) -> None:
    if result.current_revision is None:
        success.no_stream.SetInParent()
    else:
        success.current_revision = result.current_revision
    if result.position is None:
        success.no_position.SetInParent()
    else:
        success.position.CopyFrom(
            position_type(commit_position=result.position, prepare_position=result.position)
        )
