"""Shared by the console tests: a store with finished, running, parked and skipped work, and
the console run as a ``decider console`` process."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from decider import Lifecycle
from decider.processors import Service, list_parked, show, status
from decider.stores.protocol import EventStore
from decider.stores.sqlite import SqliteEventStore
from samples.traffic_fine.app import REPORTS_STREAM
from samples.traffic_fine.messages import (
    ParkingViolation,
    PoliceReportPublished,
    SpeedingViolation,
    TrafficFineManualIdentificationCodeGenerated,
    TrafficFineSystemNumberGenerated,
)
from tests.support import console_app

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = "IssueTrafficFineForSpeedingViolation"
XSS = "<script>document.title='pwned'</script>"
"""A payload that would run as script if the console wrote it into a page unescaped."""


def stream(report_id: str) -> str:
    """The instance stream of a police report."""
    return f"{WORKFLOW}-{report_id}"


def speeding(report_id: str) -> PoliceReportPublished:
    """A speeding report."""
    offense = SpeedingViolation(maximum_speed="50 km/h", measured_speed="72 km/h")
    return PoliceReportPublished(police_report_id=report_id, offense=offense)


@contextmanager
def filled_store(path: Path) -> Iterator[tuple[SqliteEventStore, Service]]:
    """:func:`filled` on a SQLite store at ``path``, closed afterwards."""
    store = SqliteEventStore(path)
    try:
        with filled(store) as service:
            yield store, service
    finally:
        store.close()


@contextmanager
def filled(store: EventStore) -> Iterator[Service]:
    """A running service on ``store``, which then holds: PR-1 (fined, completed), PR-2
    (parking, completed), PR-XSS (completed, ``<script>`` in its payload), PR-WAIT (running),
    PR-PARK (running, its code command parked), PR-FAIL (failed: a code came before any
    report), and one skipped input (no instance to go to)."""
    console_app.BROKEN.set()
    service = Service(console_app.app, store)
    service.start()
    try:
        app = console_app.app
        app.publish(store, speeding("PR-1"), REPORTS_STREAM)
        parking = ParkingViolation(location="Grote Markt")
        app.publish(
            store, PoliceReportPublished(police_report_id="PR-2", offense=parking), REPORTS_STREAM
        )
        xss = PoliceReportPublished(
            police_report_id="PR-XSS", offense=ParkingViolation(location=XSS)
        )
        app.publish(store, xss, REPORTS_STREAM)
        app.publish(store, speeding("PR-WAIT"), REPORTS_STREAM)
        app.publish(store, speeding("PR-PARK"), REPORTS_STREAM)
        stray = TrafficFineSystemNumberGenerated(police_report_id="PR-0", number="PAY-0")
        app.publish(store, stray, "numbers")  # no correlation id: the route finds no instance
        early = TrafficFineManualIdentificationCodeGenerated(
            police_report_id="PR-FAIL", number="PAY-9", code="C0DE"
        )
        app.publish(store, early, "codes", correlation_id="PR-FAIL")  # decide raises: failed

        def ready() -> bool:
            done = [i for i in status(store, app) if i.status is Lifecycle.COMPLETED]
            failed = [i for i in status(store, app) if i.status is Lifecycle.FAILED]
            return len(done) == 3 and len(failed) == 1 and len(list_parked(store, app)) == 1

        assert service.wait_until(ready, 30), status(store, app)
        assert service.wait_idle(30)
        yield service
    finally:
        service.stop()
        console_app.BROKEN.set()


def status_of(store: EventStore, report_id: str) -> Lifecycle:
    """The status of the instance of ``report_id``."""
    return show(store, console_app.app, stream(report_id)).status


def completed(store: EventStore, report_id: str) -> bool:
    """Whether the instance of ``report_id`` has completed."""
    return show(store, console_app.app, stream(report_id)).status is Lifecycle.COMPLETED


@attrs.frozen
class ConsoleProcess:
    """A running ``decider console`` process: its base URL and action token."""

    process: subprocess.Popen[str]
    url: str
    token: str | None


@contextmanager
def console_process(
    store_uri: str, *extra: str, app: str = "tests.support.console_app:app", timeout: float = 60
) -> Iterator[ConsoleProcess]:
    """``decider console`` for ``app`` (``console_app:app`` unless given) on ``store_uri`` on a
    free port, stopped (by its pid) afterwards, failure or not."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    command = [
        sys.executable,
        "-m",
        "decider.processors.cli",
        "console",
        "--app",
        app,
        "--store",
        store_uri,
        "--port",
        "0",
        *extra,
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in process.stdout or []:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        url, token, seen = None, None, list[str]()
        while url is None or ("--allow-actions" in extra and token is None):
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"the console printed no URL: {seen}") from None
            seen.append(line)
            if found := re.search(r" on (http://\S+/) \(", line):
                url = found.group(1)
            if found := re.search(r"with token (\S+):", line):
                token = found.group(1)
        yield ConsoleProcess(process, url, token)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
