"""Figures 3c-3g: ``PostgresEventStore.append`` against raw psycopg with the same durability.

The PostgreSQL twin of :mod:`benchmarks.append`. Both sides write the same rows (a
traffic-fine ``Sent`` event with its metadata) into the store's own table definition, each in
a fresh schema of its own (:func:`benchmarks.pg.fresh_schema`, dropped after the round), with
the same ``synchronous_commit`` (``on``: every commit waits for its WAL flush). The subject
appends through the store with an exact expected revision: per call one statement in its own
transaction (the revision check, the insert and the lock on its id), one round trip (its
``NOTIFY`` goes from another thread, coalesced). The baseline is what a hand-written psycopg
program does on an autocommit connection: ``BEGIN; INSERT; COMMIT``, one round trip each (or
``executemany`` for a batch). Creating the schema and connecting are not timed. The baseline's
single-append rate is ``R_pg``, the yardstick of the PostgreSQL end-to-end figure.

3e-3g: 1, 4 and 16 writer threads at once, each appending single events to a stream of its own
(store: one store object shared by the threads, a connection per thread; raw: a connection per
thread). Here the baseline is the cheapest like-for-like a psycopg program has: one autocommit
``INSERT`` per row, its own transaction (the same WAL flush), one round trip, as the store's
append is. The target: at 16 writers the store keeps >= 0.6x the raw rate, and its rate rises
with writers (the old schema-wide lock kept it flat).
"""

from __future__ import annotations

import itertools
import statistics
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from benchmarks.append import STREAM, sample_events
from benchmarks.harness import (
    Figure,
    Prepared,
    Result,
    Target,
    compare_median_prepared,
    timed,
)
from benchmarks.pg import CONNECT_TIMEOUT, fresh_schema, redact
from decider.stores import NO_STREAM, ExpectedRevision, NewEvent
from decider.stores.postgres import PostgresEventStore
from decider.stores.postgres._sql import Statements

Row = tuple[int, str, int, Any, str, bytes, bytes, datetime]
Side = Callable[[str], AbstractContextManager[Callable[[], None]]]

_COLUMNS = "stream, revision, event_id, type, data, metadata"


def _rows(events: list[NewEvent]) -> list[Row]:
    now = datetime.now(UTC)
    return [
        (0, STREAM, revision, e.id, e.type, e.data, e.metadata, now)
        for revision, e in enumerate(events)
    ]


def _insert(schema: str) -> sql.Composed:
    # The table's position is the transaction id shifted, plus the row's index in it.
    return sql.SQL(
        "INSERT INTO {}.events"
        " (position, stream, revision, event_id, type, data, metadata, recorded_at)"
        " VALUES ((pg_current_xact_id()::text::bigint << 20)"
        " + %s, %s, %s, %s, %s, %s, %s, %s)"
    ).format(sql.Identifier(schema))


def raw_connection(conninfo: str, schema: str, synchronous_commit: str) -> psycopg.Connection[Any]:
    """An autocommit connection with the store's tables created in ``schema``."""
    connection = psycopg.connect(conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
    try:
        connection.execute(Statements.for_schema(schema).create)
        connection.execute(
            sql.SQL("SET synchronous_commit TO {}").format(sql.Literal(synchronous_commit))
        )
    except BaseException:
        connection.close()
        raise
    return connection


def store_side(conninfo: str, events: list[NewEvent], batch: int, synchronous_commit: str) -> Side:
    """Appends through the store, ``batch`` events per call, each with the exact revision."""

    @contextmanager
    def side(schema: str) -> Iterator[Callable[[], None]]:
        store = PostgresEventStore(conninfo, schema=schema, synchronous_commit=synchronous_commit)

        def single() -> None:
            expected: ExpectedRevision = NO_STREAM
            for event in events:
                expected = store.append(STREAM, [event], expected).next_expected_revision

        def batched() -> None:
            expected: ExpectedRevision = NO_STREAM
            for start in range(0, len(events), batch):
                chunk = events[start : start + batch]
                expected = store.append(STREAM, chunk, expected).next_expected_revision

        try:
            yield single if batch == 1 else batched
        finally:
            store.close()

    return side


def raw_side(conninfo: str, rows: list[Row], batch: int, synchronous_commit: str) -> Side:
    """``BEGIN; INSERT; COMMIT`` per row (or ``executemany`` per ``batch`` rows), raw psycopg."""

    @contextmanager
    def side(schema: str) -> Iterator[Callable[[], None]]:
        connection = raw_connection(conninfo, schema, synchronous_commit)
        insert = _insert(schema).as_string(connection)

        def single() -> None:
            execute = connection.execute
            for row in rows:
                execute("BEGIN")
                execute(insert, row)
                execute("COMMIT")

        def batched() -> None:
            cursor = connection.cursor()
            for start in range(0, len(rows), batch):
                connection.execute("BEGIN")
                chunk = rows[start : start + batch]
                cursor.executemany(insert, [(i, *row[1:]) for i, row in enumerate(chunk)])
                connection.execute("COMMIT")

        try:
            yield single if batch == 1 else batched
        finally:
            connection.close()

    return side


def in_fresh_schema(conninfo: str, side: Side) -> Prepared:
    """``side`` set up in a new schema, which is dropped once the side is done."""

    @contextmanager
    def prepared() -> Iterator[Callable[[], None]]:
        with fresh_schema(conninfo) as schema, side(schema) as work:
            yield work

    return prepared


def _stored_rows(conninfo: str, schema: str) -> list[tuple[Any, ...]]:
    query = sql.SQL(f"SELECT {_COLUMNS} FROM {{}}.events ORDER BY revision").format(
        sql.Identifier(schema)
    )
    with psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT) as connection:
        return connection.execute(query).fetchall()


