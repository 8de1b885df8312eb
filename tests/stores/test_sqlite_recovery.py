"""The SQLite store after a transient failure: the error is StoreUnavailable, and the
connection is reopened, so the store recovers by itself once the cause is gone."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from decider.processors import Service
from decider.stores import (
    ANY,
    NO_STREAM,
    PermanentStoreError,
    StoreError,
    StoreUnavailable,
)
from decider.stores._connections import ThreadConnections
from decider.stores.contract import new_events
from decider.stores.sqlite.store import SqliteEventStore, _store_error
from samples.traffic_fine.app import app as fines
from tests.support.service import ROOT
from tests.support.waiting import wait_until

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


@contextlib.contextmanager
def _tmpfs(where: Path) -> Iterator[Path]:
    """A tmpfs mounted at ``where`` (skips the test where mounting is impossible: not root, no
    mount namespace); unmounted after, writable again first."""
    where.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(where)],
            check=True, capture_output=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    try:
        yield where
    finally:
        _remount(where, "rw")
        subprocess.run(["umount", str(where)], check=False, capture_output=True, timeout=30)


def _remount(where: Path, mode: str) -> None:
    subprocess.run(
        ["mount", "-o", f"remount,{mode}", str(where)], check=True, capture_output=True, timeout=30
    )


_KILLED_PUBLISHER = """
import os, sys
from decider.stores.sqlite import SqliteEventStore
from samples.traffic_fine.app import REPORTS_STREAM, app
from samples.traffic_fine.messages import PoliceReportPublished, SpeedingViolation

store = SqliteEventStore(sys.argv[1])
offense = SpeedingViolation(maximum_speed="50", measured_speed="90")
app.publish_many(
    store,
    [PoliceReportPublished(police_report_id=f"ro-{i}", offense=offense) for i in range(3)],
    REPORTS_STREAM,
)
os._exit(0)  # killed: its -wal and -shm files stay, as after a SIGKILL
"""


def test_a_service_started_on_a_read_only_mount_recovers_once_it_is_writable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _tmpfs(tmp_path / "mnt") as mount:
        db = mount / "events.db"
        subprocess.run(
            [sys.executable, "-c", _KILLED_PUBLISHER, str(db)],
            check=True, cwd=ROOT, capture_output=True, timeout=60,
        )  # fmt: skip
        _remount(mount, "ro")
        caplog.set_level(logging.WARNING, logger="decider")
        store = SqliteEventStore(db, busy_timeout=0.2)
        try:
            with Service(fines, store) as service:
                wait_until(
                    lambda: any("is read-only" in r.getMessage() for r in caplog.records),
                    timeout=30,
                    what="a write refused as read-only",
                )
                _remount(mount, "rw")

                def completed() -> int:
                    return sum(1 for e in store.read_all() if e.type == "Completed")

                assert service.wait_until(lambda: completed() == 3, 30), (
                    "the service did not recover once the file system was writable"
                )
        finally:
            store.close()


def test_two_threads_that_drop_every_connection_at_once_do_not_wait_on_each_other(
    tmp_path: Path,
) -> None:
    """Two threads whose writes are refused as read-only at the same moment each drop every
    connection while holding their own: neither waits for the other's."""
    connections = ThreadConnections(
        lambda: sqlite3.connect(tmp_path / "e.db", check_same_thread=False),
        lambda: StoreError("closed"),
    )
    both = threading.Barrier(2, timeout=10)

    def refused() -> bool:
        connection, in_use = connections.get()
        with in_use:
            both.wait()  # each holds its own connection while the other drops them all
            connections.drop_all()
        # Both have dropped all before either takes a fresh one: a drop_all after this one's
        # get() would close its fresh connection, idle until the check below.
        both.wait()
        fresh, _ = connections.get()
        assert fresh is not connection
        # (Checked here: a thread that ends gives its connection back.)
        return bool(fresh.execute("SELECT 1").fetchone() == (1,))

    with ThreadPoolExecutor(max_workers=2) as pool:
        done = [pool.submit(refused) for _ in range(2)]
        assert [future.result(timeout=20) for future in done] == [True, True]
    connections.close()
