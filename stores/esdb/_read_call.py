"""``Streams.Read`` as the catch-up subscription makes it: the request, and records from answers.

A subscription receives one message per event, and in Python each message already costs tens
of microseconds in gRPC alone: the clients' conversion on top (a record of their own with a
dozen fields, then ours) cost as much again. The subscription therefore makes its ``Read``
call itself, as the append line does its ``BatchAppend`` call (:mod:`._append_line`),
and makes a :class:`~decider.stores.protocol.RecordedEvent` straight from each answer. The
messages are the generated ones the test server serves
(:mod:`decider.stores.esdb._proto`, a descriptor pool of their own); of a client
only its channel factory, call metadata and credentials are used (:mod:`._client`).

Subscriptions go over a channel of the store's own (:class:`ReadChannel`), made by the client
for the node it is connected to (its TLS settings and options), with gRPC's single-threaded
unary-stream option: the thread that reads a subscription takes each message off the call
itself, where on the client's channel a channel-wide thread takes it and wakes the reader (a
thread hand-off per message, about a third of a message's cost).

The request is the one both clients send for ``subscribe_to_all``, but with a checkpoint
every :data:`CHECKPOINT_WINDOW` x :data:`CHECKPOINT_MULTIPLIER` events considered (the
clients' default, 30 x 5, sends one every 150): a checkpoint only moves a subscription's
position on past events its filter drops, and every message costs.
"""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime
from typing import Any

import grpc
import grpc.experimental

from decider.stores.esdb._client import call_options, new_channel, target
from decider.stores.esdb._proto import shared_pb2, streams_pb2
from decider.stores.protocol import RecordedEvent

READ = "/event_store.client.streams.Streams/Read"
CHECKPOINT_WINDOW = 32
"""The filter's search window (``max``)."""
CHECKPOINT_MULTIPLIER = 32
"""A checkpoint every window x multiplier events considered (1,024)."""
_EPOCH = datetime.fromtimestamp(0, UTC)
# "created" counts .NET ticks (100 ns) since the Unix epoch; divided as both clients divide
# (the ticks made a float first), so a record read here equals one the client reads
_TICKS_PER_SECOND = 10_000_000.0
Req: Any = streams_pb2.ReadReq
Resp: Any = streams_pb2.ReadResp
_Options: Any = Req.Options


def subscription_request(after_position: int | None, arguments: dict[str, Any]) -> Any:
    """The ``ReadReq`` of a subscription to ``$all`` from ``after_position`` (the server
    starts after it; ``None``: from the start), filtered by ``arguments`` as
    :func:`~decider.stores.esdb.server_filter` gives them to a client."""
    options = _Options(
        read_direction=_Options.Forwards,
        resolve_links=False,
        subscription=_Options.SubscriptionOptions(),
        uuid_option=_Options.UUIDOption(string=shared_pb2.Empty()),
    )
    if after_position is None:
        options.all.start.SetInParent()
    else:
        options.all.position.commit_position = after_position
        options.all.position.prepare_position = after_position
    include = arguments.get("filter_include", ())
    exclude = arguments.get("filter_exclude", ())
    if include or exclude:
        # the clients' regular expressions: one of the included, or none of the excluded
        if include:
            regex = "^" + "|".join(include) + "$"
        else:
            regex = "^(?!(" + "|".join(pattern + "$" for pattern in exclude) + "))"
        expression = _Options.FilterOptions.Expression(regex=regex)
        filter_options = _Options.FilterOptions(
            max=CHECKPOINT_WINDOW, checkpointIntervalMultiplier=CHECKPOINT_MULTIPLIER
        )
        if arguments.get("filter_by_stream_name"):
            filter_options.stream_identifier.CopyFrom(expression)
        else:
            filter_options.event_type.CopyFrom(expression)
        options.filter.CopyFrom(filter_options)
    else:
        options.no_filter.SetInParent()
    return Req(options=options)


class ReadChannel:
    """The store's channel for subscriptions, to the node its client is connected to.

    Made on first use, and again once the client has moved to another node (after a
    reconnect through discovery); :meth:`close` closes it, ending its calls.
    """

    _OPTIONS = ((grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1),)

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._channel: grpc.Channel | None = None
        self._target: str | None = None
        self._closed = False

    def open_read(self, request: Any) -> Any:
        """Start a ``Read`` call: an iterator of ``ReadResp`` that is also a :class:`grpc.Call`
        (``cancel()`` ends it). Iterate it on one thread only (the option's condition)."""
        call = self._get().unary_stream(
            READ, request_serializer=Req.SerializeToString, response_deserializer=Resp.FromString
        )
        return call(request, **call_options(self._client))

    def _get(self) -> grpc.Channel:
        now = target(self._client)
        with self._lock:
            if self._closed:
                raise ValueError("the store's read channel is closed")
            if self._channel is None or now != self._target:
                if self._channel is not None:
                    self._channel.close()  # the node changed: its calls end, and resubscribe
                self._channel = new_channel(self._client, now, self._OPTIONS)
                self._target = now
            return self._channel

    def close(self) -> None:
        """Close the channel (its calls end); later reads raise ``ValueError``."""
        with self._lock:
            self._closed = True
            channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()


def recorded(read_event: Any) -> RecordedEvent:
    """Our record of a ``ReadResp.ReadEvent`` (links are not resolved: its event)."""
    event = read_event.event
    fields = event.metadata
    try:
        recorded_at = datetime.fromtimestamp(int(fields["created"]) / _TICKS_PER_SECOND, UTC)
    except (KeyError, ValueError, OverflowError, OSError):
        recorded_at = _EPOCH
    return RecordedEvent(
        id=uuid.UUID(event.id.string),
        type=fields.get("type", ""),
        data=event.data,
        metadata=event.custom_metadata,
        stream=event.stream_identifier.stream_name.decode("utf-8", "surrogateescape"),
        revision=event.stream_revision,
        position=event.commit_position,
        recorded_at=recorded_at,
    )
