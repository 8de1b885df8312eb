"""The EventStoreDB adapter's catch-up subscription (:class:`EsdbSubscription`), on a reader
thread of its own; :meth:`decider.stores.esdb.store.EsdbEventStore.subscribe` opens one. Its
``Read`` call and records come from :mod:`._read_call`, not from the client's
``subscribe_to_all`` (which costs as much again per event)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc

from decider.stores.esdb._errors import closed_channel, rpc_error
from decider.stores.esdb._filters import server_filter
from decider.stores.esdb._read_call import ReadChannel, recorded, subscription_request
from decider.stores.esdb._reader import QueuedReader
from decider.stores.protocol import CaughtUp, Filter, RecordedEvent


class EsdbSubscription(QueuedReader[RecordedEvent | CaughtUp]):
    """A catch-up subscription to ``$all`` over one EventStoreDB subscription call.

    A background thread reads the gRPC stream into a bounded queue, so :meth:`poll` can wait
    with a timeout; the thread blocks in gRPC (no polling) while nothing happens.
    :class:`CaughtUp` is yielded once, with the last position the server considered (events
    and checkpoints, also those the local filter dropped).
    """

    _ITEMS = (RecordedEvent, CaughtUp)
    _ENDED = "subscription"
    _THREAD = "esdb-subscription"
    # the thread takes each message off the call itself (._read_call) under the call's lock:
    # left running at interpreter exit, it may be frozen holding it, and the call's __del__
    # then waits for it forever (as the append line's threads did: ._append_line)
    _JOIN = True

    def __init__(self, channel: ReadChannel, after_position: int | None, filter: Filter) -> None:
        super().__init__()
        self._filter = filter
        self._position = after_position
        request = subscription_request(after_position, server_filter(filter))
        try:
            self._call = channel.open_read(request)
        except ValueError as exc:  # the channel was closed under us
            raise closed_channel(exc) from exc
        self._start()

    def __iter__(self) -> Iterator[RecordedEvent | CaughtUp]:
        while (item := self.poll(None)) is not None:
            yield item

    def _cancel(self) -> None:
        self._call.cancel()

    def _pump(self) -> None:
        try:
            self._read()
        except grpc.RpcError as exc:
            if not self.stopped:
                raise rpc_error(exc, "read") from exc

    def _read(self) -> None:
        caught_up_sent = False
        matches = self._filter.matches
        for response in self._call:
            content = response.WhichOneof("content")
            if content == "event":
                record = recorded(response.event)
                self._position = record.position
                if matches(record.stream, record.type) and not self._put(record):
                    return
            elif content == "checkpoint":
                checkpoint = response.checkpoint.commit_position
                if self._position is None or checkpoint > self._position:
                    self._position = checkpoint
            elif content == "caught_up" and not caught_up_sent:
                caught_up_sent = True
                if not self._put(CaughtUp(self._position)):
                    return
