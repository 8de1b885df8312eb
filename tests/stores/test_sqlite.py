"""The SQLite store: the shared contract on a file and in memory, and what is SQLite's own."""

from __future__ import annotations

import gc
import sqlite3
import threading
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decider.stores import (
    ANY,
    NO_STREAM,
    AppendResult,
    ExpectedRevision,
    Filter,
    NewEvent,
    Partitions,
    StoreError,
    StoreUnavailable,
    StreamAppend,
    WrongExpectedVersion,
)
from decider.stores.contract import EventStoreContract, new_events
from decider.stores.memory import MemoryEventStore
from decider.stores.sqlite import SqliteEventStore


class TestSqliteStore(EventStoreContract):
    store_factory = staticmethod(lambda tmp_path: SqliteEventStore(tmp_path / "e.db"))


class TestSqliteMemoryStore(EventStoreContract):
    store_factory = staticmethod(lambda tmp_path: SqliteEventStore(":memory:"))


def _pragma(store: SqliteEventStore, name: str) -> object:
    connection, _ = store._connection()
    return connection.execute(f"PRAGMA {name}").fetchone()[0]


@pytest.mark.parametrize(("level", "code"), [("OFF", 0), ("normal", 1), ("FULL", 2), ("EXTRA", 3)])
def test_durability_setting_is_applied_on_every_connection(
    tmp_path: Path, level: str, code: int
) -> None:
    store = SqliteEventStore(tmp_path / "e.db", synchronous=level)
    try:
        assert store.synchronous == level.upper()
        assert _pragma(store, "synchronous") == code
        assert _pragma(store, "journal_mode") == "wal"
        seen: list[object] = []
        thread = threading.Thread(target=lambda: seen.append(_pragma(store, "synchronous")))
        thread.start()
        thread.join(10)
        assert seen == [code]
    finally:
        store.close()


