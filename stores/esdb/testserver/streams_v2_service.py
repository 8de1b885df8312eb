"""KurrentDB's v2 ``StreamsService.AppendSession`` and the ``ServerFeatures`` service that
advertises it, as a KurrentDB 25.1 node answers them.

``AppendSession`` takes one ``AppendRequest`` per stream and writes them all atomically
(:mod:`~decider.stores.esdb.testserver.multi_append`). Errors are rich, as KurrentDB sends them:
the trailer ``grpc-status-details-bin`` holds a ``google.rpc.Status`` whose details are a
``google.rpc.ErrorInfo`` (reason, domain ``streams``) and the typed details message.
Records written here read back through v1 with their properties as JSON metadata, plus
``$schema.name`` (the type) and ``$schema.format`` (``Json``, ``Bytes``...), as on KurrentDB.
"""

from __future__ import annotations

import collections
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any, NoReturn

import grpc
from google.protobuf import json_format

from decider.stores.esdb._proto import (
    error_details_pb2,
    serverfeatures_pb2,
    serverfeatures_pb2_grpc,
    streams_v2_errors_pb2,
    streams_v2_pb2,
    streams_v2_pb2_grpc,
)
from decider.stores.esdb.testserver import wire
from decider.stores.esdb.testserver.log import (
    ANY,
    NO_STREAM,
    STREAM_EXISTS,
    Deleted,
    EventLog,
    Expired,
    Proposed,
    TooLarge,
    WrongVersion,
)
from decider.stores.esdb.testserver.multi_append import (
    DELETED,
    MAX_APPEND_SIZE,
    TOMBSTONED,
    Check,
    ChecksFailed,
    StreamPart,
    append_records,
    append_session,
)
from decider.stores.esdb.testserver.wire import Context

VERSIONS = {"24.10": "24.10.0", "25.1": "25.1.0", "26.1": "26.1.0"}
"""The node versions the test server can be (``ServerFeatures``' version for each): 24.10
serves no v2 call, 25.1 ``AppendSession``, 26.1 ``AppendRecords`` too."""
# a check's states: ANY checks nothing and is refused (KurrentDB 26.1's ConsistencyCheckValidator)
_STATES = (NO_STREAM, STREAM_EXISTS, DELETED, TOMBSTONED)

_FORMATS = {1: "Json", 2: "Protobuf", 3: "Avro", 4: "Bytes"}
# KurrentDB 26.1: letters and digits of any script, and _ . $ : - (25.1 allowed ASCII only)
_SCHEMA_NAME = re.compile(r"^[\w.$:-]+$")
_TYPE_URL = "type.googleapis.com/"
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":")).encode


class _RichStatus(
    collections.namedtuple("_RichStatus", ("code", "details", "trailing_metadata")),
    grpc.Status,  # type: ignore[misc]  # untyped
):
    """A status with trailing metadata, for ``context.abort_with_status``."""


def abort_rich(
    context: Context, code: grpc.StatusCode, reason: str, message: str, detail: Any | None
) -> NoReturn:
    """End the call with KurrentDB's rich error: ErrorInfo(reason) and the typed ``detail``."""
    status = error_details_pb2.Status(code=code.value[0], message=message)
    status.details.add().Pack(error_details_pb2.ErrorInfo(reason=reason, domain="streams"))
    if detail is not None:
        status.details.add().Pack(detail)
    trailer = (("grpc-status-details-bin", status.SerializeToString()),)
    context.abort_with_status(_RichStatus(code, message, trailer))


