"""The timer processor: ``Scheduled`` events come back to their workflow when due.

A ``Scheduled:<type>`` event is due at its recorded time (the service clock's time, stamped in
its metadata by the workflow processor; else the store's) plus ``after``. When due, its message
is appended, byte for byte, to ``timer-<scheduled event id>`` with expected ``NO_STREAM`` and a
derived id (correlation id: the instance id), so firing twice writes once; the workflow
processor then routes it like any input.

Two threads: a reader follows the subscription and queues timers in a heap; the firer waits on
the clock until the earliest is due or the reader brings a new one (no polling), fires what is
due, and stores as checkpoint the position just before the oldest pending timer, so pending
timers survive a restart (already fired ones are recognised by the idempotent append).

A timer of an instance that has ended (completed, failed or cancelled) never fires: before
firing, the firer reads the instance's events after the ``Scheduled`` one, and drops the timer
if one of them ends the instance. Nothing is written for a dropped timer (the workflow would
only record its message as ``Ignored``); it counts in :attr:`TimerProcessor.dropped`.
WARNING: an instance that ends between that read and the append still gets the timer's
message, which it records as ``Ignored``.

A generation that was forked (:mod:`decider.processors.client.forking`) has ended too, so its
pending timers never fire; should one fire in that window, the workflow processor skips its
message (the new generation does not take it). A timer the new generation decided exactly as
the old one did (its metadata says it ``reuses`` the old) fires under the old one's id and due
time, so ``timer-<old id>`` is written once in all.

In a group of processes (:mod:`decider.processors.engine.sharing`), a timer belongs to the partition
of the instance stream that scheduled it: a process queues and fires the timers of the partitions
it holds, and each partition has its own checkpoint (``<app>.timers.p<n>``: just before its
oldest pending timer), committed with its fired timers under the partition's lease. Other
partitions' ``Scheduled`` events are passed over by their stream's name, without decoding them.
"""

from __future__ import annotations

import collections
import heapq
import threading
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

import attrs

from decider import Metadata
from decider.codec import Kind, event_kind
from decider.processors.app import decoding, streams
from decider.processors.engine import telemetry
from decider.processors.engine.base import Context, Outcome, Processor, Skip, Unit
from decider.processors.engine.clock import Signal
from decider.processors.engine.sharing import ALL, LeaseNotHeld
from decider.stores import LeaseLost
from decider.stores.errors import CorruptEvent
from decider.stores.protocol import NO_STREAM, RecordedEvent, StreamAppend

_IDLE_WAIT = 3600.0
_ENDING_KINDS = frozenset({Kind.COMPLETED, Kind.FAILED, Kind.CANCELLED})
"""The kinds of workflow event that end an instance."""


@attrs.frozen(order=True)
class PendingTimer:
    """A timer waiting to fire, ordered by due time then log position."""

    due: datetime
    position: int
    scheduled_id: str = attrs.field(order=False)
    message_type: str = attrs.field(order=False)
    message: bytes = attrs.field(order=False)
    correlation_id: str | None = attrs.field(order=False)
    stream: str = attrs.field(order=False, default="")
    """The instance stream that scheduled it."""
    revision: int = attrs.field(order=False, default=-1)
    """The revision of its ``Scheduled`` event in :attr:`stream`."""
    trace: Metadata | None = attrs.field(order=False, default=None)
    """The ``Scheduled`` event's metadata, for its trace context (the firing continues it)."""
    key: int = attrs.field(order=False, default=ALL)
    """The partition it belongs to (:data:`~decider.processors.engine.sharing.ALL`: no group)."""


@attrs.frozen
class _Firing:
    """What firing one partition's due timers commits: the timers, those of instances still
    running (the others are dropped), their appends, and the checkpoint if it moved."""

    key: int
    due: list[PendingTimer]
    live: list[PendingTimer]
    appends: list[StreamAppend]
    checkpoint: int | None