def test_full_durability_is_the_default(tmp_path: Path) -> None:
    store = SqliteEventStore(tmp_path / "e.db")
    try:
        assert _pragma(store, "synchronous") == 2
    finally:
        store.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"synchronous": "SOMETIMES"}, "synchronous must be one of"),
        ({"busy_timeout": -1.0}, "busy_timeout"),
        ({"probe_interval": 0.0}, "probe_interval"),
        ({"probe_interval": float("inf")}, "probe_interval"),
    ],
)
def test_bad_settings_are_rejected(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SqliteEventStore(tmp_path / "e.db", **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / "e.db").exists()


def test_memory_database_is_shared_by_threads() -> None:
    store = SqliteEventStore(":memory:")
    try:
        events = new_events(2)
        thread = threading.Thread(target=lambda: store.append("s", events, NO_STREAM))
        thread.start()
        thread.join(10)
        assert [e.id for e in store.read_stream("s")] == [e.id for e in events]
    finally:
        store.close()


def test_reopening_a_file_keeps_events_positions_and_checkpoints(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    store = SqliteEventStore(path)
    store.append("a", new_events(3), NO_STREAM)
    store.append_batch([StreamAppend("b", new_events(1), NO_STREAM)], checkpoints=[("proc", 2)])
    before = store.read_all()
    store.close()

    reopened = SqliteEventStore(path)
    try:
        assert reopened.read_all() == before
        assert reopened.load_checkpoint("proc") == 2
        result = reopened.append("a", new_events(1), 2)
        assert result.position > before[-1].position
        assert all(e.recorded_at.utcoffset() == timedelta(0) for e in before)
    finally:
        reopened.close()


def test_recorded_at_is_stored_as_utc(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    store = SqliteEventStore(path)
    try:
        store.append("s", new_events(1), NO_STREAM)
    finally:
        store.close()
    with sqlite3.connect(path) as raw:
        (stored,) = raw.execute("SELECT recorded_at FROM events").fetchone()
    raw.close()
    assert stored.endswith("+00:00")


def test_each_event_read_has_its_own_commits_recorded_at(tmp_path: Path) -> None:
    """The rows of one commit share their time (parsed once); each commit's is its own."""
    path = tmp_path / "e.db"
    store = SqliteEventStore(path)
    try:
        for stream in "abc":
            store.append(stream, new_events(2), NO_STREAM)
        read = store.read_all()
        with sqlite3.connect(path) as raw:
            stored = [t for (t,) in raw.execute("SELECT recorded_at FROM events ORDER BY position")]
        raw.close()
        assert [e.recorded_at for e in read] == [datetime.fromisoformat(t) for t in stored]
    finally:
        store.close()


def test_a_held_write_lock_past_busy_timeout_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    store = SqliteEventStore(path, busy_timeout=0.05)
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreUnavailable, match="locked"):
            store.append("s", new_events(1), ANY)
        blocker.execute("ROLLBACK")
        assert store.append("s", new_events(1), ANY).next_expected_revision == 0
    finally:
        blocker.close()
        store.close()


def test_a_closed_store_refuses_work(tmp_path: Path) -> None:
    store = SqliteEventStore(tmp_path / "e.db")
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.read_all()
    with pytest.raises(StoreError, match="closed"):
        store.append("s", new_events(1), ANY)


def test_an_unopenable_path_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="unable to open"):
        SqliteEventStore(tmp_path / "missing-dir" / "e.db")


@pytest.mark.parametrize(
    ("events", "expected", "error"),
    [(0, ANY, ValueError), (1, -1, ValueError), (1, "0", TypeError), (1, True, TypeError)],
)
def test_malformed_appends_are_rejected(
    tmp_path: Path, events: int, expected: object, error: type[Exception]
) -> None:
    store = SqliteEventStore(tmp_path / "e.db")
    try:
        with pytest.raises(error):
            store.append("s", new_events(events), expected)  # type: ignore[arg-type]
        assert store.read_all() == []
    finally:
        store.close()


def test_threads_that_end_give_their_connections_back(tmp_path: Path) -> None:
    store = SqliteEventStore(tmp_path / "e.db")
    try:
        for _ in range(5):
            thread = threading.Thread(target=lambda: store.append("s", new_events(1), ANY))
            thread.start()
            thread.join(10)
            del thread
        gc.collect()
        # The constructing thread's, and one kept for the next thread, which each took in turn.
        assert len(store._connections) == 2 and store._connections.opened == 2
        assert len(store.read_stream("s")) == 5
    finally:
        store.close()


def test_an_any_append_of_many_events_is_idempotent(tmp_path: Path) -> None:
    store = SqliteEventStore(tmp_path / "e.db", synchronous="OFF")
    try:
        events = new_events(1200)
        first = store.append("s", events, ANY)
        assert store.append("s", events, ANY) == first
        assert len(store.read_stream("s")) == 1200
    finally:
        store.close()


def _traced_batch(
    store: SqliteEventStore, appends: list[StreamAppend]
) -> tuple[list[AppendResult], list[str], list[str], list[str]]:
    """``store.append_batch(appends)``'s results, and the statements it ran: all, the reads,
    the inserts."""
    connection, _ = store._connection()
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    try:
        results = store.append_batch(appends)
    finally:
        connection.set_trace_callback(None)
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT")]
    return results, statements, reads, inserts


def test_a_batch_whose_expectations_hold_is_one_guard_read_and_one_insert(
    tmp_path: Path,
) -> None:
    """The (stream, revision) key and a guard on each expected revision check exact
    expectations: the batch's guards in one read, its rows in one insert; no query of a
    stream's last revision, no ``last_insert_rowid()``. Beside them, the commit reads the log's
    head before its rows and keeps its gist (for the other processes' watch)."""
    store = SqliteEventStore(tmp_path / "e.db")
    try:
        store.append("a", new_events(1), NO_STREAM)
        store.append("d", new_events(2), NO_STREAM)
        results, statements, reads, inserts = _traced_batch(
            store,
            [
                StreamAppend("a", new_events(3), 0),
                StreamAppend("b", new_events(2), NO_STREAM),
                StreamAppend("c", new_events(1), NO_STREAM),
                StreamAppend("d", new_events(1), 1),
            ],
        )
        assert len(reads) == 2 and "max(position)" in reads[0] and "count(*)" in reads[1]
        assert len(inserts) == 2 and "commit_gists" in inserts[1]
        assert not any("last_insert_rowid" in s for s in statements)
        assert [r.next_expected_revision for r in results] == [3, 1, 0, 2]
        for result, stream in zip(results, "abcd", strict=True):
            assert store.read_stream(stream)[-1].position == result.position
        positions = [e.position for e in store.read_all()]
        assert positions == list(range(positions[0], positions[0] + len(positions)))
    finally:
        store.close()


def test_single_events_appended_with_any_join_the_batch_run(tmp_path: Path) -> None:
    """A router's copies (one event each, ``ANY``, several to one stream) go in with the
    batch's exact appends: the guards in one read, the ANY streams' ends and ids in another,
    every row in one insert."""
    store = SqliteEventStore(tmp_path / "e.db")
    try:
        store.append("a", new_events(1), NO_STREAM)
        store.append("copies", new_events(2), NO_STREAM)
        results, _, reads, inserts = _traced_batch(
            store,
            [
                StreamAppend("a", new_events(2), 0),
                StreamAppend("copies", new_events(1), ANY),
                StreamAppend("b", new_events(1), NO_STREAM),
                StreamAppend("copies", new_events(1), ANY),
                StreamAppend("fresh", new_events(1), ANY),
            ],
        )
        # Beside them, the commit reads the log's head and keeps its gist (as above).
        assert len(reads) == 3 and "max(position)" in reads[0]
        assert len(inserts) == 2 and "commit_gists" in inserts[1]
        assert [r.next_expected_revision for r in results] == [2, 2, 0, 3, 0]
        assert [e.revision for e in store.read_stream("copies")] == [0, 1, 2, 3]
        by_position = {e.position: e for e in store.read_all()}
        written = [
            (by_position[r.position].stream, by_position[r.position].revision) for r in results
        ]
        assert written == [
            ("a", 2),
            ("copies", 2),
            ("b", 0),
            ("copies", 3),
            ("fresh", 0),
        ]
    finally:
        store.close()


_STREAMS = st.sampled_from(["s", "t"])


@settings(max_examples=150, deadline=None)
@given(
    stored=st.lists(st.tuples(_STREAMS, st.integers(0, 3)), max_size=4),
    batch=st.lists(
        st.tuples(
            _STREAMS,
            st.sampled_from(["any", "exact", "no_stream", "any_many"]),
            st.integers(0, 3),
        ),
        min_size=1,
        max_size=8,
    ),
)
def test_a_batch_answers_as_the_reference_store_does(
    tmp_path_factory: pytest.TempPathFactory,
    stored: list[tuple[str, int]],
    batch: list[tuple[str, str, int]],
) -> None:
    """Any mix of appends with exact revisions, NO_STREAM and ANY (ids new, stored, or
    repeated in the batch) gives the memory store's results and log, or its error."""
    ids = [uuid.UUID(int=n + 1) for n in range(4)]

    def event(n: int) -> NewEvent:
        return NewEvent(ids[n], "Tested", f'{{"n":{n}}}'.encode())

    sqlite_store = SqliteEventStore(tmp_path_factory.mktemp("batch") / "e.db", synchronous="OFF")
    reference = MemoryEventStore()
    try:
        for store in (sqlite_store, reference):
            for stream, n in stored:
                store.append(stream, [event(n)], ANY)
        appends = []
        for stream, form, n in batch:
            last = len(reference.read_stream(stream)) - 1
            if form == "any":
                appends.append(StreamAppend(stream, [event(n)], ANY))
            elif form == "any_many":
                appends.append(StreamAppend(stream, [event(n), event((n + 1) % 4)], ANY))
            elif form == "exact":
                appends.append(StreamAppend(stream, [event(n)], max(last, 0)))
            else:
                appends.append(StreamAppend(stream, [event(n)], NO_STREAM))
        outcomes: list[tuple[str, object]] = []
        for store in (sqlite_store, reference):
            try:
                outcomes.append(("ok", store.append_batch(appends)))
            except WrongExpectedVersion as exc:
                outcomes.append(("conflict", exc.stream))
        assert outcomes[0] == outcomes[1]

        def shape(store: MemoryEventStore | SqliteEventStore) -> list[tuple[object, ...]]:
            return [(e.stream, e.revision, e.id, e.data, e.position) for e in store.read_all()]

        assert shape(sqlite_store) == shape(reference)
    finally:
        sqlite_store.close()


@pytest.mark.parametrize(
    ("expected", "stored"),
    [(0, 2), (3, 2), (NO_STREAM, 2)],
    ids=["stream-further-on", "stream-not-so-far", "stream-exists"],
)
def test_a_batch_with_one_expectation_that_fails_writes_nothing(
    tmp_path: Path, expected: ExpectedRevision, stored: int
) -> None:
    """A guard that does not hold, or an insert the key refuses, sends the batch's appends
    one by one, which name the stream in conflict; nothing of the batch is written."""
    store = SqliteEventStore(tmp_path / "e.db")
    try:
        store.append("a", new_events(1), NO_STREAM)
        store.append("x", new_events(stored), NO_STREAM)
        before = store.read_all()
        with pytest.raises(WrongExpectedVersion) as raised:
            store.append_batch(
                [
                    StreamAppend("a", new_events(2), 0),
                    StreamAppend("x", new_events(1), expected),
                    StreamAppend("b", new_events(1), NO_STREAM),
                ]
            )
        assert raised.value.stream == "x"
        assert store.read_all() == before
    finally:
        store.close()


def test_a_batch_appended_again_is_recognised_append_by_append(tmp_path: Path) -> None:
    """The same batch again (a retry after an unknown outcome): the insert is refused, and
    each append, on its own, finds its ids stored and answers as the first time."""
    store = SqliteEventStore(tmp_path / "e.db")
    try:
        store.append("a", new_events(1), NO_STREAM)
        batch = [
            StreamAppend("a", new_events(2), 0),
            StreamAppend("b", new_events(3), NO_STREAM),
        ]
        first = store.append_batch(batch)
        assert store.append_batch(batch) == first
        assert len(store.read_all()) == 6
    finally:
        store.close()


def test_an_append_of_more_events_than_one_insert_holds(tmp_path: Path) -> None:
    store = SqliteEventStore(tmp_path / "e.db")
    try:
        store.append("a", new_events(1), NO_STREAM)
        events = new_events(1234)
        result = store.append("a", events, 0)
        stored = store.read_stream("a")
        assert [e.revision for e in stored] == list(range(1235))
        assert [e.id for e in stored[1:]] == [e.id for e in events]
        positions = [e.position for e in stored]
        assert positions == list(range(positions[0], positions[0] + 1235))
        assert result.position == positions[-1]
        assert store.append("a", events, 0) == result  # idempotent
    finally:
        store.close()


def test_a_file_without_partition_keys_gets_the_column_on_open(tmp_path: Path) -> None:
    """A file written before partition keys existed: opening adds the column; its old events'
    keys are unknown, so a read of any partitions gets them, and new events keep theirs."""
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path)
    raw.executescript(
        """
CREATE TABLE events (
    position INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL, revision INTEGER NOT NULL,
    event_id BLOB NOT NULL, type TEXT NOT NULL, data BLOB NOT NULL, metadata BLOB NOT NULL,
    recorded_at TEXT NOT NULL, UNIQUE (stream, revision)
);
INSERT INTO events (stream, revision, event_id, type, data, metadata, recorded_at)
VALUES ('old', 0, randomblob(16), 'Old', '{}', '', '2026-01-01T00:00:00+00:00');
"""
    )
    raw.close()
    store = SqliteEventStore(path)
    try:
        [keyed] = [attrs.evolve(e, partition_key=6) for e in new_events(1)]
        store.append("new", [keyed], NO_STREAM)
        odd = Filter(partitions=Partitions(count=2, held=frozenset({1})))
        assert [(e.stream, e.partition_key) for e in store.read_all(filter=odd)] == [("old", None)]
        even = Filter(partitions=Partitions(count=2, held=frozenset({0})))
        assert [(e.stream, e.partition_key) for e in store.read_all(filter=even)] == [
            ("old", None),
            ("new", 6),
        ]
    finally:
        store.close()
    SqliteEventStore(path).close()  # a migrated file opens as is


