"""The PostgreSQL store: the shared contract in a fresh schema per test, and what is its own."""

from __future__ import annotations

import gc
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, cast

import attrs
import psycopg
import pytest
from psycopg import sql

from decider.stores import (
    ANY,
    NO_STREAM,
    AppendResult,
    CaughtUp,
    Filter,
    Partitions,
    RecordedEvent,
    StoreError,
    StoreUnavailable,
    StreamAppend,
    WrongExpectedVersion,
)
from decider.stores.contract import EventStoreContract, new_events, take, wait_until
from decider.stores.postgres import PostgresEventStore
from decider.stores.postgres._sql import Row, decode, read_all_sql
from tests.support.postgres import PG_URI, fresh_schema, fresh_store, store_fixture


class TestPostgresStore(EventStoreContract):
    store = store_fixture()


@pytest.fixture
def store() -> Iterator[PostgresEventStore]:
    with fresh_store() as opened:
        yield opened


def _raw() -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(PG_URI, autocommit=True, connect_timeout=10)


def _show(store: PostgresEventStore, setting: str) -> object:
    connection, _ = store._connection()
    [(value,)] = connection.execute(sql.SQL("SHOW {}").format(sql.Identifier(setting))).fetchall()
    return value


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _listeners() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("decider-pg-listen-")]


def test_schemas_isolate_logs_and_checkpoints() -> None:
    with fresh_store() as first, fresh_store() as second:
        first.append("s", new_events(2), NO_STREAM)
        first.save_checkpoint("proc", 2)
        assert second.read_all() == [] and second.read_stream("s") == []
        assert second.load_checkpoint("proc") is None
        result = second.append("s", new_events(1), NO_STREAM)
        assert result.next_expected_revision == 0
        assert [e.position for e in second.read_all()] == [result.position]
        assert [e.revision for e in first.read_all()] == [0, 1]


def test_reopening_keeps_events_positions_and_checkpoints() -> None:
    with fresh_schema() as schema:
        store = PostgresEventStore(PG_URI, schema=schema)
        store.append("a", new_events(3), NO_STREAM)
        store.append_batch([], checkpoints=[("proc", 2)])
        before = store.read_all()
        store.close()
        reopened = PostgresEventStore(PG_URI, schema=schema)
        try:
            assert reopened.read_all() == before
            assert reopened.load_checkpoint("proc") == 2
            assert reopened.append("a", new_events(1), 2).position > before[-1].position
        finally:
            reopened.close()


def test_opening_a_new_schema_from_many_connections_at_once() -> None:
    with fresh_schema() as schema:
        stores: list[PostgresEventStore] = []
        errors: list[BaseException] = []
        barrier = threading.Barrier(6)

        def open_one() -> None:
            try:
                barrier.wait(10)
                stores.append(PostgresEventStore(PG_URI, schema=schema))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=open_one) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        try:
            assert errors == [] and len(stores) == 6
            stores[0].append("s", new_events(1), NO_STREAM)
            assert all(len(s.read_stream("s")) == 1 for s in stores)
        finally:
            for opened in stores:
                opened.close()


@pytest.mark.parametrize("level", ["off", "LOCAL", "on"])
def test_synchronous_commit_is_applied_on_every_connection(level: str) -> None:
    with fresh_store(synchronous_commit=level) as store:
        assert store.synchronous_commit == level.lower()
        assert _show(store, "synchronous_commit") == level.lower()
        assert _show(store, "TimeZone") == "UTC"
        seen: list[object] = []
        thread = threading.Thread(target=lambda: seen.append(_show(store, "synchronous_commit")))
        thread.start()
        thread.join(10)
        assert seen == [level.lower()]


