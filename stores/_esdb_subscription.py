"""The EventStoreDB adapter's catch-up subscription (:class:`EsdbSubscription`), on a reader
thread of its own; :meth:`decider.stores.esdb.EsdbEventStore.subscribe` opens one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from decider.stores._esdb_reader import QueuedReader
from decider.stores.esdb import CLIENT, _to_recorded, map_error, server_filter
from decider.stores.protocol import CaughtUp, Filter, RecordedEvent


class EsdbSubscription(QueuedReader[RecordedEvent | CaughtUp]):
    """A catch-up subscription to ``$all`` over one EventStoreDB subscription call.

    A background thread reads the gRPC stream into a bounded queue, so :meth:`poll` can wait
    with a timeout; the thread blocks in gRPC (no polling) while nothing happens.
    :class:`CaughtUp` is yielded once, with the last position the server considered (events
    and checkpoints, also those the local filter dropped).
    """

    _ITEMS = (RecordedEvent, CaughtUp)
    _ENDED = "EventStoreDB ended the subscription"
    _THREAD = "esdb-subscription"

    def __init__(self, client: Any, after_position: int | None, filter: Filter) -> None:
        super().__init__()
        self._filter = filter
        self._position = after_position
        try:
            self._call = client.subscribe_to_all(
                commit_position=after_position,
                include_caught_up=True,
                include_checkpoints=True,
                **server_filter(filter),
            )
        except CLIENT.base_error as exc:
            raise map_error(exc) from exc
        self._start()

    def __iter__(self) -> Iterator[RecordedEvent | CaughtUp]:
        while (item := self.poll(None)) is not None:
            yield item

    def _cancel(self) -> None:
        self._call.stop()

    def _pump(self) -> None:
        caught_up_sent = False
        for item in self._call:
            if isinstance(item, CLIENT.caught_up):
                if not caught_up_sent:
                    caught_up_sent = True
                    if not self._put(CaughtUp(self._position)):
                        return
            elif isinstance(item, CLIENT.checkpoint):
                checkpoint = item.commit_position
                if checkpoint is not None and (
                    self._position is None or checkpoint > self._position
                ):
                    self._position = checkpoint
            else:
                self._position = item.commit_position
                wanted = self._filter.matches(item.stream_name, item.type)
                if wanted and not self._put(_to_recorded(item)):
                    return
