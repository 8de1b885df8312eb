"""The command processor: carries out what workflows sent, published and replied.

It follows the ``Sent:``, ``Published:`` and ``Replied:`` events of the app's instance streams.

- ``Sent`` of a type with a handler: the command goes to the app's pool of workers
  (:mod:`decider.processors.commands.pool`): commands of one instance are carried out in the order
  they were sent, commands of different instances side by side; a quick sync handler's call runs
  on this processor's own thread, with no hand-off (:mod:`decider.processors.commands.pace`),
  while slow and ``async def`` ones run beside others. The handler runs with the command id
  as idempotency key; its result messages go to ``<handler name>-<command id>`` (expected
  ``NO_STREAM``, ids derived from the command id), so carrying a command out twice writes its
  results once. Failures are retried per the handler's
  :class:`~decider.processors.app.retry.RetryPolicy` (a call past its timeout is a failure); then
  the command is parked (:mod:`decider.processors.commands.parking`).
- ``Sent`` of a routed type: the message is appended to the target stream (derived id).
- ``Published``: to ``topic-<type>-<command id>``; ``Replied``: to ``reply-<causing message id>``.

Routed, published and replied messages are copied byte for byte: nothing is decoded.
A ``decider.ParkedCommandRetried`` in the app's ledger re-runs the parked command. A command
whose metadata says it ``reuses`` another (a fork's new generation decided it as the old one
did: :mod:`decider.processors.client.forking`) is not carried out: the old one's effect is its.

Outcomes are committed as commands conclude, with no linger: a conclusion on another thread
(a worker's, the event loop's) wakes the processor's thread, and one on that thread (a copy, a
park, a quick handler's call inline) is committed after its dispatch; the thread commits at
once everything that concluded while its previous commit was in flight (one outcome when
traffic is light, many under load), and the checkpoint is the low-water mark
(:mod:`decider.processors.commands.watermark`): it never passes a command still in hand. On a
:class:`~decider.stores.protocol.TransactionalStore` the outcomes and the checkpoint are one
transaction; outcomes committed past the mark are remembered (a second checkpoint, the
*concluded mark*), and the replay guard (:mod:`decider.processors.commands.replay`) keeps those
commands from being carried out again after a crash. This module is the policy only: which of those
a stored event leads to.

In a group of processes (:mod:`decider.processors.engine.sharing`), a command belongs to the
partition of the instance stream that recorded it (a retry request to that of the command it
retries): a process carries out the commands of the partitions it holds, and each partition
has its own watermark (:class:`~decider.processors.commands.watermark.Lanes`), checkpoint
(``<app>.commands.p<n>``) and concluded mark (``<app>.commands.p<n>.concluded``), all
committed under the partition's lease. Other partitions' commands are passed over by their
stream's name, without decoding them.
"""

from __future__ import annotations

import collections
import functools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from decider import Metadata
from decider.codec import Kind, describe, parse_type
from decider.processors.app import decoding, streams
from decider.processors.app.definition import HandlerRegistration
from decider.processors.app.messages import RETRIED
from decider.processors.commands import pace
from decider.processors.commands.handlers import AttemptFailed, GaveUp
from decider.processors.commands.parking import Parking
from decider.processors.commands.pool import CommandPool, Conclusion, HandlerLoad, Job
from decider.processors.commands.replay import ReplayGuard, concluded_mark_name
from decider.processors.commands.watermark import Entry, Lanes, Taken
from decider.processors.engine.base import Context, Outcome, Processor, Skip, Unit
from decider.processors.engine.sharing import ALL, IDLE_CHECKPOINT_EVERY
from decider.stores import Lease
from decider.stores.errors import CorruptEvent
from decider.stores.protocol import (
    ANY,
    NO_STREAM,
    CaughtUp,
    RecordedEvent,
    StreamAppend,
)

BACK_PRESSURE_WAIT = 0.1
"""While too many commands are in hand: the longest wait for one to conclude before the stop
signal is looked at again (a conclusion ends the wait at once)."""

