"""Outages at process level: a ``decider run`` service recovers by itself, and nothing is lost
or done twice.

(a) SQLite: the database file turns read-only in the middle of the run (``chattr +i``: the tests
run as root, which ignores file modes), then writable again. Connections opened meanwhile are
read-only for good unless the store reopens them.
(b) PostgreSQL: the service's connections are killed (``pg_terminate_backend``) several times
while batches are in flight.
(c) EventStoreDB: the test server is stopped and started again on the same port and log file.

Each time, afterwards: every workflow completed with exactly its expected history, every
command's effect happened once (one row per command id, exactly the ``Sent`` ids), every
command has its results once, and the handlers ran a bounded number of extra times.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from decider.stores.errors import StoreError
from decider.stores.postgres import PostgresEventStore
from decider.stores.protocol import EventStore
from decider.stores.sqlite import SqliteEventStore
from samples.traffic_fine.app import REPORTS_STREAM
from samples.traffic_fine.demo import reports
from samples.traffic_fine.messages import PoliceReportPublished, SpeedingViolation
from tests.support import fines
from tests.support.apps import fines_app
from tests.support.effects import read_effects
from tests.support.esdb_server import EsdbServerProcess, free_port
from tests.support.postgres import PG_URI, fresh_schema
from tests.support.service import (
    ServiceProcess,
    service_env,
)
from tests.support.waiting import wait_until

APP = "tests.support.apps:fines_app"
WORKFLOWS = 60
RECOVERY_TIMEOUT = 60.0
"""Seconds the service may take to finish everything once the outage is over."""


def _made() -> tuple[list[PoliceReportPublished], set[str]]:
    made = reports(WORKFLOWS, seed=9)
    speeding = {r.police_report_id for r in made if isinstance(r.offense, SpeedingViolation)}
    return made, speeding


def handler_calls(effects_db: Path) -> int:
    if not effects_db.exists():
        return 0
    return sum(calls for _, calls in read_effects(str(effects_db)).values())


def all_done(store: EventStore, effects_db: Path, speeding: set[str]) -> bool:
    """Every workflow completed and every command carried out (read errors: not yet)."""
    try:
        return fines.all_done(store, effects_db, speeding, WORKFLOWS)
    except StoreError:
        return False


def check_outcome(store: EventStore, effects_db: Path, speeding: set[str]) -> int:
    """What the module docstring promises; the number of repeated handler calls."""
    return fines.check_outcome(store, effects_db, speeding, WORKFLOWS)


def failures_logged(service: ServiceProcess) -> int:
    """How many store failures the service logged: a processor that resumes from its checkpoint
    (after a failure, or a read that found the store unavailable), or a commit retried in place
    (the engine keeps what was decided while the store is down)."""
    return sum(
        len(service.log_lines(line))
        for line in (
            "resuming from its checkpoint",
            "retrying from its checkpoint",
            "retrying the commit",
        )
    )


def recover(service: ServiceProcess, done: Callable[[], bool], what: str) -> float:
    """Wait until ``done`` (the service must stay alive); the seconds it took."""
    began = time.monotonic()
    wait_until(lambda: service.check_alive() or done(), RECOVERY_TIMEOUT, what)
    return time.monotonic() - began


# -- (a) SQLite read-only for a while ---------------------------------------------------------


def _chattr(flag: str, *paths: Path) -> None:
    subprocess.run(["chattr", flag, *map(str, paths)], check=True, capture_output=True)


@contextlib.contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """``paths`` immutable (read-only even for root) for the block, writable again after."""
    _chattr("+i", *paths)
    try:
        yield
    finally:
        _chattr("-i", *paths)


def _immutable_supported(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.touch()
    try:
        _chattr("+i", probe)
    except (OSError, subprocess.CalledProcessError):
        return False
    _chattr("-i", probe)
    return True


@pytest.mark.slow
@pytest.mark.parametrize("when", ["mid-run", "from-the-start"])
def test_sqlite_read_only_for_a_while_then_writable(tmp_path: Path, when: str) -> None:
    if not _immutable_supported(tmp_path):
        pytest.skip("chattr +i is not available here (needs root and ext4/xfs/btrfs)")
    db = tmp_path / "events.db"
    effects_db = tmp_path / "effects.db"
    store = SqliteEventStore(db)
    service = ServiceProcess(
        APP, f"sqlite:///{db}", tmp_path / "service.log", service_env(effects_db, 0.01)
    )
    made, speeding = _made()
    try:
        fines_app.publish_many(store, made, REPORTS_STREAM)
        if when == "mid-run":
            service.start()
            wait_until(
                lambda: service.check_alive() or handler_calls(effects_db) >= 15, 60, "15 calls"
            )
        # Not the -shm file: SQLite maps it in memory, and a write to an immutable mapping
        # kills the process (a read-only remount leaves mappings made before it alone).
        with read_only(db, db.with_name("events.db-wal")):
            if when == "from-the-start":  # every connection opens read-only
                service.start()
            # Several failures: connections were reopened while the file was read-only.
            wait_until(
                lambda: service.check_alive() or failures_logged(service) >= 4,
                60,
                "the service to meet the read-only file four times",
            )
            calls_while_read_only = handler_calls(effects_db)
        took = recover(
            service,
            lambda: all_done(store, effects_db, speeding),
            "every workflow done after the file is writable again",
        )
        assert service.terminate() == 0
    finally:
        service.cleanup()
    try:
        repeats = check_outcome(store, effects_db, speeding)
    finally:
        store.close()
    commands = 3 * len(speeding)
    failures = failures_logged(service)
    # No storm of handler calls while the store is down: each failure (backed off) re-runs at
    # most the commands of one batch, and there are few failures.
    assert repeats <= failures * commands, f"{repeats} repeated calls, {failures} failures"
    assert failures <= 10, f"{failures} failures: no back-off?"
    print(
        f"read-only: recovered in {took:.1f}s; {calls_while_read_only} calls before writable;"
        f" {failures} failures; {repeats} repeated calls for {commands} commands"
    )


# -- (b) PostgreSQL connections killed -------------------------------------------------------


def _backends(application_name: str) -> int:
    """How many backends the service has open now."""
    with psycopg.connect(PG_URI, autocommit=True, connect_timeout=10) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (application_name,),
        ).fetchone()
    return int(row[0]) if row else 0


def _terminate(application_name: str) -> int:
    """Kill every backend of the service and wait until each has exited; how many there were.

    Without the wait, a killed backend stays in pg_stat_activity for a moment after
    pg_terminate_backend returns, so the next round's "connected again" could count it and then
    find nothing left to kill.
    """
    with psycopg.connect(PG_URI, autocommit=True, connect_timeout=10) as connection:
        rows = connection.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE application_name = %s",
            (application_name,),
        ).fetchall()
    return len(rows)


@pytest.mark.slow
def test_postgres_connections_killed_mid_batch(tmp_path: Path) -> None:
    effects_db = tmp_path / "effects.db"
    made, speeding = _made()
    name = f"decider-fault-{uuid.uuid4().hex[:8]}"
    with fresh_schema() as schema:
        store = PostgresEventStore(PG_URI, schema=schema)
        uri = f"{PG_URI}{'&' if '?' in PG_URI else '?'}schema={schema}&application_name={name}"
        service = ServiceProcess(APP, uri, tmp_path / "service.log", service_env(effects_db, 0.01))
        killed: list[int] = []
        try:
            fines_app.publish_many(store, made, REPORTS_STREAM)
            service.start()
            for kill in range(4):
                target = 15 * (kill + 1)

                def reached(target: int = target) -> bool:
                    # Past the target, and connected again: a kill must find backends to kill.
                    return service.check_alive() or (
                        handler_calls(effects_db) >= target and _backends(name) >= 1
                    )

                # A connection seen a moment ago may have been closed since (a one-off
                # connection, or a pooled one the service replaced): look again until a kill
                # finds one, for at most a minute.
                deadline = time.monotonic() + 60
                count = 0
                while not count and time.monotonic() < deadline:
                    wait_until(
                        reached,
                        60,
                        f"{target} handler calls with the service connected",
                    )
                    count = _terminate(name)
                killed.append(count)
            took = recover(
                service,
                lambda: all_done(store, effects_db, speeding),
                "every workflow done after the killed connections",
            )
            assert service.terminate() == 0
            repeats = check_outcome(store, effects_db, speeding)
        finally:
            service.cleanup()
            store.close()
    assert all(count >= 1 for count in killed), killed
    assert failures_logged(service) >= 1, "no processor met a killed connection"
    assert repeats <= 3 * len(speeding)
    print(f"killed {killed} backends; recovered in {took:.1f}s; {repeats} repeated calls")


# -- (c) EventStoreDB test server stopped and restarted -------------------------------------


@pytest.mark.slow
def test_esdb_server_stopped_and_restarted(tmp_path: Path) -> None:
    from decider.stores.esdb import EsdbEventStore

    effects_db = tmp_path / "effects.db"
    made, speeding = _made()
    server = EsdbServerProcess(free_port(), tmp_path / "esdb.log", tmp_path / "esdb.out")
    service: ServiceProcess | None = None
    try:
        server.start()
        store = EsdbEventStore(server.uri)
        try:
            fines_app.publish_many(store, made, REPORTS_STREAM)
        finally:
            store.close()
        service = ServiceProcess(
            APP, server.uri, tmp_path / "service.log", service_env(effects_db, 0.01)
        )
        service.start()
        wait_until(lambda: service.check_alive() or handler_calls(effects_db) >= 15, 60, "15 calls")
        server.stop()
        wait_until(
            lambda: service.check_alive() or failures_logged(service) >= 1,
            60,
            "the service to notice the server is gone",
        )
        threading.Event().wait(1.0)  # down for a while: the service retries meanwhile
        server.start()

        def done() -> bool:
            reader = EsdbEventStore(server.uri)
            try:
                return all_done(reader, effects_db, speeding)
            finally:
                reader.close()

        took = recover(service, done, "every workflow done after the server restarted")
        assert service.terminate() == 0
        store = EsdbEventStore(server.uri)
        try:
            repeats = check_outcome(store, effects_db, speeding)
        finally:
            store.close()
    finally:
        if service is not None:
            service.cleanup()
        server.stop()
    assert repeats <= 3 * len(speeding)
    print(f"esdb restart: recovered in {took:.1f}s; {repeats} repeated calls")