def test_prefix_filters_pass_what_the_memory_store_passes_whatever_the_last_character(
    tmp_path: Path,
) -> None:
    """A prefix is read as a range of two comparisons (its last character's next one ends it),
    or by ``substr`` where there is no next one (U+D7FF, whose next is a surrogate; U+10FFFF,
    the last): either way, the texts that start with it, as the memory store says."""
    texts = ["ab", "abc", "ab\U0010ffff", "ac", "aa", "a\ud7ff", "a\ud7ffz", "a\ue000", "", "b"]
    sqlite, memory = SqliteEventStore(tmp_path / "e.db"), MemoryEventStore()
    for store in (sqlite, memory):
        for text in texts:
            store.append(f"s-{text}", new_events(1, event_type=f"t-{text}"), NO_STREAM)
    for prefix in ["ab", "a", "a\ud7ff", "ab\U0010ffff", "", "a\U0010ffff", "b", "c"]:
        for wanted in (
            Filter(event_type_prefixes=(f"t-{prefix}",)),
            Filter(stream_prefixes=(f"s-{prefix}", "s-c")),
        ):
            read = [e.stream for e in sqlite.read_all(filter=wanted)]
            assert read == [e.stream for e in memory.read_all(filter=wanted)], (prefix, wanted)
            assert read == [f"s-{t}" for t in texts if t.startswith(prefix)]
    sqlite.close()
