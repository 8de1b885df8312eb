"""What each processor of an app has left to do, read from the store: the console's Processors
and Partitions pages.

A processor's checkpoint is a low-water mark: the inputs its filter passes after it are either
still to do or done since the checkpoint was last committed. Read from the store alone:

- **a workflow processor** commits its outputs and its checkpoint together, so every input
  after the checkpoint is still to do (counted exactly);
- **the timer processor** keeps its checkpoint just before its oldest timer that has not
  fired, so a ``Scheduled`` event after it is either *waiting* (not due yet: nothing to do
  now), done (fired: its ``timer-<id>`` stream exists; or dropped: its instance has ended), or
  *pending* (due, not fired, its instance running). A timer of an instance that has ended is
  done whether due or not: it is dropped, never fired. Only pending timers are work it has to
  do, and their lag counts from when they fell due;
- **the command processor** moves its checkpoint on in batches as commands conclude, so a
  command after it may have concluded already: its count is an upper bound (``exact`` false).

In a partitioned run on a store that keeps partition keys, the input router
(:mod:`decider.processors.workflows.router`) is listed too, with partition 0's checkpoint and
the inputs of no key after it as its work.

In a partitioned run (the app's partition count is recorded in the store), each partition has
its own checkpoint per processor (``<processor>.p<n>``, counting the processor's own when that
is later, as the processors do), and an input counts only in the partition it belongs to
(:meth:`~decider.processors.engine.base.Processor.partition_key`), never against another
partition's checkpoint.

A processor's lag (:func:`lag_seconds`) is the age of its oldest pending input: what the
``decider.processor.lag`` gauge of a running service measures, read here from the stored
checkpoints instead of the running processors' positions (so it can be higher by the work done
since the last checkpoint commit: for the command processor the page says "at most").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import attrs

from decider.codec import Kind, event_kind
from decider.processors.app import decoding, streams
from decider.processors.app.definition import AppDefinition
from decider.processors.commands.processor import CommandProcessor
from decider.processors.engine.base import Context, Processor
from decider.processors.engine.clock import Signal, SystemClock
from decider.processors.group import partitions
from decider.processors.timers.processor import TimerProcessor
from decider.processors.workflows.processor import WorkflowProcessor
from decider.processors.workflows.router import InputRouter
from decider.stores.errors import CorruptEvent
from decider.stores.protocol import CheckpointStore, EventStore, RecordedEvent

__all__ = [
    "LAG_CAP",
    "SCAN_LIMIT",
    "Progress",
    "is_partitioned",
    "processors_of",
    "progress",
    "summed",
]

LAG_CAP = 10_000
"""Pending inputs are counted up to this many per processor and partition (more: ``capped``)."""

SCAN_LIMIT = 50_000
"""At most this many inputs after the lowest checkpoint are read per processor; past it, the
counts are lower bounds (``capped``)."""

_PAGE = 1000
_ENDING_KINDS = frozenset({Kind.COMPLETED, Kind.FAILED, Kind.CANCELLED})


@attrs.frozen
class Progress:
    """One processor's work in one partition (``partition`` ``None``: an unpartitioned run).

    ``pending``: inputs it has to do now (``capped``: at least that many); ``oldest_pending_at``
    when the oldest of them was recorded (a timer: when it fell due); ``waiting``: timers
    scheduled and not due yet; ``exact`` false where some of ``pending`` may be done already
    (the command processor).
    """

    processor: str
    partition: int | None
    checkpoint: int | None
    pending: int = 0
    capped: bool = False
    oldest_pending_at: datetime | None = None
    waiting: int = 0
    exact: bool = True

    def lag_seconds(self, now: datetime) -> float:
        """The age of the oldest pending input (0 with none pending)."""
        if self.oldest_pending_at is None:
            return 0.0
        return max(0.0, (now - self.oldest_pending_at).total_seconds())


def processors_of(
    app: AppDefinition, store: EventStore, *, router: bool = False
) -> list[Processor]:
    """The processors a :class:`~decider.processors.Service` of ``app`` runs, not started
    (with ``router``, the input router of a group last).

    Built the way the service builds them, for their names, filters and partition keys only.
    """
    context = Context(
        app=app,
        store=store,
        checkpoints=store,  # type: ignore[arg-type]  # only read through load_checkpoint
        clock=SystemClock(),
        stop=Signal(),
        progress=lambda: None,
    )
    built: list[Processor] = [WorkflowProcessor(context, r, 1) for r in app.workflows.values()]
    built += [CommandProcessor(context), TimerProcessor(context)]
    return [*built, InputRouter(context)] if router else built


def is_partitioned(store: EventStore, app: AppDefinition) -> bool:
    """Whether ``app`` ran partitioned on ``store`` (its partition count is recorded)."""
    return bool(store.read_stream(partitions.count_stream(app.name), 0, 1))


def progress(store: EventStore, app: AppDefinition, now: datetime) -> list[Progress]:
    """Every processor's work, per partition in a partitioned run, in processor order.

    ``now`` decides which timers are due.
    """
    found: list[Progress] = []
    split = is_partitioned(store, app)
    router = split and bool(app.workflows) and partitions.routes_once(store)
    for processor in processors_of(app, store, router=router):
        found += _of(store, app, processor, now, split)
    return found


def summed(rows: Sequence[Progress]) -> Progress:
    """One processor's rows (of every partition) as one: the counts added, the lowest
    checkpoint (``None`` if a partition has none), the oldest pending input."""
    first = rows[0]
    marks = [r.checkpoint for r in rows]
    oldest = [r.oldest_pending_at for r in rows if r.oldest_pending_at is not None]
    return Progress(
        processor=first.processor,
        partition=None,
        checkpoint=None
        if any(m is None for m in marks)
        else min(m for m in marks if m is not None),
        pending=sum(r.pending for r in rows),
        capped=any(r.capped for r in rows),
        oldest_pending_at=min(oldest) if oldest else None,
        waiting=sum(r.waiting for r in rows),
        exact=all(r.exact for r in rows),
    )


def _of(
    store: EventStore, app: AppDefinition, processor: Processor, now: datetime, split: bool
) -> list[Progress]:
    load = store.load_checkpoint if isinstance(store, CheckpointStore) else (lambda name: None)
    own = load(processor.name)
    marks: dict[int | None, int | None]
    router = isinstance(processor, InputRouter)  # partition 0's work: the inputs of no key
    if router:
        only = partitions.ROUTER_PARTITION
        marks = {only: load(partitions.checkpoint_name(processor.name, only))}
    elif split:
        marks = {
            n: _later(load(partitions.checkpoint_name(processor.name, n)), own)
            for n in range(app.partitions)
        }
    else:
        marks = {None: own}
    pending = dict.fromkeys(marks, 0)
    waiting = dict.fromkeys(marks, 0)
    oldest: dict[int | None, datetime] = {}
    capped = False
    known = [m for m in marks.values() if m is not None]
    position = None if len(known) < len(marks) else min(known)
    timers = isinstance(processor, TimerProcessor)
    read = 0
    reading = processor.read_filter() if router else processor.filter
    while page := store.read_all(position, _PAGE, reading):
        for record in page:
            if router:
                key: int | None = partitions.ROUTER_PARTITION
            else:
                key = _key(processor, record, app) if split else None
            mark = marks[key]
            if mark is not None and record.position <= mark:
                continue  # done in its own partition
            at: datetime | None = record.recorded_at
            if timers:
                at = _timer_due(store, app, record, now)
                if at is None:
                    continue  # fired, or dropped: done
                if at > now:
                    waiting[key] += 1
                    continue
            if pending[key] >= LAG_CAP:
                capped = True
                continue
            pending[key] += 1
            if at is not None and (key not in oldest or at < oldest[key]):
                oldest[key] = at
        read += len(page)
        position = page[-1].position
        if len(page) < _PAGE:
            break
        if read >= SCAN_LIMIT:
            capped = True
            break
    exact = not isinstance(processor, CommandProcessor)
    return [
        Progress(
            processor=processor.name,
            partition=key,
            checkpoint=mark,
            pending=pending[key],
            capped=capped,
            oldest_pending_at=oldest.get(key),
            waiting=waiting[key],
            exact=exact,
        )
        for key, mark in marks.items()
    ]


def _key(processor: Processor, record: RecordedEvent, app: AppDefinition) -> int:
    try:
        stream = processor.partition_key(record)
    except Exception:  # a processor that cannot route it skips it in its own stream's partition
        stream = record.stream
    return partitions.partition_of(stream, app.partitions)


def _timer_due(
    store: EventStore, app: AppDefinition, record: RecordedEvent, now: datetime
) -> datetime | None:
    """When the timer of a ``Scheduled`` event falls due; ``None`` if it is done (fired, or its
    instance has ended so it is dropped) or cannot be read (the processor skips it)."""
    try:
        timer = decoding.decode_timer(app.codec, record)
        recorded_at = decoding.input_metadata(app.codec, record).recorded_at or record.recorded_at
        due = recorded_at + timer.after
    except (CorruptEvent, OverflowError):
        return None
    if due <= now and store.read_stream(streams.timer_stream(str(record.id)), 0, 1):
        return None
    later = store.read_stream(record.stream, record.revision + 1)
    if any(event_kind(r.type) in _ENDING_KINDS for r in later):
        return None
    return due


def _later(*marks: int | None) -> int | None:
    found = [mark for mark in marks if mark is not None]
    return max(found) if found else None
