"""Figure 4: how long the workflow processor takes to handle one input, by history length.

A tiny counter workflow (input ``bench.Increment``, which decides nothing, so each input adds
one ``Received`` event) has one instance per history length, its stream pre-filled with the
very events the processor would have written (same types, derived ids and metadata, so the
instance's handled message ids are all there). The real
:class:`~decider.processors.workflows.processor.WorkflowProcessor` then handles inputs read back
from the store, one batch of one input at a time, each committed (events and checkpoint in one
SQLite transaction, ``synchronous=FULL``). Two cases:

- warm: the instance is in the processor's cache, as for an active instance; after a few
  warm-up inputs, the median over many inputs;
- cold: a new processor (empty cache, as after a process start) handles its first input, so
  it must rebuild the instance from the store; the median over a few fresh processors.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from benchmarks.harness import Figure, Result, Target
from decider import (
    Codec,
    InitiatedBy,
    Metadata,
    Received,
    Workflow,
    WorkflowEvent,
    advance,
    event_id,
    handle,
    message,
    start,
)
from decider.processors import App, Signal, SystemClock
from decider.processors.engine.base import Context
from decider.processors.workflows.processor import WorkflowProcessor
from decider.stores import NO_STREAM, ExpectedRevision, NewEvent, RecordedEvent
from decider.stores.memory import MemoryEventStore
from decider.stores.sqlite import SqliteEventStore


@message("bench.Increment")
@attrs.frozen(kw_only=True)
class Increment:
    """Add one to counter ``counter_id``."""

    counter_id: str


def _evolve(state: int, event: WorkflowEvent[Increment, Any]) -> int:
    return state + 1 if isinstance(event, InitiatedBy | Received) else state


def _decide(_: Increment, __: int) -> list[Any]:
    return []


COUNTER: Workflow[Increment, int, Any] = Workflow("BenchCounter", 0, _evolve, _decide)
"""The counter workflow: its state is the number of inputs it received; it decides nothing."""

Store = SqliteEventStore | MemoryEventStore
"""The stores figure 4 runs on: both are transactional, so each input is one group commit."""

_PREFILL_CHUNK = 1_000
_WARM_UP = 5


def counter_app() -> App:
    """An app running only :data:`COUNTER`, routing each input by its ``counter_id``."""
    app = App("bench-latency")
    app.workflow(COUNTER, inputs={Increment: lambda m, _: m.counter_id})
    return app


def prefill(store: Store, codec: Codec, counter_id: str, length: int) -> None:
    """Write ``length`` events to the counter's stream, exactly as the processor would."""
    stream = COUNTER.stream(counter_id)
    instance = start(COUNTER)
    pending: list[NewEvent] = []
    expected: ExpectedRevision = NO_STREAM
    written = 0
    index = 0
    while written + len(pending) < length:
        cause = f"msg_prefill_{counter_id}_{index:06d}"
        index += 1
        events = handle(COUNTER, instance, Increment(counter_id=counter_id))
        instance = advance(COUNTER, instance, events)
        for position, event in enumerate(events):
            new_id = event_id(stream, cause, position)
            type_name, data = codec.encode_event(event)
            metadata = Metadata(
                message_id=str(new_id), correlation_id=counter_id, causation_id=cause
            )
            pending.append(NewEvent(new_id, type_name, data, codec.encode_metadata(metadata)))
        if len(pending) >= _PREFILL_CHUNK:
            expected = store.append(stream, pending, expected).next_expected_revision
            written += len(pending)
            pending = []
    if pending:
        store.append(stream, pending, expected)
    revisions = store.read_stream(stream, max(0, length - 1))
    if not revisions or revisions[-1].revision != length - 1:
        raise AssertionError(f"prefill of {stream} did not give {length} events")


def _inputs(app: App, store: Store, counter_id: str, count: int) -> list[RecordedEvent]:
    """``count`` Increment inputs published to the counter's input stream, read back."""
    stream = f"bench-inputs-{counter_id}"
    for _ in range(count):
        app.publish(store, Increment(counter_id=counter_id), stream=stream)
    return store.read_stream(stream)


def _processor(app: App, store: Store) -> WorkflowProcessor:
    return _processor_for(app, store, COUNTER.name)


def _processor_for(app: App, store: Store, workflow: str) -> WorkflowProcessor:
    """A new workflow processor (an empty cache) of ``app``'s ``workflow`` on ``store``."""
    context = Context(
        app=app,
        store=store,
        checkpoints=store,
        clock=SystemClock(),
        stop=Signal(),
        progress=lambda: None,
    )
    return WorkflowProcessor(context, app.workflows[workflow])