def _check_same_rows(conninfo: str, events: list[NewEvent], synchronous_commit: str) -> None:
    """Both sides write the same rows: compare what each leaves in its schema."""
    with fresh_schema(conninfo) as a, fresh_schema(conninfo) as b:
        with store_side(conninfo, events, 1, synchronous_commit)(a) as work:
            work()
        with raw_side(conninfo, _rows(events), 1, synchronous_commit)(b) as work:
            work()
        if _stored_rows(conninfo, a) != _stored_rows(conninfo, b):
            raise AssertionError("the store and the raw baseline wrote different rows")


def _server_version(conninfo: str) -> str:
    with psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT) as connection:
        (version,) = connection.execute("SHOW server_version").fetchone() or ("?",)
        return str(version).split()[0]


def measure_raw_single(
    conninfo: str, calls: int, rounds: int, synchronous_commit: str = "on"
) -> float:
    """``R_pg``: raw single-row ``BEGIN; INSERT; COMMIT`` per second (median of ``rounds``)."""
    rows = _rows(sample_events(calls))
    prepared = in_fresh_schema(conninfo, raw_side(conninfo, rows, 1, synchronous_commit))
    times = []
    for _ in range(rounds):
        with prepared() as work:
            times.append(timed(work))
    return calls / statistics.median(times)


def measure(
    conninfo: str,
    calls: int,
    batches: int,
    rounds: int,
    batch: int = 100,
    synchronous_commit: str = "on",
) -> list[Result]:
    """Figure 3c/3d: store append rates over raw psycopg rates, one event and ``batch`` per
    call."""
    events = sample_events(max(calls, batches * batch))
    _check_same_rows(conninfo, events[:5], synchronous_commit)
    single_events = events[:calls]
    subject, baseline = compare_median_prepared(
        in_fresh_schema(conninfo, store_side(conninfo, single_events, 1, synchronous_commit)),
        in_fresh_schema(conninfo, raw_side(conninfo, _rows(single_events), 1, synchronous_commit)),
        rounds,
    )
    batch_events = events[: batches * batch]
    batch_subject, batch_baseline = compare_median_prepared(
        in_fresh_schema(conninfo, store_side(conninfo, batch_events, batch, synchronous_commit)),
        in_fresh_schema(
            conninfo, raw_side(conninfo, _rows(batch_events), batch, synchronous_commit)
        ),
        rounds,
    )
    version = _server_version(conninfo)
    durability = f"synchronous_commit={synchronous_commit}, store's table, fresh schema"
    common = {
        "rounds": rounds,
        "estimator": "median of interleaved rounds, each in a fresh schema (set-up not timed)",
        "server": redact(conninfo),
        "server_version": version,
        "synchronous_commit": synchronous_commit,
    }
    return [
        Figure(
            key="append_pg_single",
            title="3c. PostgreSQL append, 1 event/call",
            unit="appends/s",
            rate=calls / subject,
            baseline=f"raw psycopg BEGIN+INSERT+COMMIT of the same row ({durability}) = R_pg",
            baseline_rate=calls / baseline,
            ratio=baseline / subject,
            ratio_is="store rate / raw rate (higher is better)",
            note=(
                f"median ms per append: store {1000 * subject / calls:.3g},"
                f" raw {1000 * baseline / calls:.3g} (PostgreSQL {version})"
            ),
            extra={"calls_per_round": calls, **common},
        ),
        Figure(
            key="append_pg_batch",
            title=f"3d. PostgreSQL append, {batch} events/call",
            unit="events/s",
            rate=len(batch_events) / batch_subject,
            baseline=f"raw psycopg BEGIN+executemany+COMMIT of the same rows ({durability})",
            baseline_rate=len(batch_events) / batch_baseline,
            ratio=batch_baseline / batch_subject,
            ratio_is="store rate / raw rate (higher is better)",
            note=(
                f"median ms per {batch}-event call: store {1000 * batch_subject / batches:.3g},"
                f" raw {1000 * batch_baseline / batches:.3g}"
            ),
            extra={"calls_per_round": batches, "events_per_call": batch, **common},
        ),
    ]


