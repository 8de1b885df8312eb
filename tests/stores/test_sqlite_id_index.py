"""The SQLite store's event-id index: keyed by stream, used by the idempotency check, and
replacing the id-only index of files written by earlier versions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from decider.stores import ANY, EXISTS, AppendResult, ExpectedRevision, WrongExpectedVersion
from decider.stores.contract import new_events
from decider.stores.sqlite import SqliteEventStore
from decider.stores.sqlite import _sql as sql


def _indexes(path: Path) -> set[str]:
    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        return {name for (name,) in rows}


def test_the_id_lookup_searches_indexes_not_the_stream() -> None:
    connection = sqlite3.connect(":memory:")
    try:
        connection.executescript(sql.SCHEMA)
        plan = connection.execute(
            "EXPLAIN QUERY PLAN " + sql.find_ids_sql(3), (b"a", b"b", b"c", "s")
        ).fetchall()
    finally:
        connection.close()
    details = [row[-1] for row in plan if row[-1].startswith(("SEARCH", "SCAN"))]
    # Both halves of the union search an index by stream; neither scans (the plan's wording
    # varies between SQLite versions, the index names and SEARCH do not).
    assert len(details) == 2, details
    assert all(d.startswith("SEARCH events USING INDEX") for d in details), details
    assert "events_by_stream_id" in details[0], details
    assert "revision=?" in details[1], details


@pytest.mark.parametrize("expected", [ANY, EXISTS])
def test_ids_are_found_at_the_first_and_at_later_revisions(
    tmp_path: Path, expected: ExpectedRevision
) -> None:
    store = SqliteEventStore(tmp_path / "e.db", synchronous="OFF")
    try:
        first, second, third = new_events(1), new_events(2), new_events(1)
        results = [store.append("s", batch, ANY) for batch in (first, second, third)]
        store.append("one", first, ANY)  # the same id, first in another stream
        for batch, result in zip((first, second, third), results, strict=True):
            assert store.append("s", batch, expected) == result
        # Some ids stored, some not: a conflict, wherever the stored ones are.
        partial = [
            [first[0], *new_events(1)],
            [*new_events(1), second[1]],
            [third[0], *new_events(1)],
        ]
        for mixed in partial:
            with pytest.raises(WrongExpectedVersion):
                store.append("s", mixed, expected)
        assert len(store.read_stream("s")) == 4
        assert store.append("one", first, expected) == AppendResult(
            0, store.read_stream("one")[0].position
        )
    finally:
        store.close()


def test_a_file_with_the_old_id_index_gets_the_stream_id_index(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    events = new_events(3)
    store = SqliteEventStore(path, synchronous="OFF")
    try:
        first = store.append("s", events, ANY)
    finally:
        store.close()
    # What an earlier version left: the id-only index and not the stream-keyed one.
    with sqlite3.connect(path) as connection:
        connection.executescript(
            "DROP INDEX events_by_stream_id; CREATE INDEX events_by_id ON events (event_id);"
        )
    assert "events_by_id" in _indexes(path)

    store = SqliteEventStore(path, synchronous="OFF")
    try:
        assert "events_by_id" not in _indexes(path)
        assert "events_by_stream_id" in _indexes(path)
        assert store.append("s", events, ANY) == first  # stored ids are still found
        assert store.append("s", events, EXISTS) == first
        with pytest.raises(WrongExpectedVersion):
            store.append("s", [events[0], *new_events(1)], ANY)  # a partial overlap
        assert [e.id for e in store.read_stream("s")] == [e.id for e in events]
    finally:
        store.close()


def test_an_id_stored_in_another_stream_does_not_count(tmp_path: Path) -> None:
    store = SqliteEventStore(tmp_path / "e.db", synchronous="OFF")
    try:
        events = new_events(2)
        store.append("a", events, ANY)
        store.append("b", events, ANY)  # the same ids, another stream: written again
        assert len(store.read_stream("b")) == 2
    finally:
        store.close()
