"""What every processor shares: its context, the drain-a-batch loop, commits and skip records.

A processor is a catch-up subscription from its stored checkpoint. It drains what is ready into
a batch (up to ``batch_size``), handles the batch, and commits the batch's appends together with
the checkpoint: in one transaction when the store is a
:class:`~decider.stores.protocol.TransactionalStore` (group commit), else stream by stream and then
the
checkpoint (at least once, made exactly-once in effect by derived event ids).
"""

from __future__ import annotations

import abc
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from decider import Envelope, Metadata, event_id
from decider.processors.app import App, skipped_stream
from decider.processors.clock import Clock, Signal
from decider.processors.messages import InputSkipped
from decider.stores.protocol import (
    ANY,
    CaughtUp,
    CheckpointStore,
    EventStore,
    Filter,
    NewEvent,
    RecordedEvent,
    StreamAppend,
    Subscription,
    TransactionalStore,
)

LOGGER = logging.getLogger("decider")
"""The logger every processor writes to."""


@attrs.define
class Context:
    """What a processor runs with; shared by the processors of one service run."""

    app: App
    store: EventStore
    checkpoints: CheckpointStore
    clock: Clock
    stop: Signal
    progress: Callable[[], None]
    batch_size: int = 500
    logger: logging.Logger = LOGGER


class Processor(abc.ABC):
    """A named catch-up subscription that handles events in batches and commits its checkpoint.

    Subclasses set :attr:`name` and :attr:`filter` and implement :meth:`process`, which must
    commit (see :meth:`commit`) before returning. :meth:`run` is the thread body: it resumes
    from the checkpoint, and after an unexpected error it logs, waits (interruptibly) and
    resumes from the checkpoint again, so a passing outage does not end the service.
    """

    name: str
    filter: Filter

    def __init__(self, context: Context) -> None:
        self.context = context
        self.committed: int | None = None
        self.caught_up = False
        self.errors: list[BaseException] = []
        self._subscription: Subscription | None = None
        self._lock = threading.Lock()
        self._transactional = isinstance(context.store, TransactionalStore)

    @property
    def log(self) -> logging.Logger:
        """The service's logger."""
        return self.context.logger

    def run(self) -> None:
        """Consume until the service stops; resume from the checkpoint after a failure."""
        backoff = 0.1
        while not self.context.stop.is_set():
            try:
                self.consume()
                backoff = 0.1
            except Exception as exc:
                if self.context.stop.is_set():
                    break
                self.errors.append(exc)
                self.log.exception("%s failed; resuming from its checkpoint", self.name)
                self.context.stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
        self.log.info("%s stopped at position %s", self.name, self.committed)

    def consume(self) -> None:
        """One subscription's life: from the checkpoint until stopped."""
        self.committed = self.context.checkpoints.load_checkpoint(self.name)
        subscription = self.context.store.subscribe(self.committed, self.filter)
        with self._lock:
            self._subscription = subscription
        # A stop() that came before the subscription existed found nothing to end.
        if self.context.stop.is_set() or self.halted():
            subscription.stop()
        self.log.info("%s starting after position %s", self.name, self.committed)
        try:
            while not self.context.stop.is_set():
                item = subscription.poll(None)
                if item is None:
                    return
                batch: list[RecordedEvent] = []
                while item is not None:
                    if isinstance(item, CaughtUp):
                        self.on_caught_up(item)
                    else:
                        batch.append(item)
                        if len(batch) >= self.context.batch_size:
                            break
                    item = subscription.poll(0)
                if batch:
                    self.process(batch)
                self.context.progress()
        finally:
            subscription.stop()

    def stop(self) -> None:
        """Wake the thread so it finishes the batch in hand and returns (stop signal set first)."""
        with self._lock:
            if self._subscription is not None:
                self._subscription.stop()

    def halted(self) -> bool:
        """Whether this subscription's life must end now, although the service goes on."""
        return False

    def on_caught_up(self, item: CaughtUp) -> None:
        """Note (and log) that history is done and what follows is live."""
        if not self.caught_up:
            self.caught_up = True
            self.log.info("%s caught up at position %s", self.name, item.position)

    @abc.abstractmethod
    def process(self, batch: Sequence[RecordedEvent]) -> None:
        """Handle ``batch`` and commit its effects and checkpoint."""

    def idle_position(self) -> int | None:
        """The position up to which this processor has nothing left to do."""
        return self.committed

    def has_due_work(self) -> bool:
        """Whether work is in hand that does not show in the store (a due timer)."""
        return False

    # -- committing -----------------------------------------------------------------------

    def commit(self, appends: Sequence[StreamAppend], position: int | None) -> None:
        """Write ``appends`` and the checkpoint ``position``: one transaction where possible.

        Raises :class:`~decider.stores.errors.WrongExpectedVersion` if an append's check fails (on a
        transactional store nothing is written then).
        """
        store = self.context.store
        if appends and self._transactional:
            assert isinstance(store, TransactionalStore)
            checkpoint = None if position is None else (self.name, position)
            store.append_batch(appends, checkpoint)
        else:
            for item in appends:
                store.append(item.stream, item.events, item.expected_revision)
            if position is not None:
                self.context.checkpoints.save_checkpoint(self.name, position)
        if position is not None:
            self.committed = position

    def skip(self, event: RecordedEvent, reason: str) -> StreamAppend:
        """Record that ``event`` is skipped (poison), as an append for the batch's commit."""
        self.log.warning(
            "%s skips %s at %s@%d: %s", self.name, event.type, event.stream, event.revision, reason
        )
        stream = skipped_stream(self.name)
        record = InputSkipped(
            processor=self.name,
            reason=reason,
            stream=event.stream,
            revision=event.revision,
            position=event.position,
            event_type=event.type,
            event_id=str(event.id),
        )
        return StreamAppend(stream, [self.derived(stream, str(event.id), record)], ANY)

    def derived(
        self,
        stream: str,
        cause: str,
        message: Any,
        *,
        index: int = 0,
        correlation_id: str | None = None,
        causation_id: str | None = None,
    ) -> NewEvent:
        """A new event for ``message`` whose id derives from ``stream``, ``cause`` and ``index``."""
        codec = self.context.app.codec
        new_id = event_id(stream, cause, index)
        metadata = Metadata(
            message_id=str(new_id),
            correlation_id=correlation_id,
            causation_id=causation_id if causation_id is not None else cause,
        )
        type_name, data, encoded = codec.encode_envelope(Envelope(message, metadata))
        return NewEvent(new_id, type_name, data, encoded)
