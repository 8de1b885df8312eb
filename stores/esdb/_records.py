"""KurrentDB 26.1's ``AppendRecords``: a whole batch in one unary call, made by the store itself.

25.1's ``AppendSession`` streams one request per stream: a batch of 25 instances and its
checkpoint was 26 gRPC messages and a thread to send them, about 5 ms of client CPU and as
much of the server's. ``AppendRecords`` takes every record in one message (each record names
its stream) with one consistency check per stream that expects a revision or a state, and
answers each written stream's revision and the commit position. Neither client has to know
it: the call goes over the client's channel (:mod:`._client`) with the messages generated for
the test server (:mod:`decider.stores.esdb._proto`), like the append line (:mod:`._append_line`).

Metadata travels as string properties, as with ``AppendSession``: a batch with other metadata
raises :class:`NotProperties` before anything is sent (the caller appends it stream by
stream). A failed check comes back as ``APPEND_CONSISTENCY_VIOLATION`` listing every
violation; the first in the server's order is raised as
:class:`~decider.stores.errors.WrongExpectedVersion` (or
:class:`~decider.stores.errors.StreamDeleted` for a tombstoned stream), as
:func:`~decider.stores.esdb._errors.records_error` reads it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import grpc

from decider.stores.esdb._client import call_options, channel
from decider.stores.esdb._errors import closed_channel, records_error
from decider.stores.esdb._proto import streams_v2_pb2
from decider.stores.protocol import ANY, EXISTS, NO_STREAM, ExpectedRevision, NewEvent

APPEND_RECORDS = "/kurrentdb.protocol.v2.streams.StreamsService/AppendRecords"
_JSON, _BYTES = 1, 4  # SchemaFormat
_STATES = {NO_STREAM: -1, ANY: -2, EXISTS: -4}
_Request: Any = streams_v2_pb2.AppendRecordsRequest
_Response: Any = streams_v2_pb2.AppendRecordsResponse


class NotProperties(ValueError):
    """An event's metadata is neither empty nor a JSON object of strings: v2 cannot carry it."""


def records_request(requests: Sequence[tuple[str, Sequence[NewEvent], ExpectedRevision]]) -> Any:
    """The ``AppendRecordsRequest`` that writes each ``(stream, events, expected)`` (each stream
    once), checking every expectation but ``ANY``."""
    message = _Request()
    records, checks = message.records, message.checks
    for stream, events, expected in requests:
        for event in events:
            record = records.add(record_id=str(event.id), stream=stream, data=event.data)
            schema = record.schema
            schema.name = event.type
            schema.format = _JSON if event.data[:1] in (b"{", b"[") else _BYTES
            if event.metadata:
                _copy_properties(event.metadata, record.properties)
        if expected is not ANY:
            state = checks.add().stream_state
            state.stream = stream
            state.expected_state = expected if isinstance(expected, int) else _STATES[expected]
    return message


def _copy_properties(metadata: bytes, properties: Any) -> None:
    try:
        parsed = json.loads(metadata)
    except ValueError as exc:
        raise NotProperties(f"metadata is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise NotProperties("metadata is not a JSON object")
    for key, value in parsed.items():
        if not isinstance(value, str):
            raise NotProperties(f"metadata value of {key!r} is not a string")
        properties[key].string_value = value


def append_records(
    client: Any, requests: Sequence[tuple[str, Sequence[NewEvent], ExpectedRevision]]
) -> int:
    """Append every request atomically over ``client``'s channel; the commit position.

    Raises :class:`NotProperties` before sending if v2 cannot carry an event's metadata.
    Raises :class:`~decider.stores.errors.WrongExpectedVersion` (the first stream whose check
    failed, with its state), :class:`~decider.stores.errors.StreamDeleted`,
    :class:`~decider.stores.errors.StoreUnavailable` when the node does not answer, and
    :class:`~decider.stores.errors.StoreError` for any other refusal.
    """
    request = records_request(requests)
    try:
        call = channel(client).unary_unary(
            APPEND_RECORDS,
            request_serializer=_Request.SerializeToString,
            response_deserializer=_Response.FromString,
        )
        response = call(request, **call_options(client, leader=True))
    except ValueError as exc:  # the channel was closed under us
        raise closed_channel(exc) from exc
    except grpc.RpcError as exc:
        raise records_error(exc, {stream: expected for stream, _, expected in requests}) from exc
    return int(response.position)