WRITERS = (1, 4, 16)
"""The writer counts of figures 3e-3g."""

CONCURRENT_TARGET = 0.6
"""At 16 writers the store keeps at least this share of the raw rate."""


def _run_writers(count: int, work: Callable[[int], None]) -> None:
    """``work(i)`` in ``count`` threads started together; re-raise the first failure."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def body(index: int) -> None:
        try:
            barrier.wait()
            work(index)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def concurrent_store_side(
    conninfo: str, events: list[NewEvent], writers: int, synchronous_commit: str
) -> Side:
    """``writers`` threads share one store; each appends its share of ``events`` one by one,
    with exact revisions, to a stream of its own (each thread's connection is opened by its
    first append, inside the timing: a few ms per round)."""

    @contextmanager
    def side(schema: str) -> Iterator[Callable[[], None]]:
        store = PostgresEventStore(conninfo, schema=schema, synchronous_commit=synchronous_commit)
        shares = [events[i::writers] for i in range(writers)]

        def writer(index: int) -> None:
            expected: ExpectedRevision = NO_STREAM
            stream = f"{STREAM}-{index}"
            for event in shares[index]:
                expected = store.append(stream, [event], expected).next_expected_revision

        try:
            yield lambda: _run_writers(writers, writer)
        finally:
            store.close()

    return side


def concurrent_raw_side(
    conninfo: str, events: list[NewEvent], writers: int, synchronous_commit: str
) -> Side:
    """``writers`` threads, a connection each: one autocommit ``INSERT`` per row (its own
    transaction, one round trip), raw psycopg."""

    @contextmanager
    def side(schema: str) -> Iterator[Callable[[], None]]:
        connections = [raw_connection(conninfo, schema, synchronous_commit) for _ in range(writers)]
        insert = _insert(schema).as_string(connections[0])
        now = datetime.now(UTC)
        shares = [
            [
                (0, f"{STREAM}-{i}", revision, e.id, e.type, e.data, e.metadata, now)
                for revision, e in enumerate(events[i::writers])
            ]
            for i in range(writers)
        ]

        def writer(index: int) -> None:
            execute = connections[index].execute
            for row in shares[index]:
                execute(insert, row)

        try:
            yield lambda: _run_writers(writers, writer)
        finally:
            for connection in connections:
                connection.close()

    return side


def measure_concurrent(
    conninfo: str,
    appends: int,
    rounds: int,
    writers: tuple[int, ...] = WRITERS,
    synchronous_commit: str = "on",
) -> list[Result]:
    """Figures 3e-3g: ``appends`` single-event appends per round, spread over 1, 4 and 16
    writer threads, store against raw psycopg (median of interleaved rounds)."""
    events = sample_events(appends)
    version = _server_version(conninfo)
    figures: list[Result] = []
    rates: list[float] = []
    for count in writers:
        subject, baseline = compare_median_prepared(
            in_fresh_schema(
                conninfo, concurrent_store_side(conninfo, events, count, synchronous_commit)
            ),
            in_fresh_schema(
                conninfo, concurrent_raw_side(conninfo, events, count, synchronous_commit)
            ),
            rounds,
        )
        rates.append(appends / subject)
        rising = all(a < b for a, b in itertools.pairwise(rates))
        figures.append(
            Figure(
                key=f"append_pg_writers_{count}",
                title=f"3{'efg'[writers.index(count)]}. PostgreSQL append, {count} writers",
                unit="appends/s",
                rate=appends / subject,
                baseline=(
                    f"raw psycopg autocommit INSERT, {count} connections"
                    f" (synchronous_commit={synchronous_commit})"
                ),
                baseline_rate=appends / baseline,
                ratio=baseline / subject,
                ratio_is="store rate / raw rate (higher is better)",
                target=Target(">=", CONCURRENT_TARGET) if count == max(writers) else None,
                note=(
                    f"{count} threads, one stream each, {appends} appends per round;"
                    f" store rate rising with writers so far: {rising} (PostgreSQL {version})"
                ),
                extra={
                    "writers": count,
                    "appends_per_round": appends,
                    "rounds": rounds,
                    "rising_with_writers": rising,
                    "server": redact(conninfo),
                    "server_version": version,
                    "synchronous_commit": synchronous_commit,
                },
            )
        )
    return figures