def _time_one(processor: WorkflowProcessor, item: RecordedEvent) -> float:
    before = processor.handled
    start_time = time.perf_counter()
    processor.process([item])
    elapsed = time.perf_counter() - start_time
    if processor.handled != before + 1:
        raise AssertionError(f"the processor did not handle {item.stream}@{item.revision}")
    return elapsed


@attrs.frozen
class LengthTimes:
    """Median seconds to handle one input at one history length, warm and cold."""

    length: int
    warm: float
    cold: float


def measure_lengths(
    store: Store, lengths: Sequence[int], inputs: int, cold_starts: int
) -> list[LengthTimes]:
    """Warm and cold handling times of one input for each history length.

    The lengths take turns input by input, so a slow spell of the disk (fsync times vary a
    lot on shared machines) falls on all of them alike.
    """
    app = counter_app()
    queues = {}
    for length in lengths:
        counter_id = f"c{length}"
        prefill(store, app.codec, counter_id, length)
        queues[length] = iter(_inputs(app, store, counter_id, cold_starts + _WARM_UP + inputs))
    cold: dict[int, list[float]] = {length: [] for length in lengths}
    for _ in range(cold_starts):
        for length in lengths:
            cold[length].append(_time_one(_processor(app, store), next(queues[length])))
    processor = _processor(app, store)
    for _ in range(_WARM_UP):
        for length in lengths:
            processor.process([next(queues[length])])
    hits = processor.cache.hits
    warm: dict[int, list[float]] = {length: [] for length in lengths}
    for _ in range(inputs):
        for length in lengths:
            warm[length].append(_time_one(processor, next(queues[length])))
    if processor.cache.hits - hits != inputs * len(lengths):
        raise AssertionError("the warm inputs did not all hit the processor's cache")
    return [
        LengthTimes(length, statistics.median(warm[length]), statistics.median(cold[length]))
        for length in lengths
    ]


def measure(lengths: Sequence[int], inputs: int, cold_starts: int = 5) -> list[Result]:
    """Figure 4: the longest history's handling time over the shortest's, warm and cold."""
    with tempfile.TemporaryDirectory(prefix="decider-bench-") as directory:
        sqlite = SqliteEventStore(Path(directory) / "latency.db", synchronous="FULL")
        try:
            on_disk = measure_lengths(sqlite, lengths, inputs, cold_starts)
        finally:
            sqlite.close()
    memory = MemoryEventStore()
    try:
        in_memory = measure_lengths(memory, lengths, inputs, cold_starts)
    finally:
        memory.close()
    return [
        *_figures(on_disk, "SQLite FULL", "", inputs, cold_starts),
        *_figures(in_memory, "memory", "_memory", inputs, cold_starts),
    ]


def _figures(
    times: list[LengthTimes], store: str, suffix: str, inputs: int, cold_starts: int
) -> list[Figure]:
    short, long = times[0], times[-1]
    lengths = " / ".join(f"{t.length:,}" for t in times)
    warm_ms = " / ".join(f"{t.warm * 1e3:.3g}" for t in times)
    cold_ms = " / ".join(f"{t.cold * 1e3:.3g}" for t in times)
    detail = {
        "store": store,
        "lengths": [t.length for t in times],
        "warm_ms": {str(t.length): t.warm * 1e3 for t in times},
        "cold_ms": {str(t.length): t.cold * 1e3 for t in times},
        "warm_inputs_per_length": inputs,
        "cold_starts_per_length": cold_starts,
        "estimator": "median; each input is one batch, committed with its checkpoint",
    }
    return [
        Figure(
            key=f"latency_warm{suffix}",
            title=f"4. {store}: 1 input, warm, {long.length:,} vs {short.length} events",
            unit="inputs/s",
            rate=1 / long.warm,
            baseline=f"the same with {short.length} events in the stream",
            baseline_rate=1 / short.warm,
            ratio=long.warm / short.warm,
            ratio_is=f"time at {long.length} events / time at {short.length} (lower is better)",
            target=Target("<=", 2.0),
            note=f"median ms per input at {lengths} events: {warm_ms}",
            extra=detail,
        ),
        Figure(
            key=f"latency_cold{suffix}",
            title=f"4. {store}: 1st input, cold, {long.length:,} vs {short.length} events",
            unit="inputs/s",
            rate=1 / long.cold,
            baseline=f"the same with {short.length} events in the stream",
            baseline_rate=1 / short.cold,
            ratio=long.cold / short.cold,
            ratio_is=f"time at {long.length} events / time at {short.length} (lower is better)",
            note=f"median ms for a new processor's 1st input at {lengths} events: {cold_ms}",
            extra=detail,
        ),
    ]