class StreamsV2Servicer(streams_v2_pb2_grpc.StreamsServiceServicer):
    """``kurrentdb.protocol.v2.streams.StreamsService``: ``AppendSession``, and ``AppendRecords``
    as a 26.1 node (``append_records=False``: UNIMPLEMENTED, as on 25.x)."""

    def __init__(self, log: EventLog, *, append_records: bool = True) -> None:
        self._log = log
        self._append_records = append_records

    def AppendSession(self, request_iterator: Iterator[Any], context: Context) -> Any:
        """Collect one request per stream until the client half-closes, then write them all."""
        parts: list[StreamPart] = []
        seen: set[str] = set()
        for request in request_iterator:
            part = _part(request, context)
            if part.stream.casefold() in seen:
                abort_rich(
                    context,
                    grpc.StatusCode.ABORTED,
                    "STREAM_ALREADY_IN_APPEND_SESSION",
                    f"Stream '{part.stream}' already has a different group of messages in this"
                    " session. Each stream may appear once per session.",
                    streams_v2_errors_pb2.StreamAlreadyInAppendSessionErrorDetails(
                        stream=part.stream
                    ),
                )
            seen.add(part.stream.casefold())
            parts.append(part)
        if not parts:
            abort_rich(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                "APPEND_SESSION_NO_REQUESTS",
                "Append session started, but no append requests were sent before ending the"
                " session.",
                None,
            )
        try:
            result = append_session(self._log, parts, lambda: wire.proceed_while_wanted(context))
        except WrongVersion as error:
            abort_rich(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                "STREAM_REVISION_CONFLICT",
                f"Append failed due to a revision conflict on stream '{error.stream}'."
                f" Expected revision: {error.expected}. Actual revision: {error.current}.",
                streams_v2_errors_pb2.StreamRevisionConflictErrorDetails(
                    stream=error.stream,
                    expected_revision=error.expected,
                    actual_revision=error.current,
                ),
            )
        except Deleted as error:
            abort_rich(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                "STREAM_TOMBSTONED",
                f"Stream '{error.stream}' has been tombstoned. It has been permanently removed"
                " from the system and cannot be restored.",
                streams_v2_errors_pb2.StreamTombstonedErrorDetails(stream=error.stream),
            )
        except TooLarge as error:
            _abort_too_large(context, error, sum(len(e.data) for p in parts for e in p.events))
        except Expired:
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "Operation timed out")
        return streams_v2_pb2.AppendSessionResponse(
            output=[
                streams_v2_pb2.AppendResponse(stream=part.stream, stream_revision=revision)
                for part, revision in zip(parts, result.revisions, strict=True)
            ],
            position=result.position,
        )

    def AppendRecords(self, request: Any, context: Context) -> Any:
        """Write the records to the streams they name, in request order, once every check
        holds (:func:`~decider.stores.esdb.testserver.multi_append.append_records`)."""
        if not self._append_records:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        if not request.records:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "No records to append")
        checks: list[Check] = []
        checked: set[str] = set()
        for check in request.checks:
            state = check.stream_state
            if not check.HasField("stream_state") or not state.stream:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "A check names no stream")
            if state.expected_state < 0 and state.expected_state not in _STATES:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"Invalid expected state {state.expected_state} for {state.stream}",
                )
            if state.stream.casefold() in checked:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, f"Stream {state.stream} is checked twice"
                )
            checked.add(state.stream.casefold())
            checks.append(Check(state.stream, state.expected_state))
        records = []
        for record in request.records:
            _check_stream(record.stream, context)
            records.append((record.stream, _proposed(record, record.stream, context)))
        try:
            result = append_records(
                self._log, records, checks, lambda: wire.proceed_while_wanted(context)
            )
        except ChecksFailed as error:
            lines = "".join(
                f"\n - stream '{v.stream}': expected {v.expected}, actual {v.actual}"
                for v in error.violations
            )
            Violation = streams_v2_errors_pb2.ConsistencyViolation
            abort_rich(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                "APPEND_CONSISTENCY_VIOLATION",
                f"{error}{lines}",
                streams_v2_errors_pb2.AppendConsistencyViolationErrorDetails(
                    violations=[
                        Violation(
                            check_index=v.index,
                            stream_state=Violation.StreamStateViolation(
                                stream=v.stream, expected_state=v.expected, actual_state=v.actual
                            ),
                        )
                        for v in error.violations
                    ]
                ),
            )
        except TooLarge as error:
            _abort_too_large(context, error, sum(len(event.data) for _, event in records))
        except Expired:
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "Operation timed out")
        return streams_v2_pb2.AppendRecordsResponse(
            revisions=[
                streams_v2_pb2.StreamRevision(stream=stream, revision=revision)
                for stream, revision in result.revisions
            ],
            position=result.position,
        )