class _Queued:
    """The positions of one key's queued timers in log order, and those fired: the oldest
    pending one bounds the key's checkpoint."""

    def __init__(self) -> None:
        # The heap is ordered by due time: scanning it on every wake cost time in proportion to
        # the pending timers. Positions are queued in log order, so the oldest is the first one
        # not fired yet.
        self.order: collections.deque[int] = collections.deque()
        self.fired: set[int] = set()

    def oldest_pending(self, leaving: set[int]) -> int | None:
        """The smallest position of a queued timer not fired and not in ``leaving`` (being
        fired now). Amortised O(1): fired positions are dropped from the front, and all of them
        once they outnumber the pending timers."""
        order, fired = self.order, self.fired
        while order and order[0] in fired:
            fired.discard(order.popleft())
        if 2 * len(fired) > len(order) + 128:  # more fired than pending: memory stays O(pending)
            self.order = order = collections.deque(p for p in order if p not in fired)
            fired.clear()
        for position in order:
            if position not in fired and position not in leaving:
                return position
        return None


class TimerProcessor(Processor):
    """Fires the due timers of every workflow of an app, once in effect."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        app = context.app
        self.name = streams.timer_processor_name(app.name)
        self.filter = decoding.timer_filter(app.workflows)
        self.fired = 0
        self.joint_firings = 0
        """How many firings committed several partitions' timers in one transaction."""
        self.dropped = 0
        self._heap: list[PendingTimer] = []
        self._heap_lock = threading.Lock()
        self._queued: dict[int, _Queued] = defaultdict(_Queued)
        self._saved: dict[int, int | None] = {}
        """Each key's checkpoint as last loaded or committed."""
        self._read_position: int | None = None
        self._wake = Signal()
        self._firer: threading.Thread | None = None
        self._firer_failed = Signal()
        self._firing = 0

    @property
    def pending(self) -> list[PendingTimer]:
        """The timers not fired yet, earliest first."""
        with self._heap_lock:
            return sorted(self._heap)

    def consume(self) -> None:
        """Read timers on this thread while a second thread fires them."""
        with self._heap_lock:
            self._heap.clear()
            self._queued.clear()
        # Without a group the firer may store a checkpoint before the reader subscribes.
        self._read_position = self.share.stored_mark(ALL) if self.context.group is None else None
        # The firer must end with the reader, not only on stop: after a reader failure, run()
        # resubscribes, and joining a firer that waits for the stop signal would hang until then.
        reader_done = Signal()
        self._firer_failed = Signal()
        firer = threading.Thread(
            target=self._fire_loop, args=(reader_done,), name=f"{self.name}.fire", daemon=True
        )
        self._firer = firer
        firer.start()
        try:
            super().consume()
        finally:
            reader_done.set()
            self._wake.set()
            firer.join()

    def stop(self) -> None:
        """Wake both threads so they return."""
        super().stop()
        self._wake.set()

    def starting(self) -> None:
        """Everything up to the (lowest) checkpoint is queued or fired."""
        self._saved = {key: self.share.mark(key) for key in self.share.held_keys()}
        if self._read_position is None:
            self._read_position = self.committed

    def halted(self) -> bool:
        """Whether the firing thread failed: the reader must end too, and resubscribe."""
        return self._firer_failed.is_set()

    def handle(self, batch: Sequence[RecordedEvent]) -> Outcome:
        """Read the batch's timers (queued once the skip records of malformed ones are
        committed; the firer commits the checkpoint)."""
        return self._read_timers(batch, batch[-1].position)

    def _read_timers(self, batch: Sequence[RecordedEvent], read: int | None) -> Outcome:
        """Read ``batch``'s timers, queued once committed, and then read up to ``read``."""
        outcome = Outcome()
        timers: list[PendingTimer] = []
        for event in batch:
            self.step(event, outcome, lambda e: timers.append(self._timer(e)))
        outcome.on_commit.append(lambda: self._queue(timers, read))
        return outcome

    def process(self, batch: Sequence[RecordedEvent]) -> None:
        """Read the batch's timers; in a group, only those of the partitions held, each
        partition's skip records committed under its lease."""
        if self.share.owned is None:
            super().process(batch)
            return
        work: dict[int, list[RecordedEvent]] = defaultdict(list)
        for event in batch:
            key = self.share.key_of(event)
            if key is not None:
                work[key].append(event)
        for key, events in work.items():
            # Read up to the batch's end once every partition's timers are queued: a partition
            # with none pending has its checkpoint at what was read.
            outcome = self._read_timers(events, None)
            try:
                if outcome.appends:
                    with self.share.fenced(key):
                        self.commit_outcome(outcome, events)
                else:
                    for done in outcome.on_commit:
                        done()
            except (LeaseLost, LeaseNotHeld) as exc:
                self.share.lease_gone(exc)
        end = batch[-1].position
        for key in self.share.held_keys():
            self.share.committed_to(key, end)  # read up to there: what follows is new
        self._queue([], end)

    def redo_units(self, batch: Sequence[RecordedEvent], outcome: Outcome) -> list[Unit]:
        """A timer stream written before with other ids: keep what is stored."""
        return [(None, lambda: self.keep_stored(outcome))]

    def _queue(self, timers: list[PendingTimer], position: int | None) -> None:
        with self._heap_lock:
            for timer in timers:
                heapq.heappush(self._heap, timer)
                self._queued[timer.key].order.append(timer.position)
            if position is not None and (
                self._read_position is None or position > self._read_position
            ):
                self._read_position = position
        self._wake.set()

    def reached(self, position: int) -> None:
        """Every timer of the partitions held up to ``position`` is queued: the firer moves the
        checkpoints of the partitions with none pending on to it (about once a second)."""
        self._queue([], position)

    def on_caught_up(self, item: object) -> None:
        """Also wake the firer: history is read, it may store a checkpoint."""
        super().on_caught_up(item)  # type: ignore[arg-type]
        self._wake.set()

    def idle_position(self) -> int | None:
        """Everything up to the last position read is queued."""
        return self._read_position

    def has_due_work(self) -> bool:
        """Whether a queued timer is due and not fired yet."""
        now = self.context.clock.now()
        with self._heap_lock:
            return self._firing > 0 or (bool(self._heap) and self._heap[0].due <= now)

    def _timer(self, event: RecordedEvent) -> PendingTimer:
        codec = self.context.app.codec
        try:
            timer = decoding.decode_timer(codec, event)
            metadata = decoding.input_metadata(codec, event)
            recorded_at = metadata.recorded_at or event.recorded_at
        except CorruptEvent as exc:
            raise Skip(f"not a valid Scheduled event: {exc.reason}") from exc
        try:
            due = recorded_at + timer.after
        except OverflowError as exc:
            reason = f"not a valid Scheduled event: its due time is out of range ({exc})"
            raise Skip(reason) from exc
        return PendingTimer(
            due=due,
            position=event.position,
            # A fork's new generation that decided the old timer again fires it as the old one:
            # under its id, so that it fires once in all.
            scheduled_id=codec.reused_of(event.metadata) or str(event.id),
            message_type=timer.message_type,
            message=timer.message,
            correlation_id=metadata.correlation_id,
            stream=event.stream,
            revision=event.revision,
            trace=metadata if metadata.traceparent is not None else None,
            key=self.share.partition(event),
        )

    # -- the firing thread ----------------------------------------------------------------

    def _fire_loop(self, reader_done: Signal) -> None:
        stop, clock = self.context.stop, self.context.clock
        try:
            while not stop.is_set() and not reader_done.is_set():
                self._wake.clear()
                self._fire_due()
                with self._heap_lock:
                    next_due = self._heap[0].due if self._heap else None
                wait = _IDLE_WAIT
                if next_due is not None:
                    wait = max(0.0, (next_due - clock.now()).total_seconds())
                if self._wake.is_set() or stop.is_set() or reader_done.is_set():
                    continue
                if wait > 0:
                    clock.wait(self._wake, wait)
        except Exception as exc:
            self.errors.append(exc)
            self.log.exception("%s: the firing thread failed; the reader resubscribes", self.name)
            # Set before stop(): a reader that subscribes after it sees the flag (halted()).
            self._firer_failed.set()
            super().stop()

    def _fire_due(self) -> None:
        now = self.context.clock.now()
        keys = self.share.held_keys()
        with self._heap_lock:
            due: list[PendingTimer] = []
            while self._heap and self._heap[0].due <= now:
                due.append(heapq.heappop(self._heap))
            leaving = {t.position for t in due}
            oldest = {key: self._queued[key].oldest_pending(leaving) for key in keys}
            read = self._read_position
            self._firing = len(due)
        by_key: dict[int, list[PendingTimer]] = defaultdict(list)
        for timer in due:
            by_key[timer.key].append(timer)
        idle_due = self.share.owned is None or self.share.idle_due()
        fired: list[PendingTimer] = []
        live_count, wrote = 0, False
        held = self.share.held_now()
        try:
            plans: list[_Firing] = []
            for key in keys:
                mine = by_key.pop(key, [])
                if not self.share.still_held(key, held):
                    # Its partition moved on (the new owner fires its timers), or is held
                    # after all (the next life here, from the stored checkpoint, fires them).
                    self.share.let_go(key)
                    continue
                first = oldest[key]
                plan = self._plan_key(key, mine, read if first is None else first - 1, idle_due)
                if plan is not None:
                    plans.append(plan)
            for plan in self._commit_plans(plans):
                fired.extend(plan.due)
                live_count += len(plan.live)
                wrote = True
        except Exception:
            done = {id(timer) for timer in fired}
            with self._heap_lock:
                for timer in due:
                    if id(timer) not in done:
                        heapq.heappush(self._heap, timer)
            raise
        finally:
            with self._heap_lock:
                self._firing = 0
                for timer in fired:
                    self._queued[timer.key].fired.add(timer.position)
        self._fired_counted(fired, live_count, wrote)

    def _plan_key(
        self, key: int, due: list[PendingTimer], checkpoint: int | None, idle_due: bool
    ) -> _Firing | None:
        """What firing ``key``'s ``due`` timers commits, with its checkpoint at ``checkpoint``
        (the ones of ended instances are not fired); ``None`` if nothing."""
        saved = self._saved.get(key)
        if checkpoint is None or (saved is not None and checkpoint < saved):
            checkpoint = saved  # read from a lower partition's checkpoint: not this far yet
        moved = checkpoint is not None and checkpoint != saved
        if not (due or (moved and idle_due)):
            return None
        live = self._not_ended(due) if due else []
        appends = [self._fired(timer) for timer in live]
        return _Firing(key, due, live, appends, checkpoint if moved else None)

    def _commit_plans(self, plans: list[_Firing]) -> list[_Firing]:
        """Commit ``plans`` (each partition's firing) with the commit engine: several
        partitions' in one transaction where the store can, else each under its fence; the
        plans committed."""
        by_key = {plan.key: plan for plan in plans}

        def together() -> Outcome:
            checkpoints = [
                (self.share.checkpoint_name(plan.key), plan.checkpoint)
                for plan in plans
                if plan.checkpoint is not None
            ]
            appends = [item for plan in plans for item in plan.appends]
            return Outcome(appends, None, [self._joint_fired], checkpoints)

        def alone(key: int) -> None:
            plan = by_key[key]
            self.commit_outcome(Outcome(plan.appends, plan.checkpoint), [])

        done = [by_key[key] for key in self.commit_partitions(list(by_key), together, alone)]
        for plan in done:
            if plan.checkpoint is not None:
                self._saved[plan.key] = plan.checkpoint
        return done

    def _joint_fired(self) -> None:
        self.joint_firings += 1

    def _fired_counted(self, fired: list[PendingTimer], live: int, wrote: bool) -> None:
        if fired:
            self.fired += live
            self.dropped += len(fired) - live
            self.log.info(
                "%s fired %d timer(s), dropped %d of ended instances",
                self.name,
                live,
                len(fired) - live,
            )
        if fired or wrote:
            self.context.progress()

    def _not_ended(self, due: list[PendingTimer]) -> list[PendingTimer]:
        """The timers of ``due`` whose instance has not ended since it scheduled them."""
        ended: dict[str, bool] = {}
        live = []
        for timer in due:
            if timer.stream not in ended:
                ended[timer.stream] = self._ended(timer)
            if not ended[timer.stream]:
                live.append(timer)
        return live

    def _ended(self, timer: PendingTimer) -> bool:
        """Whether an event after ``timer``'s ``Scheduled`` ended its instance."""
        if not timer.stream:
            return False
        later = self.context.store.read_stream(timer.stream, timer.revision + 1)
        return any(event_kind(record.type) in _ENDING_KINDS for record in later)

    def _fired(self, timer: PendingTimer) -> StreamAppend:
        stream = streams.timer_stream(timer.scheduled_id)
        with telemetry.timer_span(self.name, stream, timer.scheduled_id, timer.trace):
            new = self.copied_input(
                stream, timer.scheduled_id, timer.message_type, timer.message, timer.correlation_id
            )
        return StreamAppend(stream, [new], NO_STREAM)
