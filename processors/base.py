"""The processor engine: the drain-a-batch loop, committing, the conflict loop, skip records.

A processor is a catch-up subscription from its stored checkpoint. It drains what is ready into
a batch (up to ``batch_size``), and hands the batch to its policy (:meth:`Processor.handle`),
which decides and returns an :class:`Outcome`: the appends and the checkpoint to commit. The
engine (this module) owns everything after that:

- committing an outcome: in one transaction when the store is a
  :class:`~decider.stores.protocol.TransactionalStore` (group commit), else stream by stream and
  then the checkpoint (at least once, made exactly-once in effect by derived event ids);
- the one bounded reload-and-retry loop on revision conflicts, with jitter: the batch is redone
  unit by unit (by default input by input), each reloading what conflicted;
- the skip records: an input that cannot be handled goes to ``decider-skipped-<processor>``
  with the reason, and the processor moves on;
- the classification of failures (:mod:`decider.processors.failures`): skip, retry with
  back-off, or resume from the checkpoint; never the end of the thread;
- in a group of processes (:class:`~decider.processors.group.PartitionGroup`): every
  processor handles only the work of the partitions this process holds
  (:mod:`decider.processors.sharing`), each partition with its own checkpoint, and commits each
  partition's work under its lease (fencing). A commit that finds its lease lost writes
  nothing; the processor drops the lease and resumes from the checkpoints of what it still
  holds.
"""

from __future__ import annotations

import abc
import logging
import random
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import attrs

from decider import Envelope, Metadata, event_id
from decider.codec import describe
from decider.processors import logs, streams, telemetry
from decider.processors.app import App
from decider.processors.clock import Clock, Signal
from decider.processors.errors import ConflictsExhausted
from decider.processors.failures import PERMANENT, ErrorLog, Failure, classify
from decider.processors.messages import InputSkipped
from decider.processors.sharing import LeaseNotHeld, Share
from decider.stores import LeaseLost
from decider.stores.errors import StoreUnavailable, WrongExpectedVersion
from decider.stores.leases import commits_together
from decider.stores.protocol import (
    ANY,
    NO_STREAM,
    CaughtUp,
    CheckpointStore,
    EventStore,
    Filter,
    NewEvent,
    PipelinedStore,
    RecordedEvent,
    StreamAppend,
    Subscription,
    TransactionalStore,
)

if TYPE_CHECKING:
    from decider.processors.group import PartitionGroup

MAX_CONFLICT_RETRIES = 5
"""How many times one unit of work is redone after revision conflicts before giving up."""

ERRORS_KEPT = 100
"""How many of a processor's unexpected errors are kept (the rest are only counted)."""

LOGGER = logging.getLogger("decider")
"""The root of the package's loggers: each module logs to its own child
(``decider.processors.<module>``), so a level set here governs them all."""


@attrs.define
class Outcome:
    """What handling a batch (or part of one) leads to: the appends and the checkpoint to commit
    together, and what to do once they are committed (update caches and counters)."""

    appends: list[StreamAppend] = attrs.Factory(list)
    position: int | None = None
    on_commit: list[Callable[[], None]] = attrs.Factory(list)
    checkpoints: list[tuple[str, int]] = attrs.Factory(list)
    """Under a joint fence only (:meth:`~decider.processors.sharing.Share.fenced_together`):
    checkpoints (or marks kept beside them) at positions of their own, in the same commit."""


class Skip(Exception):
    """Raised by a policy for an input it cannot handle; the reason is recorded."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


Unit = tuple[RecordedEvent | None, Callable[[], Outcome]]
"""A unit of work to redo after a conflict: the input it is for (if one), and how to redo it."""


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
    logger: logging.Logger | None = None
    """One logger for every processor (``Service(logger=...)``); ``None``: each module's own."""
    group: PartitionGroup | None = None
    """The group this process shares the app's work with (``None``: it does all the work)."""


