"""The processor engine: the drain-a-batch loop, the thread's life, failures and partitions.

A processor is a catch-up subscription from its stored checkpoint. It drains what is ready into
a batch (up to ``batch_size``), and hands the batch to its policy (:meth:`Processor.handle`),
which decides and returns an :class:`Outcome`: the appends and the checkpoint to commit. The
engine owns everything after that; this module:

- the thread and the drain-a-batch loop (:meth:`Processor.run`, :meth:`Processor.consume`);
- the classification of failures (:mod:`decider.processors.engine.failures`): skip, retry with
  back-off, or resume from the checkpoint; never the end of the thread;
- in a group of processes (:class:`~decider.processors.group.membership.PartitionGroup`): every
  processor handles only the work of the partitions this process holds
  (:mod:`decider.processors.engine.sharing`), each partition with its own checkpoint, and commits
  each partition's work under its lease (fencing). A commit that finds its lease lost writes
  nothing; the processor drops the lease and resumes from the checkpoints of what it still
  holds.

Committing what the policy returns is the commit engine's
(:mod:`decider.processors.engine.committing`, the base class of :class:`Processor`): how a batch
is written on the store, several partitions' work together, the back-off on an unavailable
store, the conflict loop and the skip records. :class:`Context` (what a processor runs with)
comes from :mod:`decider.processors.engine.context`; it, :class:`Outcome` and :class:`Unit` are
imported from here too.
"""

from __future__ import annotations

import abc
import logging
import threading
import time
from collections.abc import Callable, Sequence

from decider.codec import describe
from decider.processors.engine import logs, telemetry
from decider.processors.engine.committing import (
    MAX_CONFLICT_RETRIES,
    Backoff,
    Committing,
    Outcome,
    Unit,
)
from decider.processors.engine.context import Context
from decider.processors.engine.failures import (
    ErrorLog,
    Failure,
    classify,
    user_exception,
)
from decider.processors.engine.sharing import IDLE_CHECKPOINT_EVERY, LeaseNotHeld, Share
from decider.stores import LeaseLost
from decider.stores.protocol import CaughtUp, Filter, RecordedEvent, Subscription
from decider.stores.subscription import CatchUpSubscription

__all__ = [
    "ERRORS_KEPT",
    "LOGGER",
    "MAX_CONFLICT_RETRIES",
    "Context",
    "Outcome",
    "Processor",
    "Skip",
    "Unit",
]

ERRORS_KEPT = 100
"""How many of a processor's unexpected errors are kept (the rest are only counted)."""

LOGGER = logging.getLogger("decider")
"""The root of the package's loggers: each module logs to its own child
(``decider.processors.<module>``), so a level set here governs them all."""


