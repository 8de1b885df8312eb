"""Figure 3: ``SqliteEventStore.append`` against raw ``sqlite3`` with the same durability.

Both sides write the same rows (the store's own schema and INSERT statement, a traffic-fine
``Sent`` event with its metadata) to a fresh file in a temporary directory, in WAL mode with
``synchronous=FULL``, so every commit is fsynced. The subject appends through the store with
an exact expected revision (the revision check, the idempotency plan, the notifier); the
baseline is ``BEGIN; INSERT; COMMIT`` (or ``executemany`` for a batch) on a bare connection.
The baseline's single-append rate is ``R``, the yardstick of the end-to-end figure.
"""

from __future__ import annotations

import sqlite3
import statistics
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.harness import Figure, Result, Target, compare_median, timed
from decider import Codec, Metadata, Sent, event_id
from decider.stores import NO_STREAM, ExpectedRevision, NewEvent
from decider.stores.sqlite import SqliteEventStore
from decider.stores.sqlite._sql import INSERT, SCHEMA
from samples.traffic_fine.messages import GenerateTrafficFineSystemNumber

STREAM = "IssueTrafficFineForSpeedingViolation-wf_bench"
Row = tuple[str, int, bytes, str, bytes, bytes, str, int | None]


def sample_events(count: int) -> list[NewEvent]:
    """``count`` encoded ``Sent`` events, as the workflow processor would append them."""
    codec = Codec()
    events = []
    for index in range(count):
        type_name, data = codec.encode_event(
            Sent(GenerateTrafficFineSystemNumber(police_report_id=f"pr_{index:06d}"))
        )
        new_id = event_id(STREAM, f"msg_{index:026d}", 0)
        metadata = codec.encode_metadata(
            Metadata(message_id=str(new_id), correlation_id="wf_bench", causation_id="msg_x")
        )
        events.append(NewEvent(id=new_id, type=type_name, data=data, metadata=metadata))
    return events


def _rows(events: list[NewEvent]) -> list[Row]:
    now = datetime.now(UTC).isoformat()
    return [
        (STREAM, revision, e.id.bytes, e.type, e.data, e.metadata, now, e.partition_key)
        for revision, e in enumerate(events)
    ]


def raw_connection(path: Path, synchronous: str = "FULL") -> sqlite3.Connection:
    """A bare connection on a fresh file with the store's schema, WAL and ``synchronous``."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(f"PRAGMA synchronous={synchronous}")
    connection.executescript(SCHEMA)
    return connection


def _in_fresh_dir(body: Callable[[Path], object]) -> Callable[[], None]:
    """``body`` run against a new temporary directory that is removed afterwards."""

    def run() -> None:
        with tempfile.TemporaryDirectory(prefix="decider-bench-") as directory:
            body(Path(directory))

    return run


def store_single(events: list[NewEvent]) -> Callable[[Path], None]:
    """One ``append`` call per event, each with the exact expected revision."""

    def body(directory: Path) -> None:
        store = SqliteEventStore(directory / "store.db", synchronous="FULL")
        try:
            expected: ExpectedRevision = NO_STREAM
            for event in events:
                expected = store.append(STREAM, [event], expected).next_expected_revision
        finally:
            store.close()

    return body


def raw_single(rows: list[Row]) -> Callable[[Path], None]:
    """``BEGIN; INSERT; COMMIT`` per row on a bare connection."""

    def body(directory: Path) -> None:
        connection = raw_connection(directory / "raw.db")
        try:
            execute = connection.execute
            for row in rows:
                execute("BEGIN")
                execute(INSERT, row)
                execute("COMMIT")
        finally:
            connection.close()

    return body


def store_batch(events: list[NewEvent], batch: int) -> Callable[[Path], None]:
    """One ``append`` call per ``batch`` events, each with the exact expected revision."""

    def body(directory: Path) -> None:
        store = SqliteEventStore(directory / "store.db", synchronous="FULL")
        try:
            expected: ExpectedRevision = NO_STREAM
            for start in range(0, len(events), batch):
                chunk = events[start : start + batch]
                expected = store.append(STREAM, chunk, expected).next_expected_revision
        finally:
            store.close()

    return body


def raw_batch(rows: list[Row], batch: int) -> Callable[[Path], None]:
    """``BEGIN; executemany(INSERT); COMMIT`` per ``batch`` rows on a bare connection."""

    def body(directory: Path) -> None:
        connection = raw_connection(directory / "raw.db")
        try:
            for start in range(0, len(rows), batch):
                connection.execute("BEGIN")
                connection.executemany(INSERT, rows[start : start + batch])
                connection.execute("COMMIT")
        finally:
            connection.close()

    return body


def _check_same_rows(events: list[NewEvent]) -> None:
    """Both sides write the same rows: compare what each leaves in its file."""
    with tempfile.TemporaryDirectory(prefix="decider-bench-") as directory:
        store_single(events)(Path(directory))
        raw_single(_rows(events))(Path(directory))
        query = "SELECT stream, revision, event_id, type, data, metadata FROM events"
        with (
            sqlite3.connect(Path(directory) / "store.db") as a,
            sqlite3.connect(Path(directory) / "raw.db") as b,
        ):
            if a.execute(query).fetchall() != b.execute(query).fetchall():
                raise AssertionError("the store and the raw baseline wrote different rows")


def measure_raw_single(calls: int, rounds: int) -> float:
    """``R``: raw single-row INSERT + COMMIT per second (median of ``rounds`` rounds)."""
    rows = _rows(sample_events(calls))
    run = _in_fresh_dir(raw_single(rows))
    return calls / statistics.median(timed(run) for _ in range(rounds))


def measure(calls: int, batches: int, rounds: int, batch: int = 100) -> list[Result]:
    """Figure 3: store append rates over raw SQLite rates, one event and ``batch`` per call."""
    events = sample_events(max(calls, batches * batch))
    _check_same_rows(events[:5])
    single_events = events[:calls]
    subject, baseline = compare_median(
        _in_fresh_dir(store_single(single_events)),
        _in_fresh_dir(raw_single(_rows(single_events))),
        rounds,
    )
    batch_events = events[: batches * batch]
    batch_subject, batch_baseline = compare_median(
        _in_fresh_dir(store_batch(batch_events, batch)),
        _in_fresh_dir(raw_batch(_rows(batch_events), batch)),
        rounds,
    )
    durability = "WAL, synchronous=FULL, fresh file"
    return [
        Figure(
            key="append_single",
            title="3a. SQLite append, 1 event/call",
            unit="appends/s",
            rate=calls / subject,
            baseline=f"raw sqlite3 BEGIN+INSERT+COMMIT of the same row ({durability}) = R",
            baseline_rate=calls / baseline,
            ratio=baseline / subject,
            ratio_is="store rate / raw rate (higher is better)",
            target=Target(">=", 0.7),
            extra={
                "calls_per_round": calls,
                "rounds": rounds,
                "estimator": "median of interleaved rounds, each on fresh files",
            },
        ),
        Figure(
            key="append_batch",
            title=f"3b. SQLite append, {batch} events/call",
            unit="events/s",
            rate=len(batch_events) / batch_subject,
            baseline=f"raw sqlite3 BEGIN+executemany+COMMIT of the same rows ({durability})",
            baseline_rate=len(batch_events) / batch_baseline,
            ratio=batch_baseline / batch_subject,
            ratio_is="store rate / raw rate (higher is better)",
            target=Target(">=", 0.7),
            extra={
                "calls_per_round": batches,
                "events_per_call": batch,
                "rounds": rounds,
                "estimator": "median of interleaved rounds, each on fresh files",
            },
        ),
    ]
