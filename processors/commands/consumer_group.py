"""The command processor as one consumer of an EventStoreDB/KurrentDB consumer group.

``decider run APP --store esdb://... --esdb-consumer-group [NAME]`` (``Service(...,
consumer_group=NAME)``) replaces the command processor's catch-up subscription and checkpoint
by a persistent subscription to ``$all`` (:mod:`decider.stores.consumer_groups`): the server
hands each command to one of the group's connected processes, so handlers run in competing
processes, and redelivers what a process does not answer in time (it died, or hung).
Everything else is the command processor's (:class:`CommandProcessor`): the filter, the pool,
the handler call with the command id as idempotency key, the failure classification, the
results streams, the parked ledger.

Each delivery is answered once its outcome is stored:

- **ack** when it concluded: results written, or routed/published/replied copies, or skipped
  (a skip record), or found concluded before (its results stream exists: a redelivery);
- **nack retry** on a retryable failure while the handler's
  :class:`~decider.processors.app.retry.RetryPolicy` has attempts left: the delivery is held for
  the policy's back-off (at most half the message timeout), then the server sends it again, to
  any consumer (``retry_count`` + 1 is the attempt number);
- **nack park** when the command is parked (a permanent failure, the last attempt failed, or no
  handler): the park record goes to the app's ledger first (``decider parked`` and
  ``decider retry`` see it, the workflow gets ``decider.CommandFailed``), then the server
  parks the delivery in the group's parked stream.

``decider retry`` writes a ``decider.ParkedCommandRetried`` request to the ledger, as on every
store; the request is one of the group's events, so a consumer of the group carries the command
out again. The server's ``ReplayParked`` is not used for it: it replays *every* parked event of
the group (or the oldest N), not one command. A parked event the server replays anyway (an
operator's "replay parked messages") is reconciled with the ledger: if the ledger shows the
command parked, the consumer writes the retry request that ``decider retry`` would write (the
same derived id, so both together make one request) and acks; otherwise the command concluded
or its retry is queued already, and the delivery is acked untouched.

A delivery whose ``retry_count`` is above 0 may have concluded before its answer was lost:
if its results stream exists it is acked without calling the handler; if the ledger holds its
park record, it is parked again.

WARNING: the server keeps no order between consumers, and sends a retried command after later
ones: the commands of one instance run in order only while the same process holds them (the
default strategy, ``Pinned``, sends one instance's commands to one consumer while the set of
consumers stays the same).
The server parks on its own a delivery that timed out (or whose consumer went away) more than
``max_retry_count`` times; a consumer joining the group parks such commands in the ledger too
(:mod:`decider.processors.commands.group_ledger`).

WARNING: after a server restart the commands answered since the group's last checkpoint come
again with ``retry_count`` 0: their handlers are called again (same idempotency key; the stored
results are kept).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, assert_never

import attrs

from decider import Metadata
from decider.processors.app import decoding, streams
from decider.processors.app.definition import AppDefinition, HandlerRegistration
from decider.processors.app.messages import PARKED, RETRIED
from decider.processors.commands import group_ledger
from decider.processors.commands.handlers import AttemptFailed
from decider.processors.commands.pool import Conclusion, Job
from decider.processors.commands.processor import _SUBMITTED, CommandProcessor
from decider.processors.commands.replay import concluded_mark_name
from decider.processors.engine import failures
from decider.processors.engine.base import Context, Outcome
from decider.processors.engine.failures import Verdict
from decider.stores.consumer_groups import (
    ConsumerGroup,
    ConsumerGroupStore,
    Delivery,
    GroupReader,
    GroupSettings,
    Nack,
)
from decider.stores.errors import StoreError, StoreUnavailable
from decider.stores.protocol import RecordedEvent, StreamAppend


@attrs.define(eq=False)
class InHand:
    """A delivery being carried out, then its outcome waiting to be stored and answered."""

    delivery: Delivery
    appends: list[StreamAppend] = attrs.Factory(list)
    verdict: Nack | None = None
    """``None``: ack; else the nack to send."""
    due: float = 0.0
    """When the answer may go (monotonic): a retry waits for the handler's back-off."""


def check_consumer_group(store: object, partitions: object | None) -> None:
    """Raise ``ValueError`` (with what to do) unless a consumer group can run on ``store``:
    an EventStoreDB/KurrentDB store, and no partition group (the server shares the
    commands out; partitions would share them again)."""
    if not isinstance(store, ConsumerGroupStore):
        raise ValueError(
            f"a consumer group needs an EventStoreDB/KurrentDB store (esdb://, kurrentdb://, "
            f"kdb://); {type(store).__name__} has none: leave --esdb-consumer-group out"
        )
    if partitions is not None:
        raise ValueError(
            "--esdb-consumer-group and --partitions auto cannot be combined: the consumer "
            "group already shares the commands between processes"
        )