class Processor(abc.ABC):
    """A named catch-up subscription whose policy handles batches; the engine commits them.

    Subclasses set :attr:`name` and :attr:`filter` and implement :meth:`handle` (the policy);
    they may override :meth:`redo_units` and :meth:`resync` (what to do after a conflict).
    :meth:`run` is the thread body: it resumes from the checkpoint after any failure
    (classified by :func:`~decider.processors.failures.classify`), so neither an input, nor
    user code, nor a passing outage ends the thread.
    """

    name: str
    filter: Filter

    def __init__(self, context: Context) -> None:
        self.context = context
        self.committed: int | None = None
        self.caught_up = False
        self.errors = ErrorLog(ERRORS_KEPT)
        self.conflicts = 0
        self.skipped = 0
        self._subscription: Subscription | None = None
        self._lock = threading.Lock()
        self._transactional = isinstance(context.store, TransactionalStore)
        self._joint = self._transactional and commits_together(context.store)
        self._pipelined = isinstance(context.store, PipelinedStore)
        self._random = random.Random()
        self.share = Share(self)
        """This processor's share of its group's work (all of it without a group)."""

    @property
    def log(self) -> logs.ContextAdapter:
        """The policy's logger: its module's (``decider.processors.<module>``, or the one
        logger the service was given); every record carries ``processor=<name>``."""
        return self._logger(type(self).__module__)

    @property
    def engine_log(self) -> logs.ContextAdapter:
        """The engine's logger (``decider.processors.base``), with ``processor=<name>``."""
        return self._logger(__name__)

    def _logger(self, module: str) -> logs.ContextAdapter:
        logger = self.context.logger or logging.getLogger(module)
        return logs.with_context(logger, processor=self.name)

    # -- the thread -------------------------------------------------------------------------

    def run(self) -> None:
        """Consume until the service stops; after a failure, back off and resume from the
        checkpoint (a transient store failure is logged as a warning, anything else with its
        traceback); only ``KeyboardInterrupt`` ends the thread early."""
        backoff = 0.1
        while not self.context.stop.is_set():
            try:
                self.consume()
                backoff = 0.1
            except (LeaseLost, LeaseNotHeld) as exc:
                self.share.lease_gone(exc)
            except BaseException as exc:
                failure = classify(exc, handling_input=False)
                if failure is Failure.INTERRUPT:
                    raise
                if self.context.stop.is_set():
                    break
                self.recover(exc, failure, backoff)
                backoff = min(backoff * 2, 5.0)
        self.engine_log.info(
            "%s stopped at position %s",
            self.name,
            self.committed,
            extra={"position": self.committed},
        )

    def recover(self, exc: BaseException, failure: Failure, backoff: float) -> None:
        """Count and log ``exc``, then wait ``backoff`` seconds (a stop interrupts the wait)."""
        self.errors.append(exc)
        if failure is Failure.RETRY:
            self.engine_log.warning(
                "%s: the store is unavailable (%s); retrying from its checkpoint in %.1fs",
                self.name,
                describe(exc),
                backoff,
                extra={"position": self.committed},
            )
        else:
            self.engine_log.error(
                "%s failed; resuming from its checkpoint in %.1fs",
                self.name,
                backoff,
                exc_info=exc,
                extra={"position": self.committed},
            )
        self.context.stop.wait(backoff)

    def consume(self) -> None:
        """One subscription's life: from the checkpoint until stopped (in a group: until what
        this process holds changes)."""
        if self.context.group is not None and not self.share.await_leases():
            return
        self.committed = self.share.start_position()
        self.starting()
        subscription = self.context.store.subscribe(self.committed, self.filter)
        with self._lock:
            self._subscription = subscription
        # A stop() that came before the subscription existed found nothing to end.
        if self.context.stop.is_set() or self.halted() or self.share.moved():
            subscription.stop()
        self.engine_log.info(
            "%s starting after position %s",
            self.name,
            self.committed,
            extra={"position": self.committed},
        )
        try:
            while not self.context.stop.is_set():
                timeout = self.poll_timeout()
                item = subscription.poll(timeout)
                if item is None:
                    if timeout is None or subscription.stopped:
                        return
                    self.tick()
                    continue
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

    # -- in a group ---------------------------------------------------------------------------

    def partition_key(self, event: RecordedEvent) -> str:
        """The stream whose partition ``event`` belongs to (by default its own stream)."""
        return event.stream

    def on_leases_changed(self) -> None:  # noqa: B027 (a hook: most policies keep no state)
        """In a group, before resubscribing after what this process holds changed: forget what
        was learnt of partitions that may have moved (caches)."""

    def holds_work(self) -> bool:
        """Whether this process has work of this processor to do: always, unless in a group
        where it holds none of the app's partitions."""
        return self.share.holds_work()

    def commit_share(self, events: Sequence[RecordedEvent], position: int) -> None:
        """Handle ``events`` of one partition (``[]``: none) and commit what they lead to with
        the partition's checkpoint at ``position`` (the share in hand gives name and lease)."""
        if not events:
            self.commit(Outcome(position=position))
            return
        outcome = self.handle(events)
        if outcome.position is not None:
            outcome.position = position
        self.commit_outcome(outcome, events)

    def commit_together(self, events: Sequence[RecordedEvent], position: int) -> bool:
        """Handle ``events`` of several partitions and commit what they lead to in one
        transaction, with every partition's checkpoint at ``position`` under its lease (the
        share's joint fence in hand); whether it did. ``False``, with nothing written, where
        the store has no such transaction, or the commit failed a revision check or was
        rejected: the caller then commits partition by partition (which redoes what failed).
        """
        if not self._joint:
            return False
        outcome = self.handle(events) if events else Outcome(position=position)
        if outcome.position is not None:
            outcome.position = position
        try:
            self.commit(outcome)
        except WrongExpectedVersion as exc:
            self.conflicts += 1
            self.resync(exc.stream)
            return False
        except PERMANENT:
            return False
        return True

    def starting(self) -> None:  # noqa: B027 (a hook: most policies keep no state)
        """A subscription life starts, after the checkpoints of the work it does were loaded
        (:attr:`share`): load what else the policy keeps beside them."""

    def halted(self) -> bool:
        """Whether this subscription's life must end now, although the service goes on."""
        return False

    def on_caught_up(self, item: CaughtUp) -> None:
        """Note (and log) that history is done and what follows is live."""
        if not self.caught_up:
            self.caught_up = True
            self.engine_log.info(
                "%s caught up at position %s",
                self.name,
                item.position,
                extra={"position": item.position},
            )

    def idle_position(self) -> int | None:
        """The position up to which this processor has nothing left to do."""
        return self.committed

    def poll_timeout(self) -> float | None:
        """How long to wait for the next input before :meth:`tick` (``None``: until one comes)."""
        return None

    def tick(self) -> None:  # noqa: B027 (a hook: most processors wait for inputs only)
        """Called when no input came within :meth:`poll_timeout`: commit work concluded since
        (a policy whose work concludes off the processor's thread)."""

    def has_due_work(self) -> bool:
        """Whether work is in hand that does not show in the store (a due timer)."""
        return False

    # -- the policy -------------------------------------------------------------------------

    @abc.abstractmethod
    def handle(self, batch: Sequence[RecordedEvent]) -> Outcome:
        """Decide what ``batch`` leads to, writing nothing: the policy of a processor."""

    def redo_units(self, batch: Sequence[RecordedEvent], outcome: Outcome) -> list[Unit]:
        """After ``outcome`` of ``batch`` failed to commit: the units to redo, one by one.

        By default each input on its own, decided again (after :meth:`resync`).
        """
        return [(event, lambda event=event: self.handle([event])) for event in batch]  # type: ignore[misc]

    def keep_stored(self, outcome: Outcome) -> Outcome:
        """``outcome`` without the appends that would create a stream that exists already:
        for a policy whose writes must not be redone (a handler is not asked twice)."""
        return Outcome(
            [item for item in outcome.appends if not self._stored(item)],
            outcome.position,
            outcome.on_commit,
        )

    def _stored(self, item: StreamAppend) -> bool:
        if item.expected_revision is not NO_STREAM:
            return False  # derived ids under ANY: a second write of them is idempotent
        if not self.context.store.read_stream(item.stream, 0, 1):
            return False
        self.engine_log.warning(
            "%s keeps what is stored in %s", self.name, item.stream, extra={"stream": item.stream}
        )
        return True

    def resync(self, stream: str) -> None:  # noqa: B027 (a hook: most policies keep no state)
        """After a revision conflict on ``stream``: bring what is known of it up to date."""

    def step(
        self, event: RecordedEvent, outcome: Outcome, handle: Callable[[RecordedEvent], object]
    ) -> object:
        """``handle(event)``; if the input cannot be handled, add its skip record to ``outcome``
        instead (and return ``None``).

        The failure is classified in one place: data and user-code failures are a skip, a
        transient store failure or anything unexpected propagates (the batch is retried).
        """
        with telemetry.input_span(self.name, event):
            try:
                return handle(event)
            except Skip as skip:
                reason = skip.reason
            except BaseException as exc:
                if classify(exc, handling_input=True) is not Failure.SKIP:
                    raise
                reason = describe(exc)
            outcome.appends.append(self.skip(event, reason))
        return None

    # -- the engine -------------------------------------------------------------------------

    def process(self, batch: Sequence[RecordedEvent]) -> None:
        """Handle ``batch`` and commit what it leads to with the checkpoint past it.

        If the commit fails a revision check (another writer) or the store rejects it for good,
        the batch is redone unit by unit (:meth:`redo_units`), each in the conflict loop. In a
        group, only the inputs of the partitions held are handled, partition by partition.
        """
        if self.share.owned is not None:
            self.share.process(batch)
            return
        self.commit_outcome(self.handle(batch), batch)

    def commit_outcome(self, outcome: Outcome, batch: Sequence[RecordedEvent]) -> None:
        """Commit ``outcome`` of ``batch``; after a conflict or a permanent rejection, redo the
        batch unit by unit (:meth:`redo_units`), each in the conflict loop."""
        try:
            self.commit(outcome)
            return
        except WrongExpectedVersion as exc:
            self.conflicts += 1
            self.engine_log.info(
                "%s: %s; redoing the batch unit by unit",
                self.name,
                exc,
                extra={"stream": exc.stream, "conflict": True},
            )
            self.resync(exc.stream)
        except PERMANENT as exc:
            self.engine_log.warning(
                "%s: the store rejected the batch (%s); redoing it unit by unit",
                self.name,
                describe(exc),
            )
        for source, unit in self.redo_units(batch, outcome):
            self.commit_retrying(source, unit)

    def commit_retrying(self, source: RecordedEvent | None, unit: Callable[[], Outcome]) -> None:
        """Commit what ``unit()`` returns; on a revision conflict resync, wait a random moment
        (jitter) and redo it, at most :data:`MAX_CONFLICT_RETRIES` times.

        A permanent store rejection of what ``source`` led to skips ``source``. Raises
        :class:`~decider.processors.errors.ConflictsExhausted` naming the stream that kept
        conflicting.
        """
        conflict: WrongExpectedVersion | None = None
        for attempt in range(1, MAX_CONFLICT_RETRIES + 1):
            outcome = unit()
            try:
                self.commit(outcome)
                return
            except WrongExpectedVersion as exc:
                conflict = exc
                self.conflicts += 1
                self.engine_log.info(
                    "%s: %s (attempt %d)",
                    self.name,
                    exc,
                    attempt,
                    extra={"stream": exc.stream, "conflict": True, "attempt": attempt},
                )
                self.resync(exc.stream)
                # Jitter, so competing writers do not collide again in lockstep.
                self.context.stop.wait(self._random.uniform(0, 0.002 * 2**attempt))
            except PERMANENT as exc:
                if source is None:
                    raise
                reason = f"the store rejected what it led to: {describe(exc)}"
                self.commit(Outcome([self.skip(source, reason)], source.position))
                return
        assert conflict is not None
        raise ConflictsExhausted(conflict.stream, MAX_CONFLICT_RETRIES)

    def commit(self, outcome: Outcome) -> None:
        """Write ``outcome``'s appends and checkpoint: one transaction where possible.

        A transient store failure (:class:`~decider.stores.errors.StoreUnavailable`) is counted,
        logged and the same write retried with back-off (0.1 s doubling to 5 s) until it
        succeeds or the service stops: what was decided (a handler's results) is kept, not
        decided again. Raises :class:`~decider.stores.errors.WrongExpectedVersion` if an
        append's check fails (on a transactional store nothing is written then).
        """
        backoff = 0.1
        while True:
            try:
                with telemetry.commit_span(self.name, len(outcome.appends), outcome.position):
                    self._write(outcome)
                return
            except StoreUnavailable as exc:
                if self.context.stop.is_set():
                    raise
                self.errors.append(exc)
                self.engine_log.warning(
                    "%s: the store is unavailable (%s); retrying the commit in %.1fs",
                    self.name,
                    describe(exc),
                    backoff,
                )
                if self.context.stop.wait(backoff):
                    raise
                backoff = min(backoff * 2, 5.0)

    def _write(self, outcome: Outcome) -> None:
        store = self.context.store
        appends, position = outcome.appends, outcome.position
        joint = self.share.joint_fence()
        if joint:
            # Several partitions' work in one transaction, each checkpoint under its lease.
            checkpoints = [] if position is None else [(name, position) for name, _ in joint]
            checkpoints += outcome.checkpoints
            leases = [lease for _, lease in joint]
            cast(TransactionalStore, store).append_batch(
                appends, checkpoints=checkpoints, leases=leases
            )
            self._written(outcome)
            return
        try:
            name, lease = self.share.commit_fence()
        except LeaseNotHeld:
            if appends:
                raise
            return  # a checkpoint only: the member that holds the lease keeps it
        if (appends or lease is not None) and self._transactional:
            # Checked once, in __init__: isinstance with a Protocol costs microseconds per input.
            batches = cast(TransactionalStore, store)
            checkpoint = None if position is None else (name, position)
            if lease is None:
                batches.append_batch(appends, checkpoint)
            else:
                batches.append_batch(appends, checkpoint, lease=lease)
        else:
            if len(appends) > 1 and self._pipelined:
                assert isinstance(store, PipelinedStore)
                store.append_each(appends)  # one round trip; the checkpoint after all of them
            else:
                for item in appends:
                    store.append(item.stream, item.events, item.expected_revision)
            if position is not None and position != self.committed:
                self.context.checkpoints.save_checkpoint(name, position)
        self._written(outcome)

    def _written(self, outcome: Outcome) -> None:
        if outcome.position is not None:
            self.committed = outcome.position
        for done in outcome.on_commit:
            done()

    def skip(self, event: RecordedEvent, reason: str) -> StreamAppend:
        """Record that ``event`` is skipped (poison), as an append for the batch's commit."""
        shown_type = _printable(event.type, 200)
        shown_reason = _printable(reason, 1000)
        self.engine_log.warning(
            "%s skips %s at %s@%d: %s",
            self.name,
            shown_type,
            _printable(event.stream, 200),
            event.revision,
            shown_reason,
            extra={
                "stream": _printable(event.stream, 200),
                "position": event.position,
                "event_type": shown_type,
                "event_id": str(event.id),
            },
        )
        self.skipped += 1
        stream = streams.skipped_stream(self.name)
        record = InputSkipped(
            processor=self.name,
            reason=shown_reason,
            stream=_printable(event.stream, 1000),
            revision=event.revision,
            position=event.position,
            event_type=shown_type,
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
        metadata = telemetry.inject(
            Metadata(
                message_id=str(new_id),
                correlation_id=correlation_id,
                causation_id=causation_id if causation_id is not None else cause,
            )
        )
        type_name, data, encoded = codec.encode_envelope(Envelope(message, metadata))
        return NewEvent(new_id, type_name, data, encoded)

    def copied(
        self, stream: str, cause: str, type_name: str, data: bytes, correlation_id: str | None
    ) -> NewEvent:
        """A stored message copied byte for byte to ``stream``, with an id derived from
        ``stream`` and ``cause`` (also its causation id)."""
        new_id = event_id(stream, cause, 0)
        metadata = telemetry.inject(
            Metadata(message_id=str(new_id), correlation_id=correlation_id, causation_id=cause)
        )
        return NewEvent(new_id, type_name, data, self.context.app.codec.encode_metadata(metadata))


def _printable(text: str, limit: int) -> str:
    """``text`` as valid UTF-8 (a lone surrogate escaped), at most ``limit`` characters."""
    safe = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return safe if len(safe) <= limit else safe[: limit - 1] + "…"