def test_full_durability_is_the_default(store: PostgresEventStore) -> None:
    assert store.synchronous_commit == "on"
    assert _show(store, "synchronous_commit") == "on"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"synchronous_commit": "sometimes"}, "synchronous_commit must be one of"),
        ({"schema": ""}, "schema must be"),
        ({"schema": "x" * 64}, "schema must be"),
    ],
)
def test_bad_settings_are_rejected(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PostgresEventStore(PG_URI, **kwargs)


def test_a_malformed_conninfo_is_rejected() -> None:
    with pytest.raises(ValueError, match="malformed PostgreSQL conninfo"):
        PostgresEventStore("postgresql://localhost/db?durability=full")


def test_an_unreachable_server_is_unavailable_and_named_without_password() -> None:
    port = _unused_port()
    uri = f"postgresql://postgres:s3cret@127.0.0.1:{port}/test?connect_timeout=5"
    with pytest.raises(StoreUnavailable) as caught:
        PostgresEventStore(uri, schema="decider_x")
    message = str(caught.value)
    assert f"postgresql://postgres@127.0.0.1:{port}/test?schema=decider_x" in message
    assert "s3cret" not in message


def test_a_missing_database_is_unavailable_and_named() -> None:
    base = PG_URI.rsplit("/", 1)[0]
    with pytest.raises(StoreUnavailable, match="decider_no_such_db") as caught:
        PostgresEventStore(f"{base}/decider_no_such_db")
    assert "does not exist" in str(caught.value)


def test_the_connect_timeout_of_the_conninfo_is_kept() -> None:
    with fresh_schema() as schema:
        store = PostgresEventStore(f"{PG_URI}?connect_timeout=3", schema=schema)
        try:
            connection, _ = store._connection()
            assert connection.info.get_parameters()["connect_timeout"] == "3"
            assert "connect_timeout" not in store._connect_kwargs
        finally:
            store.close()
        defaulted = PostgresEventStore(PG_URI, schema=schema)
        try:
            assert defaulted._connect_kwargs["connect_timeout"] == 10
        finally:
            defaulted.close()


def test_sql_errors_are_store_errors_naming_the_store(store: PostgresEventStore) -> None:
    drop = sql.SQL("DROP TABLE {}.events").format(sql.Identifier(store.schema))
    with _raw() as raw:
        raw.execute(drop)
    with pytest.raises(StoreError, match=store.schema) as caught:
        store.append("s", new_events(1), ANY)
    assert not isinstance(caught.value, StoreUnavailable)
    assert "events" in str(caught.value)


def test_a_killed_connection_fails_once_then_reconnects(store: PostgresEventStore) -> None:
    store.append("s", new_events(1), NO_STREAM)
    connection, _ = store._connection()
    with _raw() as raw:
        raw.execute("SELECT pg_terminate_backend(%s)", (connection.info.backend_pid,))
    with pytest.raises(StoreUnavailable, match=store.schema):
        store.read_stream("s")
    assert len(store.read_stream("s")) == 1
    assert store.append("s", new_events(1), 0).next_expected_revision == 1


def test_a_commit_behind_an_older_transaction_is_read_only_once_it_ends(
    store: PostgresEventStore,
) -> None:
    """Readers read below the oldest transaction in flight: an append that commits while an
    older transaction (holding an id) runs is hidden from other readers until that one ends;
    the appending store's own read waits for it (read your writes)."""
    store.append("before", new_events(1), NO_STREAM)
    own: list[list[str]] = []
    reader = PostgresEventStore(PG_URI, schema=store.schema)
    try:
        with _raw() as raw:
            raw.execute("BEGIN")
            raw.execute("SELECT pg_current_xact_id()")
            store.append("late", new_events(1), ANY)  # commits, returns at once
            own_read = threading.Thread(
                target=lambda: own.append([e.stream for e in store.read_all()])
            )
            own_read.start()
            assert len(store.read_stream("late")) == 1  # committed (read_stream: no horizon)
            assert [e.stream for e in reader.read_all()] == ["before"]
            assert reader._head() == store.read_stream("before")[0].position
            own_read.join(0.3)  # a negative check: it must still be waiting
            assert own_read.is_alive() and own == [], "the writer's own read waits"
            raw.execute("COMMIT")
        own_read.join(10)
        assert own == [["before", "late"]]
        assert [e.stream for e in reader.read_all()] == ["before", "late"]
    finally:
        reader.close()


def test_a_schema_of_the_lock_based_version_is_migrated_on_open() -> None:
    """A schema created by the version that drew positions from an identity column under an
    advisory lock: opening drops the identity, keeps every event, position and checkpoint,
    and numbers new events above the old ones."""
    with fresh_schema() as schema, _raw() as raw:
        s = sql.Identifier(schema).as_string(raw)
        raw.execute(
            f"""
CREATE SCHEMA {s};
CREATE TABLE {s}.events (
    position    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream      text        NOT NULL,
    revision    bigint      NOT NULL,
    event_id    uuid        NOT NULL,
    type        text        NOT NULL,
    data        bytea       NOT NULL,
    metadata    bytea       NOT NULL,
    recorded_at timestamptz NOT NULL,
    UNIQUE (stream, revision)
);
CREATE INDEX events_by_stream_id ON {s}.events (stream, event_id);
CREATE TABLE {s}.checkpoints (name text PRIMARY KEY, position bigint NOT NULL);
INSERT INTO {s}.events (stream, revision, event_id, type, data, metadata, recorded_at)
SELECT 'old', n, gen_random_uuid(), 'Old', '\\x7b7d', '', now()
FROM generate_series(0, 2) AS n;
INSERT INTO {s}.checkpoints VALUES ('proc', 2);
"""
        )
        store = PostgresEventStore(PG_URI, schema=schema)
        try:
            old = store.read_all()
            assert [(e.stream, e.position) for e in old] == [("old", 1), ("old", 2), ("old", 3)]
            assert store.load_checkpoint("proc") == 2
            result = store.append("old", new_events(1), 2)
            assert result.next_expected_revision == 3 and result.position > 3
            assert store.read_all(after_position=2) == [*old[2:], *store.read_stream("old", 3)]
            # Their partition keys are unknown: a read of any partitions gets them.
            assert [e.partition_key for e in old] == [None] * 3
            none = Filter(partitions=Partitions(count=2, held=frozenset()))
            assert store.read_all(filter=none)[:3] == old
        finally:
            store.close()
        reopened = PostgresEventStore(PG_URI, schema=schema)  # a migrated schema opens as is
        reopened.close()


def test_a_minority_of_partitions_is_read_from_the_index_as_by_the_plain_walk(
    store: PostgresEventStore,
) -> None:
    # Events of many keys (and some of none), in several transactions, some of a system stream.
    for batch in range(6):
        events = [
            attrs.evolve(e, partition_key=None if n % 7 == 3 else (batch * 31 + n * 17) % 97)
            for n, e in enumerate(new_events(20))
        ]
        store.append(f"wf-{batch}", events[:15], ANY)
        store.append(f"$sys-{batch}", events[15:], ANY)
    every = store.read_all()
    positions = [None, every[10].position, every[57].position, every[-1].position]
    cases = [({1}, True), ({0, 5, 9}, True), ({2, 3}, False), ({15}, False), (set(), True)]
    for held, unknown in cases:
        for include_system in (False, True):
            flt = Filter(
                include_system=include_system,
                partitions=Partitions(16, frozenset(held), unknown=unknown),
            )
            plain = read_all_sql(store.schema, flt)
            assert store._read_sql(flt).branches == len(held) + unknown  # merged
            for after in positions:
                for limit in (None, 1, 7, 500):
                    with _raw() as raw:
                        rows = raw.execute(plain.statement, plain.args(after or 0, limit))
                        expected = [decode(cast(Row, row)) for row in rows]
                    assert store.read_all(after, limit, flt) == expected, (held, after, limit)
    # A majority of them is read by the plain walk.
    half = Filter(partitions=Partitions(4, frozenset({0, 1})))
    assert store._read_sql(half) == read_all_sql(store.schema, half)


def test_recorded_at_is_stored_as_utc(store: PostgresEventStore) -> None:
    store.append("s", new_events(1), NO_STREAM)
    table = sql.SQL("SELECT recorded_at AT TIME ZONE 'UTC' FROM {}.events").format(
        sql.Identifier(store.schema)
    )
    with _raw() as raw:
        raw.execute("SET TIME ZONE 'Europe/Paris'")
        [(stored,)] = raw.execute(table).fetchall()
    [event] = store.read_all()
    assert event.recorded_at.replace(tzinfo=None) == stored


def test_a_subscription_sees_another_store_object_append(store: PostgresEventStore) -> None:
    writer = PostgresEventStore(PG_URI, schema=store.schema)
    try:
        with store.subscribe() as subscription:
            assert take(subscription, 1) == [CaughtUp(position=None)]
            events = new_events(2)
            writer.append("s", events, ANY)
            items = take(subscription, 2)
        assert [i.id for i in items if isinstance(i, RecordedEvent)] == [e.id for e in events]
    finally:
        writer.close()


def test_the_listener_reconnects_after_its_connection_is_killed(
    store: PostgresEventStore,
) -> None:
    writer = PostgresEventStore(PG_URI, schema=store.schema)
    try:
        with store.subscribe() as subscription:
            assert take(subscription, 1) == [CaughtUp(position=None)]
            listener = store._listener
            assert listener is not None
            killed = listener.backend_pid
            with _raw() as raw:
                raw.execute("SELECT pg_terminate_backend(%s)", (killed,))
            events = new_events(1)
            writer.append("s", events, ANY)  # made while the listener may be deaf
            assert [i.id for i in take(subscription, 1) if isinstance(i, RecordedEvent)] == [
                events[0].id
            ]
            wait_until(lambda: listener.backend_pid not in (None, killed))
            more = new_events(1)
            writer.append("s", more, ANY)
            assert [i.id for i in take(subscription, 1) if isinstance(i, RecordedEvent)] == [
                more[0].id
            ]
    finally:
        writer.close()


def test_close_stops_the_listener_thread() -> None:
    with fresh_store() as store:
        before = _listeners()
        store.subscribe().stop()
        store.subscribe().stop()
        started = [t for t in _listeners() if t not in before]
        assert len(started) == 1, "one listener per store, started by the first subscription"
        store.close()
        assert not started[0].is_alive()


def test_a_closed_store_refuses_work(store: PostgresEventStore) -> None:
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.read_all()
    with pytest.raises(StoreError, match="closed"):
        store.append("s", new_events(1), ANY)
    with pytest.raises(StoreError, match="closed"):
        store.subscribe()


def test_threads_that_end_give_their_connections_back(store: PostgresEventStore) -> None:
    for _ in range(5):
        thread = threading.Thread(target=lambda: store.append("s", new_events(1), ANY))
        thread.start()
        thread.join(10)
        del thread
    gc.collect()
    # The constructing thread's, and one kept for the next thread, which each took in turn.
    assert len(store._connections) == 2 and store.connections_opened == 2
    assert len(store.read_stream("s")) == 5


def test_an_any_append_of_many_events_is_idempotent(store: PostgresEventStore) -> None:
    events = new_events(1200)
    first = store.append("s", events, ANY)
    assert store.append("s", events, ANY) == first
    assert len(store.read_stream("s")) == 1200
    positions = [e.position for e in store.read_stream("s")]
    assert positions == list(range(positions[0], positions[0] + 1200))


@pytest.mark.parametrize("same_id", [True, False], ids=["same-id", "other-id"])
def test_an_append_that_loses_its_revision_race_takes_the_full_path(
    store: PostgresEventStore, same_id: bool
) -> None:
    """A plainly met append is one statement; when a concurrent writer commits the same revision
    first, that statement fails on the ``(stream, revision)`` key and the full path decides: the
    same event is the stored result (idempotent), another is a conflict. Nothing is doubled."""
    [mine] = new_events(1)
    theirs = mine if same_id else new_events(1)[0]
    outcome: list[object] = []
    with _raw() as raw, _raw() as watcher:
        raw.execute("BEGIN")
        raw.execute(
            store._sql.insert_one,
            (
                0,
                "race",
                0,
                theirs.id,
                theirs.type,
                theirs.data,
                theirs.metadata,
                datetime.now(UTC),
                None,
            ),
        )

        def append() -> None:
            try:
                outcome.append(store.append("race", [mine], NO_STREAM))
            except StoreError as exc:
                outcome.append(exc)

        appender = threading.Thread(target=append)
        appender.start()
        # The store's statement waits on the uncommitted row's key; then the other one commits.
        wait_until(  # (watched from outside the transaction: its statistics are a snapshot)
            lambda: (
                watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND datname = current_database()"
                    " AND query LIKE %s",
                    (f"%{store.schema}%",),
                ).fetchall()[0][0]
                == 1
            ),
            timeout=10,
        )
        raw.execute("COMMIT")
        appender.join(10)
    [result] = outcome
    stored = store.read_stream("race")
    assert [e.id for e in stored] == [theirs.id]
    if same_id:
        assert isinstance(result, AppendResult)
        assert (result.next_expected_revision, result.position) == (0, stored[0].position)
    else:
        assert isinstance(result, WrongExpectedVersion), result


