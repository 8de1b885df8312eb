"""The SQLite store after a transient failure: the error is StoreUnavailable, and the
connection is reopened, so the store recovers by itself once the cause is gone."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from decider.stores import (
    ANY,
    NO_STREAM,
    PermanentStoreError,
    StoreError,
    StoreUnavailable,
)
from decider.stores.contract import new_events
from decider.stores.sqlite.store import SqliteEventStore, _store_error

_READONLY = "attempt to write a readonly database"


def _error(kind: type[sqlite3.Error], message: str, code: int) -> sqlite3.Error:
    error = kind(message)
    error.sqlite_errorcode = code
    return error


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (_error(sqlite3.OperationalError, "database is locked", 5), StoreUnavailable),
        (
            _error(sqlite3.OperationalError, "attempt to write a readonly database", 8),
            StoreUnavailable,
        ),
        (
            _error(sqlite3.OperationalError, "attempt to write a readonly database", 1032),
            StoreUnavailable,
        ),
        (_error(sqlite3.OperationalError, "disk I/O error", 778), StoreUnavailable),
        (_error(sqlite3.OperationalError, "database or disk is full", 13), StoreUnavailable),
        (_error(sqlite3.OperationalError, "unable to open database file", 14), StoreUnavailable),
        (_error(sqlite3.DataError, "string or blob too big", 18), PermanentStoreError),
        (_error(sqlite3.DatabaseError, "database disk image is malformed", 11), StoreError),
        (sqlite3.OperationalError("database is locked"), StoreUnavailable),  # no code
    ],
)
def test_sqlite_error_mapping(error: sqlite3.Error, expected: type[Exception]) -> None:
    mapped = _store_error("e.db", error)
    assert type(mapped) is expected
    assert "'e.db'" in str(mapped)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteEventStore]:
    opened = SqliteEventStore(tmp_path / "e.db", busy_timeout=0.2)
    yield opened
    opened.close()


def _read_only_now(store: SqliteEventStore) -> None:
    """This thread's connection turns read-only, as one opened while the file was read-only."""
    connection, in_use = store._connection()
    with in_use:
        connection.execute("PRAGMA query_only = ON")


def test_a_connection_gone_read_only_is_reopened(store: SqliteEventStore) -> None:
    store.append("s", new_events(1), NO_STREAM)
    _read_only_now(store)
    with pytest.raises(StoreUnavailable, match="read-only"):
        store.append("s", new_events(1), 0)
    # The file itself is writable: the next call opens a fresh connection and succeeds.
    assert store.append("s", new_events(1), 0).next_expected_revision == 1
    _read_only_now(store)
    with pytest.raises(StoreUnavailable, match="read-only"):
        store.save_checkpoint("p", 1)  # an autocommit statement
    store.save_checkpoint("p", 2)
    assert store.load_checkpoint("p") == 2
    assert [e.revision for e in store.read_stream("s")] == [0, 1]


def test_locked_beyond_the_busy_timeout_is_unavailable_then_passes(
    store: SqliteEventStore,
) -> None:
    blocker = sqlite3.connect(store.path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreUnavailable, match="locked"):
            store.append("s", new_events(1), ANY)
        blocker.execute("ROLLBACK")
        assert store.append("s", new_events(1), ANY).next_expected_revision == 0
    finally:
        blocker.close()


def _chattr(flag: str, *paths: Path) -> None:
    subprocess.run(["chattr", flag, *map(str, paths)], check=True, capture_output=True)


def immutable_supported(tmp_path: Path) -> bool:
    """Whether ``chattr +i`` works here (root on a filesystem that has the flag): root ignores
    file modes, so an immutable file is how a test makes a file read-only for it."""
    probe = tmp_path / "probe"
    probe.touch()
    try:
        _chattr("+i", probe)
    except (OSError, subprocess.CalledProcessError):
        return False
    _chattr("-i", probe)
    return True


def test_a_file_read_only_for_a_while_recovers_in_every_thread(tmp_path: Path) -> None:
    if not immutable_supported(tmp_path):
        pytest.skip("chattr +i is not available here (needs root and ext4/xfs/btrfs)")
    db = tmp_path / "e.db"
    store = SqliteEventStore(db, busy_timeout=0.2)
    # Not the -shm file: SQLite maps it in memory, and a write to an immutable mapping crashes
    # the process (a read-only remount leaves a mapping made before it alone).
    files = [db, db.with_name("e.db-wal")]
    # One long-lived thread that opens its connection while the file is read-only.
    worker = ThreadPoolExecutor(max_workers=1)
    try:
        store.append("s", new_events(1), NO_STREAM)
        _chattr("+i", *files)
        try:
            with pytest.raises(StoreUnavailable):
                store.append("s", new_events(1), 0)
            with pytest.raises(StoreUnavailable, match="read-only"):
                worker.submit(store.append, "t", new_events(1), ANY).result(10)
        finally:
            _chattr("-i", *files)
        assert store.append("s", new_events(1), 0).next_expected_revision == 1
        assert worker.submit(store.append, "t", new_events(1), ANY).result(10).position == 3
        assert [e.stream for e in store.read_all()] == ["s", "s", "t"]
    finally:
        worker.shutdown()
        store.close()