def _abort_too_large(context: Context, error: TooLarge, size: int) -> NoReturn:
    """End a call whose write is past :data:`MAX_APPEND_SIZE` (``size``: its data's bytes)."""
    abort_rich(
        context,
        grpc.StatusCode.ABORTED,
        "APPEND_TRANSACTION_SIZE_EXCEEDED",
        str(error),
        streams_v2_errors_pb2.AppendTransactionSizeExceededErrorDetails(
            size=min(size, 2**31 - 1), max_size=MAX_APPEND_SIZE
        ),
    )


def _check_stream(stream: str, context: Context) -> None:
    """End the call with INVALID_ARGUMENT if ``stream`` cannot be written to (empty, ``$$``)."""
    if not stream or stream == "$$":
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Invalid stream name {stream!r}")


def _part(request: Any, context: Context) -> StreamPart:
    """One validated ``AppendRequest``; a bad one ends the call with INVALID_ARGUMENT."""
    stream = request.stream
    _check_stream(stream, context)
    expected = request.expected_revision if request.HasField("expected_revision") else ANY
    if expected < 0 and expected not in (NO_STREAM, ANY, STREAM_EXISTS):
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"Invalid expected revision {expected} for {stream}"
        )
    if not request.records:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"No records to append to {stream}")
    return StreamPart(stream, expected, [_proposed(r, stream, context) for r in request.records])


def _proposed(record: Any, stream: str, context: Context) -> Proposed:
    record_id = record.record_id if record.HasField("record_id") else str(uuid.uuid4())
    if not _CANONICAL_UUID.fullmatch(record_id):  # the clients' form needs no round trip
        try:
            record_id = str(uuid.UUID(record_id))
        except ValueError:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"Record id {record_id!r} is not a UUID"
            )
    schema = record.schema
    schema_format, name = schema.format, schema.name
    shown_format = _FORMATS.get(schema_format)
    if shown_format is None:
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"Record {record_id} of {stream}: no schema format"
        )
    if not _SCHEMA_NAME.match(name):
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"Record {record_id} of {stream}: invalid schema name {name!r}",
        )
    properties: dict[str, Any] = {}
    for key, value in record.properties.items():
        if not key:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "A property key is empty")
        # string values (what kurrentdbclient sends) without protobuf's generic JSON printer
        kind = value.WhichOneof("kind")
        properties[key] = (
            value.string_value if kind == "string_value" else json_format.MessageToDict(value)
        )
    if schema_format != 1:
        properties["$schema.format"] = shown_format
    if schema.HasField("id"):
        properties["$schema.id"] = schema.id
    # what a v1 read returns as the record's metadata (KurrentDB's EventRecord mapping)
    properties["$schema.name"] = name
    properties["$schema.format"] = shown_format
    return Proposed(
        id=record_id,
        type=name,
        content_type="application/json" if schema_format == 1 else "application/octet-stream",
        data=record.data,
        metadata=_COMPACT_JSON(properties).encode(),
    )


class ServerFeaturesServicer(serverfeatures_pb2_grpc.ServerFeaturesServicer):
    """``ServerFeatures.GetSupportedMethods``: every method served, names lowercased."""

    def __init__(self, services: dict[str, list[str]], version: str) -> None:
        self._version = VERSIONS[version]
        self._methods = [
            serverfeatures_pb2.SupportedMethod(method_name=m.lower(), service_name=s.lower())
            for s, methods in services.items()
            for m in methods
        ]

    def GetSupportedMethods(self, request: Any, context: Context) -> Any:
        """The supported methods and the server's version (``major.minor.patch``)."""
        return serverfeatures_pb2.SupportedMethods(
            methods=self._methods, event_store_server_version=self._version
        )
