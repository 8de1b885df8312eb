"""The PostgreSQL log never skips a late commit: concurrent writers, commits in any order.

Each append runs in a thread of its own and stops inside its transaction (after its rows are
inserted, its transaction id and positions drawn) at a gate: a test-only trigger that waits for
an advisory lock the test holds. Hypothesis chooses when each append starts, when it may
commit, when other transactions that hold an id begin and end, and when the reader reads; the
test drives that schedule step by step, waiting on conditions (a writer is at its gate), never
on time. The reader is a catch-up subscription of another store object (one that never writes,
so it never waits to read its own writes); it must deliver every committed event once, in
increasing positions. A reader that trusts positions alone misses events under such schedules
(:func:`test_a_position_only_reader_skips_a_late_commit`), so the property has teeth.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from decider.stores import ANY, RecordedEvent
from decider.stores.contract import new_events, wait_until
from decider.stores.postgres import PostgresEventStore
from decider.stores.protocol import Subscription
from tests.support.postgres import PG_URI, fresh_schema, gated_store

GATE_CLASS = 0x6F72_6431  # "ord1": the first key of the gates' advisory locks
_keys = itertools.count(1)

Action = tuple[str, int]


def _connect() -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(PG_URI, autocommit=True, connect_timeout=10)


@pytest.fixture(scope="module")
def reader(gated: PostgresEventStore) -> Iterator[PostgresEventStore]:
    """Another store object on the gated store's schema, that only reads."""
    store = PostgresEventStore(PG_URI, schema=gated.schema)
    yield store
    store.close()


@pytest.fixture(scope="module")
def gated() -> Iterator[PostgresEventStore]:
    """A store whose inserts into stream ``gate-<k>`` wait for advisory lock ``(GATE_CLASS, k)``."""
    with gated_store(
        f"PERFORM pg_advisory_xact_lock_shared({GATE_CLASS}, split_part(NEW.stream, '-', 2)::int);"
    ) as store:
        yield store


class Schedule:
    """Drives appends, id-holding transactions and a reader through one interleaving."""

    def __init__(self, store: PostgresEventStore, control: psycopg.Connection[tuple[object, ...]]):
        self.store = store
        self.control = control
        self.threads: dict[int, threading.Thread] = {}
        self.written: dict[int, list[uuid.UUID]] = {}
        self.holders: dict[int, psycopg.Connection[tuple[object, ...]]] = {}
        self.errors: list[BaseException] = []

    def start(self, key: int, size: int) -> None:
        """Begin an append of ``size`` events and wait until it is held at its gate."""
        self.control.execute("SELECT pg_advisory_lock(%s, %s)", (GATE_CLASS, key))
        events = new_events(size)
        self.written[key] = [e.id for e in events]

        def append() -> None:
            try:
                self.store.append(f"gate-{key}", events, ANY)
            except BaseException as exc:
                self.errors.append(exc)

        thread = threading.Thread(target=append, daemon=True)
        self.threads[key] = thread
        thread.start()
        wait_until(lambda: self._waiting(key))

    def release(self, key: int) -> None:
        """Let the append ``key`` commit (its call may still wait for older transactions)."""
        self.control.execute("SELECT pg_advisory_unlock(%s, %s)", (GATE_CLASS, key))
        wait_until(lambda: len(self.store.read_stream(f"gate-{key}")) > 0)

    def hold(self, key: int) -> None:
        """Begin a transaction that takes an id and writes nothing of the log."""
        holder = _connect()
        holder.execute("BEGIN")
        holder.execute("SELECT pg_current_xact_id()")
        self.holders[key] = holder

    def end(self, key: int) -> None:
        holder = self.holders.pop(key)
        holder.execute("COMMIT")
        holder.close()

    def finish(self) -> None:
        for key in list(self.holders):
            self.end(key)
        for thread in self.threads.values():
            thread.join(30)
        assert not self.errors, self.errors

    def _waiting(self, key: int) -> bool:
        [(waiting,)] = self.control.execute(
            "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory'"
            " AND classid = %s AND objid = %s AND NOT granted)",
            (GATE_CLASS, key),
        ).fetchall()
        return bool(waiting)


def _drain(subscription: Subscription) -> list[RecordedEvent]:
    """What the subscription delivers without waiting."""
    got = []
    while (item := subscription.poll(0)) is not None:
        if isinstance(item, RecordedEvent):
            got.append(item)
    return got