def test_a_batch_of_exact_revisions_reads_nothing_and_builds_no_arrays(
    store: PostgresEventStore,
) -> None:
    """Appends of an exact revision (or ``NO_STREAM``) are checked by the table's constraints:
    no read of the streams' last revisions, and the rows go as binary one-row inserts (no
    arrays); only the transaction's id is read, for the positions."""
    store.append("a", new_events(1), NO_STREAM)
    connection, _ = store._connection()
    executed: list[str] = []
    execute = connection.execute

    def recording(query: Any, *args: Any, **kwargs: Any) -> Any:
        executed.append(str(query))
        return execute(query, *args, **kwargs)

    connection.execute = recording  # type: ignore[method-assign]
    try:
        results = store.append_batch(
            [
                StreamAppend("a", new_events(3), 0),
                StreamAppend("b", new_events(2), NO_STREAM),
                StreamAppend("c", new_events(1), NO_STREAM),
            ],
            checkpoints=[("proc", 7)],
        )
    finally:
        del connection.execute
    assert executed == ["BEGIN", store._sql.own_xid, "COMMIT"]
    assert [r.next_expected_revision for r in results] == [3, 1, 0]
    for result, stream in zip(results, "abc", strict=True):
        assert store.read_stream(stream)[-1].position == result.position
    log = store.read_all()
    assert [(e.stream, e.revision) for e in log] == [
        ("a", 0),
        ("a", 1),
        ("a", 2),
        ("a", 3),
        ("b", 0),
        ("b", 1),
        ("c", 0),
    ]
    assert store.load_checkpoint("proc") == 7