class Skip(Exception):
    """Raised by a policy for an input it cannot handle; the reason is recorded."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class Processor(Committing):
    """A named catch-up subscription whose policy handles batches; the engine commits them.

    Subclasses set :attr:`name` and :attr:`filter` and implement :meth:`handle` (the policy);
    they may override :meth:`redo_units` and :meth:`resync` (what to do after a conflict).
    :meth:`run` is the thread body: it resumes from the checkpoint after any failure
    (classified by :func:`~decider.processors.engine.failures.classify`), so neither an input, nor
    user code, nor a passing outage ends the thread.
    """

    name: str
    filter: Filter
    sole_partition: int | None = None
    """In a group: the one partition all of this processor's work belongs to (``None``: each
    input's own)."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self.caught_up = False
        self.delivered = 0
        """How many events this processor's subscriptions delivered (its share of the log
        read, before its own filtering by partition): ``decider.processor.delivered``."""
        self.errors = ErrorLog(ERRORS_KEPT)
        self._subscription: Subscription | None = None
        self._lock = threading.Lock()
        self.share = Share(self)
        """This processor's share of its group's work (all of it without a group)."""
        self._reading: Filter | None = None
        self.traced = False
        """Whether the input in hand has a span (:meth:`step` sets it): a policy annotates
        the span only then (:func:`~decider.processors.engine.telemetry.annotate`)."""

    @property
    def log(self) -> logs.ContextAdapter:
        """The policy's logger: its module's (``decider.processors.<module>``, or the one
        logger the service was given); every record carries ``processor=<name>``."""
        return self._logger(type(self).__module__)

    @property
    def engine_log(self) -> logs.ContextAdapter:
        """The engine's logger (``decider.processors.engine.base``), with ``processor=<name>``."""
        return self._logger(__name__)

    def _logger(self, module: str) -> logs.ContextAdapter:
        logger = self.context.logger or logging.getLogger(module)
        return logs.with_context(logger, processor=self.name)

    # -- the thread -------------------------------------------------------------------------

    def run(self) -> None:
        """Consume until the service stops; after a failure, back off and resume from the
        checkpoint (a transient store failure is logged as a warning, anything else with its
        traceback; the commit engine's back-off); only ``KeyboardInterrupt`` ends the thread
        early."""
        backoff = Backoff(self.context.stop)
        while not self.context.stop.is_set():
            try:
                self.consume()
                backoff.reset()
            except BaseException as exc:
                stopping = self.context.stop.is_set()
                failure = classify(exc, handling_input=False, stopping=stopping)
                if failure is Failure.INTERRUPT:
                    raise
                if failure is Failure.LET_GO:
                    assert isinstance(exc, LeaseLost | LeaseNotHeld)
                    self.share.lease_gone(exc)
                    continue
                if failure is Failure.STOP:
                    break
                self.recover(exc, failure, backoff)
        self.engine_log.info(
            "%s stopped at position %s",
            self.name,
            self.committed,
            extra={"position": self.committed},
        )

    def recover(self, exc: BaseException, failure: Failure, backoff: Backoff) -> None:
        """Count and log ``exc``, then wait out ``backoff`` (a stop interrupts the wait)."""
        if failure is Failure.RETRY:
            self.back_off(exc, backoff, "from its checkpoint")
            return
        self.errors.append(exc)
        self.engine_log.error(
            "%s failed; resuming from its checkpoint in %.1fs",
            self.name,
            backoff.delay,
            exc_info=exc,
            extra={"position": self.committed},
        )
        backoff.wait()

    def consume(self) -> None:
        """One subscription's life: from the checkpoint until stopped (in a group: until what
        this process holds changes)."""
        if self.context.group is not None and not self.share.await_leases():
            return
        self.committed = self.share.start_position()
        self.starting()
        self._reading = self.read_filter()
        subscription = self.context.store.subscribe(self.committed, self._reading)
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
                waited = time.monotonic()
                item = subscription.poll(timeout)
                if item is None:
                    if subscription.stopped:
                        return
                    self.tick()  # timed out, or woken (:meth:`wake`) for work of its own
                    if timeout is not None and time.monotonic() - waited >= timeout:
                        self._idle_look(subscription)
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
                    self.delivered += len(batch)
                    self.process(batch)
                self.drained()
                self.context.progress()
        finally:
            subscription.stop()

    def _idle_look(self, subscription: Subscription) -> None:
        """In a group, after a wait of :meth:`poll_timeout` (about a second) that found
        nothing: the partitions held whose checkpoints are short of what the subscription
        delivered up to (other partitions' events passed over, the log's head) move on to it
        (:meth:`reached`); and the subscription looks at the log again (its next wait that
        finds nothing has passed over what was written meanwhile), with no read where its store
        says every row up to the head was announced to it
        (:meth:`~decider.stores.subscription.CatchUpSubscription.look_again`): a processor that
        is sent nothing does not walk the rows the other processes wrote. A subscription that
        does not say what it delivered up to (EventStoreDB's) moves them with the batches
        only."""
        if self.share.owned is None or not isinstance(subscription, CatchUpSubscription):
            return
        position = subscription.delivered_to
        if position is not None and self.share.behind(position):
            self.reached(position)
        subscription.look_again()

    def stop(self) -> None:
        """Wake the thread so it finishes the batch in hand and returns (stop signal set first)."""
        with self._lock:
            if self._subscription is not None:
                self._subscription.stop()

    def wake(self) -> None:
        """Make the thread's wait for input return at once (or its next wait, if it is busy)
        and call :meth:`tick`: work that concluded off the thread is ready to commit. Safe from
        any thread; a policy whose work concludes elsewhere calls it instead of polling."""
        subscription = self._subscription
        if subscription is not None:
            subscription.wake()

    def read_filter(self) -> Filter:
        """The filter of the subscription's life now starting: :attr:`filter`, in a group of
        the partitions held only (:meth:`~decider.processors.engine.sharing.Share.read_filter`)."""
        return self.share.read_filter(self.filter)

    @property
    def reading(self) -> Filter:
        """What this subscription's life reads: :attr:`filter`, in a group only of the
        partitions held (:meth:`~decider.processors.engine.sharing.Share.read_filter`)."""
        return self.filter if self._reading is None else self._reading

    # -- in a group ---------------------------------------------------------------------------

    def partition_key(self, event: RecordedEvent) -> str:
        """The stream whose partition ``event`` belongs to (by default its own stream)."""
        return event.stream

    def on_leases_changed(self) -> None:  # a hook: most policies keep no state
        """In a group, before resubscribing after what this process holds changed: forget what
        was learnt of partitions that may have moved (caches)."""

    def holds_work(self) -> bool:
        """Whether this process has work of this processor to do: always, unless in a group
        where it holds none of the app's partitions."""
        return self.share.holds_work()

    def starting(self) -> None:  # a hook: most policies keep no state
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
        """How long to wait for the next input before :meth:`tick` (``None``: until one comes,
        or :meth:`wake`); in a group, about a second, so the checkpoints of the partitions held
        follow the log while none of their events come (:meth:`reached`)."""
        return None if self.share.owned is None else IDLE_CHECKPOINT_EVERY

    def reached(self, position: int) -> None:
        """In a group: every event of the partitions held up to ``position`` was delivered and
        handled, and a held partition's checkpoint is short of it. Move those checkpoints on
        to ``position`` (about once a second: :meth:`~decider.processors.engine.sharing.Share.
        idle_due`), so a partition without events of its own follows the log's head, not only
        the batches of the other partitions held. A checkpoint only moves on."""
        share = self.share
        if share.owned is None or not share.idle_due():
            return
        due = share.short_of(position)

        def alone(key: int) -> None:
            self.commit_outcome(Outcome(position=position), [])

        for key in self.commit_partitions(due, lambda: Outcome(position=position), alone):
            share.committed_to(key, position)
        marks = [share.mark(key) for key in share.owned]
        if marks and all(mark is not None and mark >= position for mark in marks):
            self.committed = position

    def tick(self) -> None:  # a hook: most processors wait for inputs only
        """Called when no input came within :meth:`poll_timeout`, or after :meth:`wake`: commit
        work concluded since (a policy whose work concludes off the processor's thread)."""

    def drained(self) -> None:  # a hook: most processors wait for inputs only
        """Called after each batch was drained from the subscription (and processed): the
        drain's last poll may have taken a :meth:`wake` (it returns ``None`` then too), so the
        work it announced must be committed now, not at the next input."""

    def has_due_work(self) -> bool:
        """Whether work is in hand that does not show in the store (a due timer)."""
        return False

    # -- the policy -------------------------------------------------------------------------

    @abc.abstractmethod
    def handle(self, batch: Sequence[RecordedEvent]) -> Outcome:
        """Decide what ``batch`` leads to, writing nothing: the policy of a processor."""

    def step(
        self, event: RecordedEvent, outcome: Outcome, handle: Callable[[RecordedEvent], object]
    ) -> object:
        """``handle(event)``; if the input cannot be handled, add its skip record to ``outcome``
        instead (and return ``None``).

        The failure is classified in one place: data and user-code failures are a skip, a
        transient store failure or anything unexpected propagates (the batch is retried).
        While ``handle`` runs, :attr:`traced` says whether the input has a span.
        """
        span = telemetry.input_span(self.name, event)
        self.traced = span is not None
        if span is None:  # nothing traces: no context manager entered and left per input
            try:
                return handle(event)
            except BaseException as exc:
                self._not_handled(event, outcome, exc)
                return None
        with span:
            try:
                return handle(event)
            except BaseException as exc:
                self._not_handled(event, outcome, exc)
                return None

    def _not_handled(self, event: RecordedEvent, outcome: Outcome, exc: BaseException) -> None:
        """``step``'s failure: ``exc`` propagates unless it is a skip (its record added to
        ``outcome``)."""
        cause: BaseException | None
        if isinstance(exc, Skip):
            reason, cause = exc.reason, exc.__cause__
        else:
            if classify(exc, handling_input=True) is not Failure.SKIP:
                raise exc
            reason, cause = describe(exc), exc
        if cause is not None:
            telemetry.record_exception(user_exception(cause), reason)
        outcome.appends.append(self.skip(event, reason, cause))

    # -- the engine -------------------------------------------------------------------------

    def process(self, batch: Sequence[RecordedEvent]) -> None:
        """Handle ``batch`` and commit what it leads to with the checkpoint past it.

        If the commit fails a revision check (another writer) or the store rejects it for good,
        the batch is redone unit by unit (:meth:`redo_units`), each in the conflict loop. In a
        group, only the inputs of the partitions held are handled, and every partition's work
        is committed together where the store can, else partition by partition
        (:meth:`~decider.processors.engine.committing.Committing.commit_partitions`).
        """
        if self.share.owned is None:
            self.commit_outcome(self.handle(batch), batch)
            return
        end = batch[-1].position
        work, due = self.share.due_work(batch)

        def together() -> Outcome:  # one handling of every partition's inputs, in log order
            events = sorted((e for key in due for e in work.get(key, [])), key=_position)
            return self._decided(events, end)

        def alone(key: int) -> None:
            events = work.get(key, [])
            self.commit_outcome(self._decided(events, end), events)

        for key in self.commit_partitions(due, together, alone):
            self.share.committed_to(key, end)
        self.committed = end

    def _decided(self, events: Sequence[RecordedEvent], end: int) -> Outcome:
        """What ``events`` (of the partitions in hand; ``[]``: none) lead to, with the
        checkpoint at ``end``."""
        if not events:
            return Outcome(position=end)
        outcome = self.handle(events)
        if outcome.position is not None:
            outcome.position = end
        return outcome


def _position(event: RecordedEvent) -> int:
    return event.position