@st.composite
def schedules(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    """Steps ``(action, index, size)``: every append starts, then is released; holders begin,
    then end; reads anywhere."""
    appends = draw(st.integers(2, 6))
    holders = draw(st.integers(0, 2))
    tokens = [("append", i) for i in range(appends) for _ in range(2)]
    tokens += [("holder", i) for i in range(holders) for _ in range(2)]
    order = draw(st.permutations(tokens))
    sizes = draw(st.lists(st.integers(1, 3), min_size=appends, max_size=appends))
    seen: set[tuple[str, int]] = set()
    steps = []
    for token in order:
        kind, index = token
        first = token not in seen
        seen.add(token)
        if kind == "append":
            steps.append(("start" if first else "release", index, sizes[index]))
        else:
            steps.append(("hold" if first else "end", index, 0))
        if draw(st.booleans()):
            steps.append(("read", 0, 0))
    return steps


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=schedules())
def test_a_catch_up_reader_never_misses_a_late_commit(
    gated: PostgresEventStore, reader: PostgresEventStore, steps: list[tuple[str, int, int]]
) -> None:
    store = gated
    head = store.read_all()
    after = head[-1].position if head else None
    keys = {index: next(_keys) for _, index, _ in steps}
    delivered: list[RecordedEvent] = []
    with _connect() as control, reader.subscribe(after) as subscription:
        schedule = Schedule(store, control)
        try:
            for action, index, size in steps:
                match action:
                    case "start":
                        schedule.start(keys[index], size)
                    case "release":
                        schedule.release(keys[index])
                    case "hold":
                        schedule.hold(index)
                    case "end":
                        schedule.end(index)
                    case "read":
                        delivered += _drain(subscription)
        finally:
            control.execute("SELECT pg_advisory_unlock_all()")
            schedule.finish()
        expected = {i for ids in schedule.written.values() for i in ids}

        def all_delivered() -> bool:
            delivered.extend(_drain(subscription))
            return len(delivered) >= len(expected)

        wait_until(all_delivered)
        assert not isinstance(subscription.poll(0), RecordedEvent)
    ids = [e.id for e in delivered]
    assert sorted(ids) == sorted(expected), "every committed event, each once"
    positions = [e.position for e in delivered]
    assert positions == sorted(set(positions)), "in increasing positions"
    assert positions == [e.position for e in store.read_all(after)]


def test_a_position_only_reader_skips_a_late_commit(
    gated: PostgresEventStore, reader: PostgresEventStore
) -> None:
    """The same gates, read by position alone (no horizon): a commit that lands after a higher
    position was read is skipped; the store's reader gets it."""
    store = gated
    table = sql.Identifier(store.schema).as_string(None) + ".events"
    head = store.read_all()
    after = head[-1].position if head else 0
    first, second = next(_keys), next(_keys)
    with _connect() as control, _connect() as naive, reader.subscribe(after) as subscription:
        schedule = Schedule(store, control)
        try:
            schedule.start(first, 1)  # the older transaction: lower id, lower positions
            schedule.start(second, 1)
            schedule.release(second)  # the younger one commits first
            cursor_rows = naive.execute(
                f"SELECT position FROM {table} WHERE position > %s ORDER BY position", (after,)
            ).fetchall()
            [(cursor,)] = cursor_rows
            assert _drain(subscription) == [], "the younger commit waits behind the older"
            schedule.release(first)
        finally:
            control.execute("SELECT pg_advisory_unlock_all()")
            schedule.finish()
        late = naive.execute(
            f"SELECT event_id FROM {table} WHERE position > %s ORDER BY position", (cursor,)
        ).fetchall()
        assert late == [], "the position-only reader moved past the late commit"
        got: list[RecordedEvent] = []

        def both() -> bool:
            got.extend(_drain(subscription))
            return len(got) >= 2

        wait_until(both)
        assert [e.id for e in got] == [*schedule.written[first], *schedule.written[second]]


def test_identity_positions_below_the_horizon_still_skip() -> None:
    """Why positions are built from transaction ids: with an identity position and the same
    horizon filter, a transaction that took its id first but drew its position last commits
    a position below one already read."""
    with fresh_schema() as schema, _connect() as a, _connect() as b, _connect() as reader:
        table = sql.Identifier(schema).as_string(a) + ".log"
        a.execute(f"CREATE SCHEMA {sql.Identifier(schema).as_string(a)}")
        a.execute(
            f"CREATE TABLE {table} (position bigint GENERATED ALWAYS AS IDENTITY,"
            " tx xid8 NOT NULL DEFAULT pg_current_xact_id())"
        )
        read = (
            f"SELECT position FROM {table} WHERE position > %s"
            " AND tx < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY position"
        )
        a.execute("BEGIN")
        a.execute("SELECT pg_current_xact_id()")  # A's id is the older
        b.execute("BEGIN")
        b.execute(f"INSERT INTO {table} DEFAULT VALUES")  # B draws position 1
        a.execute(f"INSERT INTO {table} DEFAULT VALUES")  # A draws position 2
        a.execute("COMMIT")
        assert reader.execute(read, (0,)).fetchall() == [(2,)]  # B is in flight: A is readable
        b.execute("COMMIT")
        assert reader.execute(read, (2,)).fetchall() == [], "B's position 1 is skipped"
