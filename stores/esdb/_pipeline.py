"""``Streams.BatchAppend``'s messages: a request from an append, an outcome from an answer.

``BatchAppend`` is a bidirectional call: each request names a stream, its expected revision
and its events (``is_final``: one atomic append), and the server answers each by its
correlation id with the stream's new revision (which the clients' ``append_to_stream`` drops:
an ``ANY`` append needs no read to find its revision). The store sends every append on one
open call (:mod:`._append_line`). Messages are built with the generated modules the test
server also uses (:mod:`decider.stores.esdb._proto`, a descriptor pool of their
own), so neither client's internals are needed beyond its channel, call metadata and
credentials (:mod:`._client`). An error in an answer becomes the store's in
:func:`~decider.stores.esdb._errors.append_error`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from decider.stores.errors import StoreError
from decider.stores.esdb._errors import append_error
from decider.stores.esdb._proto import shared_pb2, streams_pb2
from decider.stores.protocol import EXISTS, NO_STREAM, AppendResult, NewEvent, StreamAppend

BATCH_APPEND = "/event_store.client.streams.Streams/BatchAppend"
_MAX_DEADLINE_SECONDS = 315_576_000_000  # protobuf's largest Duration: no deadline
Req: Any = streams_pb2.BatchAppendReq
Resp: Any = streams_pb2.BatchAppendResp

Outcome = AppendResult | StoreError
"""One append's answer: its result, or the error it met (mapped)."""


def request(item: StreamAppend, correlation: uuid.UUID) -> Any:
    options = Req.Options(
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
    return Req(
        correlation_id=shared_pb2.UUID(string=str(correlation)),
        options=options,
        proposed_messages=[_message(event) for event in item.events],
        is_final=True,
    )


def _message(event: NewEvent) -> Any:
    # as the adapter's append: the content type only tells projections whether data is JSON
    is_json = event.data[:1] in (b"{", b"[")
    return Req.ProposedMessage(
        id=shared_pb2.UUID(string=str(event.id)),
        metadata={
            "type": event.type,
            "content-type": "application/json" if is_json else "application/octet-stream",
        },
        custom_metadata=event.metadata,
        data=event.data,
    )


def outcome(response: Any, item: StreamAppend) -> Outcome:
    success = response.success
    if (
        response.WhichOneof("result") == "success"
        and success.WhichOneof("current_revision_option") == "current_revision"
    ):
        return AppendResult(
            next_expected_revision=int(success.current_revision),
            position=int(success.position.commit_position),
        )
    return append_error(response, item.stream, item.expected_revision)


def first_failure(outcomes: Sequence[Outcome]) -> list[AppendResult]:
    """The results, or raise the first failure (in the appends' order)."""
    for outcome in outcomes:
        if isinstance(outcome, StoreError):
            raise outcome
    return [o for o in outcomes if isinstance(o, AppendResult)]
