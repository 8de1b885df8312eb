"""Figure 7: the first input to a cold instance with snapshots, by history length.

The counter workflow of figure 4 with ``snapshot_every=1000``. Its instances' streams are
pre-filled (10 and 10,000 events), then one new processor handles one input of each, which
folds the streams and, for the long one, writes its first snapshot (a stream written before
snapshots were turned on gets one on its first load). The figure is then the median over a few
new processors (empty caches, as after a process start) of the time to handle one input: the
long instance is restored from its snapshot and the few events after it, the short one folded
from its stream. Target: at 10,000 events <= 2x the time at 10 (figure 4's cold figure is the
same measurement without snapshots).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

import attrs

from benchmarks import latency
from benchmarks.harness import Figure, Result, Target
from decider.processors import App
from decider.processors.workflows.processor import WorkflowProcessor
from decider.stores.memory import MemoryEventStore
from decider.stores.sqlite import SqliteEventStore

SNAPSHOT_EVERY = 1_000
"""How often the benchmark's counter snapshots its state, in events."""


def snapshot_app() -> App:
    """The counter of figure 4, snapshotted every :data:`SNAPSHOT_EVERY` events."""
    app = App("bench-snapshots")
    counter = attrs.evolve(latency.COUNTER, snapshot_every=SNAPSHOT_EVERY)
    app.workflow(counter, inputs={latency.Increment: lambda m, _: m.counter_id})
    return app


def cold_times(store: latency.Store, lengths: Sequence[int], cold_starts: int) -> dict[int, float]:
    """The median time of a new processor's first input at each history length."""
    app = snapshot_app()
    queues = {}
    for length in lengths:
        counter_id = f"s{length}"
        latency.prefill(store, app.codec, counter_id, length)
        queues[length] = iter(latency._inputs(app, store, counter_id, cold_starts + 1))
    first = _processor(app, store)
    for length in lengths:
        first.process([next(queues[length])])
    if max(lengths) >= SNAPSHOT_EVERY and first.snapshots.written == 0:
        raise AssertionError("the first load of the long stream wrote no snapshot")
    times: dict[int, list[float]] = {length: [] for length in lengths}
    for _ in range(cold_starts):
        for length in lengths:
            processor = _processor(app, store)
            times[length].append(latency._time_one(processor, next(queues[length])))
            if length >= SNAPSHOT_EVERY and processor.snapshots.restored != 1:
                raise AssertionError(f"the instance of {length} events was not restored")
    return {length: statistics.median(found) for length, found in times.items()}


def _processor(app: App, store: latency.Store) -> WorkflowProcessor:
    return latency._processor_for(app, store, latency.COUNTER.name)


def measure(lengths: Sequence[int], cold_starts: int) -> list[Result]:
    """Figure 7 on SQLite (``synchronous=FULL``) and in memory."""
    with tempfile.TemporaryDirectory(prefix="decider-bench-") as directory:
        sqlite = SqliteEventStore(Path(directory) / "snapshots.db", synchronous="FULL")
        try:
            on_disk = cold_times(sqlite, lengths, cold_starts)
        finally:
            sqlite.close()
    memory = MemoryEventStore()
    try:
        in_memory = cold_times(memory, lengths, cold_starts)
    finally:
        memory.close()
    return [
        _figure(on_disk, "SQLite FULL", "", cold_starts),
        _figure(in_memory, "memory", "_memory", cold_starts),
    ]


def _figure(times: dict[int, float], store: str, suffix: str, cold_starts: int) -> Figure:
    short, long = min(times), max(times)
    shown = " / ".join(f"{times[n] * 1e3:.3g}" for n in sorted(times))
    return Figure(
        key=f"snapshot_cold{suffix}",
        title=f"7. {store}: 1st input, cold, snapshots, {long:,} vs {short} events",
        unit="inputs/s",
        rate=1 / times[long],
        baseline=f"the same with {short} events in the stream",
        baseline_rate=1 / times[short],
        ratio=times[long] / times[short],
        ratio_is=f"time at {long} events / time at {short} (lower is better)",
        target=Target("<=", 2.0),
        note=f"median ms for a new processor's 1st input at {short} / {long:,} events: {shown}",
        extra={
            "store": store,
            "snapshot_every": SNAPSHOT_EVERY,
            "cold_ms": {str(n): t * 1e3 for n, t in times.items()},
            "cold_starts_per_length": cold_starts,
        },
    )