STOP_GRACE = 10.0
"""How long a stop waits for the handler calls in hand (their commands run again later if they
do not return in time: the checkpoint never passed them)."""

MOVE_GRACE = 1.0
"""In a group, when the partitions held change: how long the calls in hand get to conclude (and
be committed, for the partitions still held) before the processor resubscribes."""

_SUBMITTED = object()


@attrs.frozen
class LanePlan:
    """What one lane (a partition's, or all the work's) has to commit at a flush."""

    key: int
    taken: Taken
    mark: int | None
    """The checkpoint to commit (``None``: it did not move)."""
    beyond: int | None
    """The concluded mark to store after (or with) the commit (``None``: none to)."""


class CommandProcessor(Processor):
    """Carries out the commands of every workflow of an app (the dispatch policy)."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        app = context.app
        self.name = streams.command_processor_name(app.name)
        self.parking = Parking(app, self.derived, context.logger, self.name)
        self.ledger = self.parking.ledger
        self.filter = decoding.command_filter(app.workflows, self.ledger, RETRIED)
        self.replay = ReplayGuard(context.store, self.ledger, transactional=self._transactional)
        self.pool = CommandPool(
            self.name, app.pool_size, context.clock, context.logger, quick=pace.QUICK
        )
        self.marks = Lanes(self._woken)
        self._thread: int | None = None
        """The processor's own thread, once it runs (:meth:`_woken`)."""
        self.max_open = max(256, 8 * app.pool_size)
        """How many commands may be in hand before the processor stops reading ahead."""
        self.stop_grace = STOP_GRACE
        self.carried_out = 0
        self.reused = 0
        """How many commands of a fork's new generation were not carried out: they reuse the
        old generation's (:mod:`decider.processors.client.forking`)."""
        self.parked_by_handler: collections.Counter[str] = collections.Counter()
        self._concluded_marks: dict[int, int | None] = {}
        self._read: int | None = None
        """The position of the last input this subscription life dispatched or passed over."""
        self._settled: int | None = None
        """The last position up to which every input read is done and committed."""
        self._uncommitted: dict[int, list[StreamAppend]] = {}
        """Outcomes whose commit failed (the store was down), by position: the next
        subscription life commits them instead of carrying the commands out again."""

    @property
    def parked(self) -> int:
        """How many commands were parked."""
        return self.parking.parked

    @property
    def in_flight(self) -> int:
        """How many handler calls are running now."""
        return self.pool.calls_in_flight()

    @property
    def backing_off(self) -> int:
        """How many commands wait to be retried now."""
        return sum(load.backing_off for load in self.pool.load())

    def load(self) -> list[HandlerLoad]:
        """Each handler's commands in hand now (in flight, backing off, queued) and how many
        this processor parked; every registered handler is listed."""
        found = {load.handler: load for load in self.pool.load()}
        return [
            attrs.evolve(
                found.get(h.name, HandlerLoad(h.name, 0, 0, 0)),
                parked=self.parked_by_handler[h.name],
            )
            for h in sorted(self.context.app.handlers.values(), key=lambda h: h.name)
        ]

    # -- the thread -------------------------------------------------------------------------

    def run(self) -> None:
        """The engine's thread, with the pool's threads (and event loop) around it."""
        self._thread = threading.get_ident()
        needs_loop = any(h.is_async for h in self.context.app.handlers.values())
        self.pool.start(needs_loop)
        try:
            super().run()
        finally:
            self.pool.close()

    def _woken(self) -> None:
        """A command concluded: wake the processor's thread to commit it, unless it concluded
        on that thread (a copy, a park, a quick handler's call inline), which commits what
        concluded after each dispatch (:meth:`process`) with no wake-up."""
        if threading.get_ident() != self._thread:
            self.wake()

    def partition_key(self, event: RecordedEvent) -> str:
        """The instance stream that recorded the command (for a retry request, the one that
        recorded the command it retries, else the ledger)."""
        if event.type != RETRIED:
            return event.stream
        try:
            request = decoding.decode_message(self.context.app.codec, event)
        except CorruptEvent:
            return event.stream  # skipped, in the ledger's partition
        stream = getattr(request, "stream", None)
        return stream if isinstance(stream, str) else event.stream

    def consume(self) -> None:
        """One subscription's life; what it delivers before catching up may be a replay.

        When it ends, the calls in hand get up to :attr:`stop_grace` seconds to conclude (on a
        stop; :data:`MOVE_GRACE` when the partitions held changed), what concluded is
        committed, and the rest is left to the next life.
        """
        self.marks.reset()
        self.pool.reset()
        self._read = self._settled = None
        try:
            super().consume()
        finally:
            self._wind_down()

    def starting(self) -> None:
        """Load each key's concluded mark (transactional store), for the replay guard."""
        self._concluded_marks = {
            key: (
                self.share.stored_mark(key, concluded_mark_name, highest=True)
                if self._transactional
                else None
            )
            for key in self.share.held_keys()
        }
        marks = [mark for mark in self._concluded_marks.values() if mark is not None]
        self.replay.restart(max(marks) if marks else None, self.committed)

    def _wind_down(self) -> None:
        grace: float | None = None
        if self.context.stop.is_set():
            grace = self.stop_grace
        elif self.share.moved() and not self.marks.idle():
            grace = MOVE_GRACE
        if grace is not None:
            self.pool.pause()
            deadline = time.monotonic() + grace
            if not self.pool.wait_calls(deadline, self._flush_ready):
                self.log.warning(
                    "%s: %d handler call(s) still running after %.1fs; their commands will be "
                    "carried out again on the next start",
                    self.name,
                    self.pool.calls_in_flight(),
                    grace,
                )
        try:
            self.flush()
        except Exception as exc:  # the next life redoes it from the checkpoint
            self.log.warning("%s: could not commit on the way out: %s", self.name, describe(exc))
        finally:
            self.pool.reset()
            self.marks.reset()

    def on_caught_up(self, item: CaughtUp) -> None:
        """Note where the history (and so any replay of work done before a crash) ends."""
        super().on_caught_up(item)
        self.replay.caught_up(item.position)

    def idle_position(self) -> int | None:
        """With nothing in hand, everything read is done; else the lowest checkpoint."""
        if self._settled is not None and self.marks.idle():
            return self._settled
        return self.committed

    def poll_timeout(self) -> float | None:
        """No timer while commands are in hand (each conclusion wakes the thread); in a group,
        with nothing in hand, once a second (the checkpoints of partitions without commands
        follow what was read, and the log: :meth:`reached`)."""
        if self.marks.idle() and self.share.owned is not None:
            return IDLE_CHECKPOINT_EVERY
        return None

    def reached(self, position: int) -> None:
        """Every command of the partitions held up to ``position`` was delivered: with nothing
        in hand, each is carried out and committed, so the partitions' checkpoints move on to
        it (:meth:`flush`: about once a second for a partition without commands)."""
        if not self.marks.idle():
            return
        if self._read is None or position > self._read:
            self._read = position
        self.flush()

    def tick(self) -> None:
        """Woken by a conclusion (or the idle timer): commit what concluded (in a group, with
        nothing in hand: move the checkpoints of idle partitions on)."""
        if self.marks.ready() or (self.marks.idle() and self.share.behind(self._settled)):
            self.flush()

    # -- the policy -------------------------------------------------------------------------

    def handle(self, batch: Sequence[RecordedEvent]) -> Outcome:
        """Dispatch the batch's commands (up to a stop); what concluded so far, to commit."""
        self.dispatch(batch)
        taken = self.marks.lane(ALL).take()
        return Outcome(taken.appends, taken.mark)

    def process(self, batch: Sequence[RecordedEvent]) -> None:
        """Dispatch ``batch``, then commit at once whatever concluded meanwhile (copies and
        parks: the whole batch in one transaction; handled commands: those done so far)."""
        self.dispatch(batch)
        if self.marks.open == 0 or self.marks.ready():
            self.flush()

    def dispatch(self, batch: Sequence[RecordedEvent]) -> None:
        """Give each input an entry and start it: copies and parks conclude at once, handled
        commands go to the pool (a quick handler's run here, whatever the batch's size). Waits
        (committing what concluded) while too many are in hand."""
        for event in batch:
            while self.marks.open >= self.max_open and not self.context.stop.is_set():
                self.marks.wait(BACK_PRESSURE_WAIT)  # a conclusion (or a stop) wakes it
                self._flush_ready()
            if self.context.stop.is_set():
                return  # the rest is left to the next run
            key = self.share.key_of(event)
            if key is None:  # another partition's, or done before
                self._read = event.position
                continue
            entry = self.marks.add(key, event.position)
            self._read = event.position
            kept = self._uncommitted.pop(event.position, None)
            if kept is not None:
                self.marks.conclude(entry, kept)
                continue
            draft = Outcome()
            started = self.step(
                event, draft, functools.partial(self._carry_out, entry=entry, draft=draft)
            )
            if started is not _SUBMITTED:
                self.marks.conclude(entry, draft.appends)

    def redo_units(self, batch: Sequence[RecordedEvent], outcome: Outcome) -> list[Unit]:
        """A result stream that exists with other ids: the command was carried out before and
        its handler answered differently this time. Keep what is stored, write the rest."""
        return [(None, lambda: self.keep_stored(outcome))]

    def settle(self, outcome: Outcome) -> None:
        """Commit ``outcome`` (keeping what is stored on a conflict)."""
        self.commit_outcome(outcome, [])

    def flush(self) -> None:
        """Commit what concluded since the last flush, each key's (partition's) with its
        checkpoint at its mark, with the commit engine
        (:meth:`~decider.processors.engine.committing.Committing.commit_partitions`): in a
        group, every partition's in one transaction under every lease where it can, else each
        on its own under its fence. Outcomes that fail to commit are kept for the next life."""
        idle_due = self.share.idle_due()
        read = self._read
        keys = self.share.held_keys()
        held = self.share.held_now()
        plans = {plan.key: plan for key in keys if (plan := self._plan(key, idle_due, held))}
        done: set[int] = set()
        try:
            committed = self.commit_partitions(
                list(plans),
                functools.partial(self._together, plans, done),
                functools.partial(self._alone, plans, done),
            )
        except BaseException:
            for plan in plans.values():
                if plan.key not in done:
                    self._uncommitted.update(plan.taken.outcomes)
            raise
        for key in committed:
            plan = plans[key]
            if plan.mark is not None:
                self.share.committed_to(key, plan.mark)
            if plan.beyond is not None:
                self._concluded_marks[key] = plan.beyond
        marks = [self.share.mark(key) for key in keys]
        if marks and all(mark is not None for mark in marks):
            self.committed = min(mark for mark in marks if mark is not None)
        if self.marks.idle():
            self._settled = read  # every input read up to there is done, and committed
        if committed:
            self.context.progress()

    def _plan(self, key: int, idle_due: bool, held: dict[int, Lease] | None) -> LanePlan | None:
        """What concluded in ``key``'s lane, to commit (``None``: nothing to, now)."""
        if not self.share.still_held(key, held):
            self.marks.drop(key)  # released or lost: the new owner carries its commands out
            self.share.let_go(key)  # or, if it is held after all, the next life here
            return None
        taken = self.marks.lane(key).take()
        # With nothing in hand, every input of the lane up to what was read has concluded.
        mark = self._read if taken.drained and self._read is not None else taken.mark
        stored = self.share.mark(key)
        # Only on: a life that starts from a lower partition's checkpoint reads positions this
        # partition was checkpointed past (by its previous owner, say).
        moved = mark is not None and (stored is None or mark > stored)
        if not taken.appends and (not moved or (taken.mark is None and not idle_due)):
            return None  # an idle partition's checkpoint moves on about once a second
        concluded = self._concluded_marks.get(key)
        beyond = taken.beyond
        if not self._transactional or (concluded is not None and (beyond or 0) <= concluded):
            beyond = None
        return LanePlan(key, taken, mark if moved else None, beyond)

    def _together(self, plans: dict[int, LanePlan], done: set[int]) -> Outcome:
        """Every lane's commit in one: their appends, checkpoints and concluded marks (in the
        commit itself, so never past what is stored)."""
        checkpoints: list[tuple[str, int]] = []
        for plan in plans.values():
            name = self.share.checkpoint_name(plan.key)
            if plan.mark is not None:
                checkpoints.append((name, plan.mark))
            if plan.beyond is not None:
                checkpoints.append((concluded_mark_name(name), plan.beyond))
        appends = [item for plan in plans.values() for item in plan.taken.appends]
        return Outcome(appends, None, [lambda: done.update(plans)], checkpoints)

    def _alone(self, plans: dict[int, LanePlan], done: set[int], key: int) -> None:
        """Commit ``key``'s lane on its own (under its fence)."""
        plan = plans[key]
        self.settle(Outcome(plan.taken.appends, plan.mark))
        done.add(key)
        if plan.beyond is not None:
            # After the commit, so it never claims more than is stored (a crash in between
            # costs at most a second call of a handler, whose results are then kept as
            # stored); under the fence like the commit.
            self.save_mark(concluded_mark_name(self.share.checkpoint_name(key)), plan.beyond)

    def partition_dropped(self, key: int) -> None:
        """Its commands in hand are not committed here: the new owner carries them out."""
        self.marks.drop(key)

    def _flush_ready(self) -> None:
        if self.marks.ready():
            self.flush()

    def drained(self) -> None:
        """Commit what concluded: a wake-up may have been taken by the drain."""
        self._flush_ready()

    # -- one command ----------------------------------------------------------------------

    def _carry_out(self, event: RecordedEvent, entry: object, draft: Outcome) -> object:
        if event.type == RETRIED:
            if event.stream != self.ledger:
                return None
            source, metadata, round_key = self.parking.retried(event, self.context.store)
            return self._command(source, metadata, round_key, entry, draft)
        if self.context.app.workflow_of_stream(event.stream) is None:
            return None
        try:
            metadata = decoding.input_metadata(self.context.app.codec, event)
        except CorruptEvent as exc:
            raise Skip(exc.reason) from exc
        reused = self.context.app.codec.reused_of(event.metadata)
        if reused is not None:
            # A fork's new generation decided it as the old one did: its effect is the old
            # command's, carried out (or still being carried out) under that one's id.
            self.reused += 1
            return None
        return self._command(event, metadata, "", entry, draft)

    def _command(
        self,
        event: RecordedEvent,
        metadata: Metadata,
        round_key: str,
        entry: object,
        draft: Outcome,
    ) -> object:
        app = self.context.app
        kind, type_name = parse_type(event.type)
        command_id = str(event.id)
        if kind == Kind.PUBLISHED:
            stream = streams.topic_stream(type_name, command_id)
            draft.appends.append(self._copy(stream, event, command_id, metadata, NO_STREAM))
        elif kind == Kind.REPLIED:
            stream = streams.reply_stream(metadata.causation_id or command_id)
            draft.appends.append(self._copy(stream, event, command_id, metadata, ANY))
        elif kind != Kind.SENT:
            raise Skip(f"{event.type!r} is not a command")
        elif type_name in app.routes:
            route = app.routes[type_name]
            draft.appends.append(self._copy(route, event, command_id, metadata, ANY))
        elif type_name in app.handlers:
            handler = app.handlers[type_name]
            return self._submit(handler, event, command_id, metadata, round_key, entry)
        else:
            reason = f"no handler or route is registered for {type_name!r}"
            draft.appends.extend(self._park(event, type_name, metadata, reason, 0, round_key))
        self.carried_out += 1
        return None

    def _copy(
        self,
        stream: str,
        event: RecordedEvent,
        command_id: str,
        metadata: Metadata,
        expected: Any,
    ) -> StreamAppend:
        """The append of the command's message, as stored, to ``stream`` with a derived id."""
        message_type = parse_type(event.type)[1]
        new = self.copied(stream, command_id, message_type, event.data, metadata.correlation_id)
        return StreamAppend(stream, [new], expected)

    def _submit(  # noqa: PLR0917
        self,
        handler: HandlerRegistration,
        event: RecordedEvent,
        command_id: str,
        metadata: Metadata,
        round_key: str,
        entry: object,
    ) -> object:
        try:
            command = decoding.decode_message(self.context.app.codec, event, handler.type_name)
        except CorruptEvent as exc:
            raise Skip(exc.reason) from exc
        if self._replayed_before(handler, event, round_key):
            self.log.info(
                "%s: %s %s was concluded before a restart; not carried out again",
                self.name,
                handler.type_name,
                command_id,
                extra={
                    "command_id": command_id,
                    "event_type": handler.type_name,
                    "stream": event.stream,
                    "position": event.position,
                },
            )
            return None

        def conclude(conclusion: Conclusion) -> None:
            self._job_concluded(entry, handler, event, command_id, metadata, round_key, conclusion)

        job = self._job(entry, event.stream, handler, command, command_id, conclude)
        self.pool.submit(job)
        return _SUBMITTED

    def _replayed_before(
        self, handler: HandlerRegistration, event: RecordedEvent, round_key: str
    ) -> bool:
        """Whether this round of the command concluded before (a replay after a crash), by the
        concluded mark of the command's partition in a group, else the processor's own."""
        key = self.share.key_of(event)
        committed = self.share.mark(key) if key is not None else self.committed
        return self.replay.concluded(handler.name, event, round_key, committed)

    def _job(  # noqa: PLR0917
        self,
        entry: object,
        key: str,
        handler: HandlerRegistration,
        command: Any,
        command_id: str,
        conclude: Callable[[Conclusion], None],
    ) -> Job:
        """The pool's job for a command (``entry``: what its input was dispatched as)."""
        return Job(key, handler, command, command_id, conclude)

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
        """On the thread its call ended on (a worker, the event loop, or this processor's own
        for a quick handler): the command of ``entry`` concluded; its outcome awaits the
        commit."""
        assert isinstance(entry, Entry) and not isinstance(conclusion, AttemptFailed)
        self.marks.conclude(
            entry, self._concluded(handler, event, command_id, metadata, round_key, conclusion)
        )

    def _concluded(  # noqa: PLR0917
        self,
        handler: HandlerRegistration,
        event: RecordedEvent,
        command_id: str,
        metadata: Metadata,
        round_key: str,
        conclusion: Conclusion,
    ) -> list[StreamAppend]:
        """What a command's conclusion leads to: its results' appends, or its park records."""
        exception: BaseException | None
        if isinstance(conclusion, GaveUp | AttemptFailed):
            reason, attempts = conclusion.reason, conclusion.attempts
            exception = conclusion.exception
        else:
            try:
                appends = self._results(handler, command_id, metadata, conclusion)
            except Exception as exc:
                reason = f"the handler's results cannot be stored: {describe(exc)}"
                attempts, exception = 1, exc
            else:
                self.carried_out += 1
                return appends
        self.parked_by_handler[handler.name] += 1
        return self._park(
            event, handler.type_name, metadata, reason, attempts, round_key, exception
        )

    def _results(
        self, handler: HandlerRegistration, command_id: str, metadata: Metadata, results: Any
    ) -> list[StreamAppend]:
        if not results:
            return []
        stream = streams.results_stream(handler.name, command_id)
        events = [
            self.derived(
                stream,
                command_id,
                result,
                index=i,
                correlation_id=metadata.correlation_id,
                input_for=True,
            )
            for i, result in enumerate(results)
        ]
        return [StreamAppend(stream, events, NO_STREAM)]

    def _park(  # noqa: PLR0917
        self,
        event: RecordedEvent,
        command_type: str,
        metadata: Metadata,
        reason: str,
        attempts: int,
        round_key: str,
        exception: BaseException | None = None,
    ) -> list[StreamAppend]:
        return self.parking.park(
            event, command_type, metadata.correlation_id, reason, attempts, round_key, exception
        )
