"""Several stream appends in one round trip: v1 ``BatchAppend`` called on the client's channel.

``Streams.BatchAppend`` is a bidirectional call: each request names a stream, its expected
revision and its events (``is_final``: one atomic append), and the server answers each by its
correlation id. The clients send one request per call and wait for its answer; this module
sends every append of a processor's batch on one call and then reads all the answers, so a
batch that spans instances costs one round trip instead of one per instance (and the answers
carry each stream's new revision, which the clients drop: an ``ANY`` append needs no read to
find its revision).

The appends are independent, as if sent one after another: each is atomic on its own, a
failure of one does not undo the others. The server takes a call's requests in the order sent
(EventStoreDB hands them to its single writer in that order), so appends to one stream keep
their order. Messages are built with the generated modules the test server also uses
(:mod:`decider.stores.esdb_testserver._proto`, a descriptor pool of their own), so neither
client's internals are needed beyond its channel, call metadata and credentials.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import grpc

from decider.stores.errors import StoreError, StoreUnavailable, StreamDeleted, WrongExpectedVersion
from decider.stores.esdb_testserver._proto import shared_pb2, streams_pb2
from decider.stores.protocol import EXISTS, NO_STREAM, AppendResult, NewEvent, StreamAppend

_BATCH_APPEND = "/event_store.client.streams.Streams/BatchAppend"
_MAX_DEADLINE_SECONDS = 315_576_000_000  # protobuf's largest Duration: no deadline
_Req: Any = streams_pb2.BatchAppendReq
_Resp: Any = streams_pb2.BatchAppendResp
_UNAVAILABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)

Outcome = AppendResult | StoreError
"""One append's answer: its result, or the error it met (mapped)."""


def _request(item: StreamAppend, correlation: uuid.UUID) -> Any:
    options = _Req.Options(
        stream_identifier=shared_pb2.StreamIdentifier(stream_name=item.stream.encode("utf-8"))
    )
    options.deadline.seconds = _MAX_DEADLINE_SECONDS
    expected = item.expected_revision
    if isinstance(expected, int):
        options.stream_position = expected
    elif expected is NO_STREAM:
        options.no_stream.SetInParent()
    elif expected is EXISTS:
        options.stream_exists.SetInParent()
    else:
        options.any.SetInParent()
    return _Req(
        correlation_id=shared_pb2.UUID(string=str(correlation)),
        options=options,
        proposed_messages=[_message(event) for event in item.events],
        is_final=True,
    )


def _message(event: NewEvent) -> Any:
    # as the adapter's append: the content type only tells projections whether data is JSON
    is_json = event.data[:1] in (b"{", b"[")
    return _Req.ProposedMessage(
        id=shared_pb2.UUID(string=str(event.id)),
        metadata={
            "type": event.type,
            "content-type": "application/json" if is_json else "application/octet-stream",
        },
        custom_metadata=event.metadata,
        data=event.data,
    )


def _outcome(response: Any, item: StreamAppend) -> Outcome:
    if response.WhichOneof("result") == "success":
        success = response.success
        if success.WhichOneof("current_revision_option") != "current_revision":
            return StoreError(
                f"EventStoreDB answered an append to {item.stream!r} without a revision"
            )
        return AppendResult(
            next_expected_revision=int(success.current_revision),
            position=int(success.position.commit_position),
        )
    error = response.error
    details = error.details
    if details.Is(shared_pb2.WrongExpectedVersion.DESCRIPTOR):
        wrong: Any = shared_pb2.WrongExpectedVersion()
        details.Unpack(wrong)
        actual = (
            int(wrong.current_stream_revision)
            if wrong.WhichOneof("current_stream_revision_option") == "current_stream_revision"
            else None
        )
        return WrongExpectedVersion(item.stream, item.expected_revision, actual)
    if details.Is(shared_pb2.StreamDeleted.DESCRIPTOR):
        return StreamDeleted(item.stream)
    if details.Is(shared_pb2.Timeout.DESCRIPTOR):
        return StoreUnavailable(f"EventStoreDB timed out appending to {item.stream!r}")
    return StoreError(
        f"EventStoreDB error on {item.stream!r}: {error.message or 'append failed'}"
        f" ({details.type_url.rpartition('/')[2] or 'no details'})"
    )


def batch_append(client: Any, appends: Sequence[StreamAppend]) -> list[Outcome]:
    """Send every append of ``appends`` on one ``BatchAppend`` call; each one's outcome, in
    order. A failure of the call itself (the server is gone) raises
    :class:`~decider.stores.errors.StoreUnavailable` (or :class:`StoreError`): then any of the
    appends may or may not have been written."""
    if not appends:
        return []
    correlations = [uuid.uuid4() for _ in appends]
    by_id = {str(c): i for i, c in enumerate(correlations)}
    requests = [_request(item, c) for item, c in zip(appends, correlations, strict=True)]
    outcomes: list[Outcome | None] = [None] * len(appends)
    try:
        call = client._connection._grpc_channel.stream_stream(
            _BATCH_APPEND,
            request_serializer=_Req.SerializeToString,
            response_deserializer=_Resp.FromString,
        )
        responses = call(
            iter(requests),
            metadata=(*client._call_metadata, ("requires-leader", "true")),
            credentials=client._call_credentials,
        )
        left = len(appends)
        for response in responses:
            index = by_id.get(response.correlation_id.string)
            if index is None or outcomes[index] is not None:
                continue
            outcomes[index] = _outcome(response, appends[index])
            left -= 1
            if left == 0:
                break  # the server ends the call: every request was final
    except grpc.RpcError as exc:
        code = exc.code() if isinstance(exc, grpc.Call) else None
        if code in _UNAVAILABLE:
            raise StoreUnavailable(f"EventStoreDB did not answer: {exc!r}") from exc
        raise StoreError(f"EventStoreDB batch append failed: {exc!r}") from exc
    except ValueError as exc:  # the channel was closed under us
        raise StoreUnavailable(f"EventStoreDB connection closed: {exc}") from exc
    missing = [appends[i].stream for i, o in enumerate(outcomes) if o is None]
    if missing:
        raise StoreUnavailable(f"EventStoreDB ended a batch append without answering {missing!r}")
    return [o for o in outcomes if o is not None]


def first_failure(outcomes: Sequence[Outcome]) -> list[AppendResult]:
    """The results, or raise the first failure (in the appends' order)."""
    for outcome in outcomes:
        if isinstance(outcome, StoreError):
            raise outcome
    return [o for o in outcomes if isinstance(o, AppendResult)]