@pytest.mark.parametrize("same_id", [True, False], ids=["same-id", "other-id"])
def test_a_batch_that_loses_its_revision_race_is_run_again_reading_first(
    store: PostgresEventStore, same_id: bool
) -> None:
    """A batch's exact-revision append that a concurrent writer beats to the revision fails on
    the ``(stream, revision)`` key; the transaction is run again, reading the stream: the same
    event is the stored result (idempotent), another is a conflict. Nothing is doubled."""
    [mine] = new_events(1)
    theirs = mine if same_id else new_events(1)[0]
    outcome: list[object] = []
    with _raw() as raw, _raw() as watcher:
        raw.execute("BEGIN")
        raw.execute(
            store._sql.insert_one,
            (
                0,
                "race",
                0,
                theirs.id,
                theirs.type,
                theirs.data,
                theirs.metadata,
                datetime.now(UTC),
                None,
            ),
        )

        def append() -> None:
            try:
                outcome.append(
                    store.append_batch(
                        [
                            StreamAppend("race", [mine], NO_STREAM),
                            StreamAppend("other", new_events(1), NO_STREAM),
                        ]
                    )
                )
            except StoreError as exc:
                outcome.append(exc)

        appender = threading.Thread(target=append)
        appender.start()
        wait_until(
            lambda: (
                watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND datname = current_database()"
                    " AND query LIKE %s",
                    (f"%{store.schema}%",),
                ).fetchall()[0][0]
                == 1
            ),
            timeout=10,
        )
        raw.execute("COMMIT")
        appender.join(10)
    [result] = outcome
    stored = store.read_stream("race")
    assert [e.id for e in stored] == [theirs.id]
    if same_id:
        assert isinstance(result, list)
        assert (result[0].next_expected_revision, result[0].position) == (0, stored[0].position)
        assert len(store.read_stream("other")) == 1
    else:
        assert isinstance(result, WrongExpectedVersion)
        assert (result.expected, result.actual) == (NO_STREAM, 0)
        assert store.read_stream("other") == []


def test_a_batch_expecting_a_revision_not_yet_stored_is_a_conflict(
    store: PostgresEventStore,
) -> None:
    """The first try's guard (the expected revision's row) refuses; the run again reads the
    stream and names its actual revision; nothing of the batch is written."""
    store.append("a", new_events(2), NO_STREAM)
    with pytest.raises(WrongExpectedVersion) as caught:
        store.append_batch(
            [StreamAppend("b", new_events(1), NO_STREAM), StreamAppend("a", new_events(2), 4)]
        )
    assert (caught.value.stream, caught.value.expected, caught.value.actual) == ("a", 4, 1)
    assert store.read_stream("b") == []
    assert len(store.read_stream("a")) == 2