def default_settings(context: Context) -> GroupSettings:
    """The settings a new group gets: strategy ``Pinned``; a message timeout of 30 s or twice
    the longest handler timeout; the server's own parking well past every retry policy."""
    handlers = context.app.handlers.values()
    attempts = max((h.retry.max_attempts for h in handlers), default=1)
    longest = max((h.timeout or 0.0 for h in handlers), default=0.0)
    return GroupSettings(
        consumer_strategy="Pinned",
        message_timeout=max(30.0, 2 * longest),
        max_retry_count=max(10, 2 * attempts),
    )


def command_group(
    store: ConsumerGroupStore, app: AppDefinition, name: str | None = None
) -> ConsumerGroup:
    """The consumer group ``name`` (default: the command processor's name) over ``app``'s
    commands, as the command processor joins it; ``ensure`` it with chosen settings before the
    first process starts to run it with those (an existing group keeps its own)."""
    ledger = streams.parked_stream(app.name)
    group = name or streams.command_processor_name(app.name)
    return store.consumer_group(group, decoding.command_filter(app.workflows, ledger, RETRIED))


class ConsumerGroupCommandProcessor(CommandProcessor):
    """The command processor fed by a consumer group instead of a catch-up subscription."""

    def __init__(
        self,
        context: Context,
        group: str | None = None,
        *,
        settings: GroupSettings | None = None,
        buffer_size: int | None = None,
    ) -> None:
        super().__init__(context)
        store = context.store
        check_consumer_group(store, context.group)
        assert isinstance(store, ConsumerGroupStore)
        self.group = command_group(store, context.app, group)
        self.group_name = self.group.name
        self.settings = settings or default_settings(context)
        self.buffer_size = buffer_size or max(32, 8 * context.app.pool_size)
        """How many deliveries this process holds unanswered at once."""
        self.acked = 0
        """How many deliveries this process acknowledged."""
        self.nacked = 0
        """How many deliveries this process answered with a nack (retry or park)."""
        self.joined = threading.Event()
        """Set while this process is connected to the group."""
        self._reader: GroupReader | None = None
        self._answer_lock = threading.Lock()
        self._ready: list[tuple[float, int, InHand]] = []  # by due time
        self._tickets = itertools.count()
        self._open = 0

    # -- the thread -------------------------------------------------------------------------

    def consume(self) -> None:
        """One connection's life: join the group (creating it at the command processor's
        checkpoint if it is new), carry out what it delivers, answer each delivery."""
        self.pool.reset()
        start = self.context.checkpoints.load_checkpoint(self.name)
        if self.group.ensure(self.settings, start=start):
            self.log.info(
                "%s: created consumer group %r from position %s",
                self.name,
                self.group_name,
                start,
                extra={"position": start},
            )
        self._record_server_parks()
        reader = self.group.read(self.buffer_size)
        with self._lock:
            self._reader = reader
        self.joined.set()
        self.log.info("%s joined consumer group %r", self.name, self.group_name)
        try:
            while not self.context.stop.is_set():
                delivery = reader.poll(self._until_due())
                if delivery is None:
                    if reader.stopped:
                        return
                    self._answer_due()
                    continue
                batch = [delivery]
                while len(batch) < self.context.batch_size and (more := reader.poll(0)):
                    batch.append(more)
                self._take(batch)
                self._answer_due()
                self.context.progress()
        finally:
            self._leave(reader)

    def _leave(self, reader: GroupReader) -> None:
        """Let the calls in hand conclude (on a stop, up to :attr:`stop_grace`), store and
        answer what concluded, then disconnect: the server sends the rest to the others."""
        try:
            if self.context.stop.is_set():
                self.pool.pause()
                deadline = time.monotonic() + self.stop_grace
                self.pool.wait_calls(deadline, self._answer_due)
            self._answer_due(everything=True)
            self._save_group_checkpoint()
        except Exception as exc:  # unanswered deliveries come again
            self.log.warning("%s: could not answer on the way out: %r", self.name, exc)
        finally:
            self.joined.clear()
            reader.stop()
            with self._lock:
                self._reader = None
            self.pool.reset()
            with self._answer_lock:
                self._ready.clear()
                self._open = 0

    def _record_server_parks(self) -> None:
        """Park in the ledger the commands the server parked on its own (their deliveries
        timed out, or their consumers went away, ``max_retry_count`` times), so that
        ``decider parked`` and ``decider retry`` know them."""
        try:
            found = group_ledger.unrecorded_parks(self.context.app, self.context.store, self.group)
        except StoreUnavailable:
            raise
        except StoreError as exc:  # e.g. no right to read a $ stream on a secured node
            self.log.warning(
                "%s: cannot read the group's parked stream (%r); parks the server made on "
                "its own stay out of the ledger",
                self.name,
                exc,
            )
            return
        if not found:
            return
        attempts = self.group.info().max_retry_count + 1
        reason = (
            f"parked by the server after {attempts} deliveries without an answer (timed out, "
            "or the consumer went away)"
        )
        appends: list[StreamAppend] = []
        for event, handler, metadata in found:
            appends += self._park(event, handler.type_name, metadata, reason, attempts, "")
        self.commit(Outcome(appends))

    def _save_group_checkpoint(self) -> None:
        """Keep the command processor's checkpoint at the group's (the server's low-water
        mark of answered commands), so a run without the group goes on from there; on a
        transactional store also its concluded mark at the last position the group has seen,
        so that run checks the commands in between for outcomes stored already
        (:mod:`decider.processors.commands.replay`)."""
        info = self.group.info()
        checkpoints = self.context.checkpoints
        if info.checkpoint is not None and info.checkpoint != self.committed:
            checkpoints.save_checkpoint(self.name, info.checkpoint)
            self.committed = info.checkpoint
        seen = info.last_known_position
        if self._transactional and seen is not None:
            mark = concluded_mark_name(self.name)
            known = checkpoints.load_checkpoint(mark)
            if known is None or seen > known:
                checkpoints.save_checkpoint(mark, seen)

    def stop(self) -> None:
        """Wake the thread; with nothing in hand, disconnect at once."""
        with self._lock:
            reader = self._reader
        if reader is None:
            return
        if self._open:
            reader.wake()  # it answers what concluded, then leaves
        else:
            reader.stop()

    def _until_due(self) -> float | None:
        """How long the thread may wait for a delivery: until the first answer held back by a
        retry's back-off is due (``None``: until a delivery, a conclusion or a stop wakes it)."""
        with self._answer_lock:
            if not self._ready:
                return None
            return max(0.0, self._ready[0][0] - time.monotonic())

    # -- idleness -------------------------------------------------------------------------

    def has_due_work(self) -> bool:
        """Whether deliveries are in hand here, or the server holds some unanswered or
        waiting for a retry (this or another consumer's)."""
        if self._open:
            return True
        try:
            info = self.group.info()
        except StoreError:  # no group yet (or the server is away): not idle
            return True
        return info.in_flight + info.retry_buffer > 0

    def idle_position(self) -> int | None:
        """The last position the group has seen: with nothing in hand anywhere (see
        :meth:`has_due_work`), every command up to it is answered."""
        try:
            return self.group.info().last_known_position
        except StoreError:
            return None

    # -- deliveries -------------------------------------------------------------------------

    def _take(self, batch: Sequence[Delivery]) -> None:
        for delivery in batch:
            hand = InHand(delivery)
            with self._answer_lock:
                self._open += 1
            draft = Outcome()
            started = self.step(
                delivery.event, draft, functools.partial(self._deliver, hand=hand, draft=draft)
            )
            if started is not _SUBMITTED:
                self._finish(hand, draft.appends, hand.verdict)

    def _deliver(self, event: RecordedEvent, hand: InHand, draft: Outcome) -> object:
        if hand.delivery.replayed:
            draft.appends.extend(
                group_ledger.retry_for_replay(self.context.app, self.context.store, event, self.log)
            )
            return None
        return self._carry_out(event, hand, draft)

    def _replayed_before(
        self, handler: HandlerRegistration, event: RecordedEvent, round_key: str
    ) -> bool:
        return False  # a redelivery is recognised in _submit (it knows the delivery)

    def _job(  # noqa: PLR0917
        self,
        entry: object,
        key: str,
        handler: HandlerRegistration,
        command: Any,
        command_id: str,
        conclude: Callable[[Conclusion], None],
    ) -> Job:
        assert isinstance(entry, InHand)
        return Job(
            key,
            handler,
            command,
            command_id,
            conclude,
            attempts=entry.delivery.retry_count,
            retry_here=False,
        )

    def _submit(  # noqa: PLR0917
        self,
        handler: HandlerRegistration,
        event: RecordedEvent,
        command_id: str,
        metadata: Metadata,
        round_key: str,
        entry: object,
    ) -> object:
        assert isinstance(entry, InHand)
        if entry.delivery.retry_count > 0:
            before = group_ledger.concluded_before(
                self.context.store, self.ledger, handler, str(event.id), round_key
            )
            verdict = failures.judge_redelivery(before)
            if verdict is not None:
                entry.verdict = answer(verdict)
                self.log.info(
                    "%s: %s %s was %s before; not carried out again",
                    self.name,
                    handler.type_name,
                    event.id,
                    before,
                    extra={"command_id": str(event.id), "event_type": handler.type_name},
                )
                return None
        return super()._submit(handler, event, command_id, metadata, round_key, entry)

    def _job_concluded(  # noqa: PLR0917
        self,
        entry: object,
        handler: HandlerRegistration,
        event: RecordedEvent,
        command_id: str,
        metadata: Metadata,
        round_key: str,
        conclusion: Conclusion,
    ) -> None:
        assert isinstance(entry, InHand)
        if isinstance(conclusion, AttemptFailed):  # the pool's verdict: redeliver
            policy = handler.retry
            delay = failures.backoff(
                policy, conclusion.attempts, at_most=self.settings.message_timeout / 2
            )
            self.log.warning(
                "%s: %s %s of %s failed (attempt %d of %d); the group retries it in %.3fs: %s",
                self.name,
                handler.type_name,
                event.id,
                event.stream,
                conclusion.attempts,
                policy.max_attempts,
                delay,
                conclusion.reason,
                extra={
                    "command_id": str(event.id),
                    "event_type": handler.type_name,
                    "stream": event.stream,
                    "attempt": conclusion.attempts,
                    "retry_in": delay,
                },
            )
            self._finish(entry, [], answer(Verdict.REDELIVER), delay)
            return
        appends = self._concluded(handler, event, command_id, metadata, round_key, conclusion)
        self._finish(entry, appends, None)

    # -- answering --------------------------------------------------------------------------

    def _finish(
        self,
        hand: InHand,
        appends: list[StreamAppend],
        verdict: Nack | None,
        delay: float = 0.0,
    ) -> None:
        """``hand`` concluded: store ``appends``, then answer (a park in the ledger is a
        park on the server too)."""
        if verdict is None and any(a.stream == self.ledger and _parks(a) for a in appends):
            verdict = answer(Verdict.PARK)
        hand.appends, hand.verdict = appends, verdict
        hand.due = time.monotonic() + delay
        with self._answer_lock:
            heapq.heappush(self._ready, (hand.due, next(self._tickets), hand))
        with self._lock:
            reader = self._reader
        if reader is not None:
            reader.wake()  # answer now (or set the timer for a held-back retry)

    def _answer_due(self, everything: bool = False) -> None:
        """Store the outcomes that are due (one commit), then answer their deliveries."""
        now = time.monotonic()
        with self._answer_lock:
            due: list[InHand] = []
            while self._ready and (everything or self._ready[0][0] <= now):
                due.append(heapq.heappop(self._ready)[2])
        if not due:
            return
        appends = [a for hand in due for a in hand.appends]
        try:
            if appends:
                self.commit_outcome(Outcome(appends), [h.delivery.event for h in due])
        except BaseException:
            with self._answer_lock:
                for hand in due:
                    heapq.heappush(self._ready, (hand.due, next(self._tickets), hand))
            raise
        with self._lock:
            reader = self._reader
        if reader is None:
            return
        for hand in due:
            if hand.verdict is None:
                reader.ack(hand.delivery)
                self.acked += 1
            else:
                reader.nack(hand.delivery, hand.verdict)
                self.nacked += 1
        with self._answer_lock:
            self._open -= len(due)
        self.context.progress()


def answer(verdict: Verdict) -> Nack | None:
    """How a delivery is answered on ``verdict``
    (:mod:`decider.processors.engine.failures`): ``None`` (an ack) when it is done, else the
    nack that carries the verdict out on the server.

    >>> answer(Verdict.DONE), answer(Verdict.REDELIVER), answer(Verdict.PARK)
    (None, <Nack.RETRY: 'retry'>, <Nack.PARK: 'park'>)
    """
    match verdict:
        case Verdict.DONE:
            return None
        case Verdict.REDELIVER | Verdict.RETRY:
            return Nack.RETRY
        case Verdict.PARK:
            return Nack.PARK
        case _:
            assert_never(verdict)


def _parks(item: StreamAppend) -> bool:
    return any(e.type == PARKED for e in item.events)
