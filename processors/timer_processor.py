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
"""

from __future__ import annotations

import collections
import heapq
import threading
from collections.abc import Sequence
from datetime import datetime

import attrs

from decider import Metadata
from decider.codec import event_kind
from decider.processors import decoding, streams, telemetry
from decider.processors.base import Context, Outcome, Processor, Skip, Unit
from decider.processors.clock import Signal
from decider.stores.errors import CorruptEvent
from decider.stores.protocol import NO_STREAM, RecordedEvent, StreamAppend

_IDLE_WAIT = 3600.0
_ENDING_KINDS = frozenset({"Completed", "Failed", "Cancelled"})
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


class TimerProcessor(Processor):
    """Fires the due timers of every workflow of an app, once in effect."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        app = context.app
        self.name = streams.timer_processor_name(app.name)
        self.filter = decoding.timer_filter(app.workflows)
        self.fired = 0
        self.dropped = 0
        self._heap: list[PendingTimer] = []
        self._heap_lock = threading.Lock()
        # The checkpoint needs the oldest pending position, and the heap is ordered by due time:
        # scanning it on every wake cost time in proportion to the pending timers. Positions
        # are queued in log order, so the oldest is the first one not fired yet.
        self._order: collections.deque[int] = collections.deque()
        self._fired_positions: set[int] = set()
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
            self._order.clear()
            self._fired_positions.clear()
        self._read_position = self.context.checkpoints.load_checkpoint(self.name)
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

    def halted(self) -> bool:
        """Whether the firing thread failed: the reader must end too, and resubscribe."""
        return self._firer_failed.is_set()

    def handle(self, batch: Sequence[RecordedEvent]) -> Outcome:
        """Read the batch's timers (queued once the skip records of malformed ones are
        committed; the firer commits the checkpoint)."""
        outcome = Outcome()
        timers: list[PendingTimer] = []
        for event in batch:
            self.step(event, outcome, lambda e: timers.append(self._timer(e)))
        outcome.on_commit.append(lambda: self._queue(timers, batch[-1].position))
        return outcome

    def redo_units(self, batch: Sequence[RecordedEvent], outcome: Outcome) -> list[Unit]:
        """A timer stream written before with other ids: keep what is stored."""
        return [(None, lambda: self.keep_stored(outcome))]

    def _queue(self, timers: list[PendingTimer], position: int) -> None:
        with self._heap_lock:
            for timer in timers:
                heapq.heappush(self._heap, timer)
                self._order.append(timer.position)
            self._read_position = position
        self._wake.set()

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
            scheduled_id=str(event.id),
            message_type=timer.message_type,
            message=timer.message,
            correlation_id=metadata.correlation_id,
            stream=event.stream,
            revision=event.revision,
            trace=metadata if metadata.traceparent is not None else None,
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
        with self._heap_lock:
            due: list[PendingTimer] = []
            while self._heap and self._heap[0].due <= now:
                due.append(heapq.heappop(self._heap))
            oldest = self._oldest_pending({t.position for t in due})
            read = self._read_position
            self._firing = len(due)
        checkpoint = read if oldest is None else oldest - 1
        try:
            live = self._not_ended(due) if due else []
            appends = [self._fired(timer) for timer in live]
            wrote = bool(appends) or (checkpoint is not None and checkpoint != self.committed)
            if wrote:
                self.commit_outcome(Outcome(appends, checkpoint), [])
        except Exception:
            with self._heap_lock:
                for timer in due:
                    heapq.heappush(self._heap, timer)
            raise
        finally:
            with self._heap_lock:
                self._firing = 0
        if due:
            with self._heap_lock:
                self._fired_positions.update(t.position for t in due)
            self.fired += len(live)
            self.dropped += len(due) - len(live)
            self.log.info(
                "%s fired %d timer(s), dropped %d of ended instances",
                self.name,
                len(live),
                len(due) - len(live),
            )
        if due or wrote:
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

    def _oldest_pending(self, leaving: set[int]) -> int | None:
        """The smallest position of a queued timer not fired and not in ``leaving`` (being
        fired now); called with the heap lock held. Amortised O(1): fired positions are dropped
        from the front, and all of them once they outnumber the pending timers."""
        order, fired = self._order, self._fired_positions
        while order and order[0] in fired:
            fired.discard(order.popleft())
        if 2 * len(fired) > len(order) + 128:  # more fired than pending: memory stays O(pending)
            self._order = order = collections.deque(p for p in order if p not in fired)
            fired.clear()
        for position in order:
            if position not in fired and position not in leaving:
                return position
        return None

    def _fired(self, timer: PendingTimer) -> StreamAppend:
        stream = streams.timer_stream(timer.scheduled_id)
        with telemetry.timer_span(self.name, stream, timer.scheduled_id, timer.trace):
            new = self.copied(
                stream, timer.scheduled_id, timer.message_type, timer.message, timer.correlation_id
            )
        return StreamAppend(stream, [new], NO_STREAM)
