"""The PostgreSQL store: the shared contract in a fresh schema per test, and what is its own."""

from __future__ import annotations

import gc
import socket
import threading
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from decider.stores import ANY, NO_STREAM, CaughtUp, RecordedEvent, StoreError, StoreUnavailable
from decider.stores import _postgres_sql as pgsql
from decider.stores.contract import EventStoreContract, new_events, take, wait_until
from decider.stores.postgres import PostgresEventStore
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
        assert (result.next_expected_revision, result.position) == (0, 1)
        assert [e.position for e in first.read_all()] == [1, 2]


def test_reopening_keeps_events_positions_and_checkpoints() -> None:
    with fresh_schema() as schema:
        store = PostgresEventStore(PG_URI, schema=schema)
        store.append("a", new_events(3), NO_STREAM)
        store.append_batch([], checkpoint=("proc", 2))
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
def test_bad_settings_are_rejected(kwargs: dict[str, str], message: str) -> None:
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


def test_positions_follow_commit_order(store: PostgresEventStore) -> None:
    """An append that starts while another transaction holds the append lock waits for it,
    so it cannot commit a position past a position that is not visible yet."""
    store.append("before", new_events(1), NO_STREAM)
    lock = f"pg_advisory_xact_lock({pgsql.LOCK_CLASS}, {pgsql.lock_key(store.schema)})"
    results: list[int] = []
    with _raw() as raw, _raw() as probe:
        raw.execute("BEGIN")
        raw.execute(f"SELECT {lock}")
        appender = threading.Thread(
            target=lambda: results.append(store.append("late", new_events(1), ANY).position)
        )
        appender.start()

        def waiting_for_the_lock() -> bool:
            # A connection of its own: a transaction sees one snapshot of pg_stat_activity.
            rows = probe.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'"
                " AND query LIKE %s",
                (f"%{lock}%",),
            ).fetchall()
            return bool(rows[0][0])

        wait_until(waiting_for_the_lock)
        assert results == [] and [e.stream for e in store.read_all()] == ["before"]
        raw.execute("COMMIT")
    appender.join(10)
    assert len(results) == 1
    assert [e.stream for e in store.read_all()] == ["before", "late"]


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
    assert len(store._connections) == 1  # the constructing thread's
    assert len(store.read_stream("s")) == 5


def test_an_any_append_of_many_events_is_idempotent(store: PostgresEventStore) -> None:
    events = new_events(1200)
    first = store.append("s", events, ANY)
    assert store.append("s", events, ANY) == first
    assert len(store.read_stream("s")) == 1200
    assert [e.position for e in store.read_stream("s")] == list(range(1, 1201))
