"""``make demo``: the traffic-fine service on SQLite, run the way users run it.

1. start ``decider run samples.traffic_fine:app --store sqlite:///PATH`` (a fresh file) as a
   subprocess (its log goes to ``service.log`` beside the database);
2. publish police reports from this process (mostly speeding, some parking);
3. watch the store until every workflow has completed, printing progress every 0.5 s, and
   fail loudly after ``--timeout`` seconds;
4. stop the service with SIGTERM and check it exits cleanly (status 0: graceful stop);
5. print a summary and the full history of one speeding instance (``decider show``).

Options: ``--reports N`` (default 500), ``--db PATH`` (default: a temporary directory; an
existing file is removed first), ``--timeout SECONDS``, ``--seed``.
"""

from __future__ import annotations

import argparse
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from decider import Lifecycle
from decider.processors import list_parked, show, status
from decider.processors.cli.views import instance_lines
from decider.stores.sqlite import SqliteEventStore
from samples.traffic_fine.app import ISSUED_STREAM, REPORTS_STREAM, app
from samples.traffic_fine.messages import (
    Offense,
    ParkingViolation,
    PoliceReportPublished,
    SpeedingViolation,
)

APP_SPEC = "samples.traffic_fine:app"
"""The app as the command line names it."""

PROGRESS_EVERY = 0.5
"""Seconds between two progress lines while waiting."""


class DemoFailed(Exception):
    """The demo did not reach what it promises (every workflow completed, a clean stop)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; 0 if every workflow completed and the service stopped cleanly, else 1."""
    args = _parser().parse_args(argv)
    if args.reports < 1:
        print("demo: --reports must be at least 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="decider-demo-") as scratch:
        db = Path(args.db) if args.db else Path(scratch) / "demo-events.db"
        try:
            run_demo(db.resolve(), args.reports, args.timeout, args.seed)
        except DemoFailed as exc:
            print(f"demo: FAILED: {exc}", file=sys.stderr, flush=True)
            return 1
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="demo", description=__doc__.split("\n")[0])
    parser.add_argument("--reports", type=int, default=500, help="police reports to publish")
    parser.add_argument("--db", help="SQLite file to use (removed first); default: a temp dir")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait at most")
    parser.add_argument("--seed", type=int, default=7, help="seed of the reports' offenses")
    return parser


def decider_command() -> list[str]:
    """How to start the ``decider`` command: the console script beside this Python, else
    ``python -m decider.processors.cli`` (the same entry point)."""
    script = Path(sys.executable).with_name("decider")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "decider.processors.cli"]


def reports(count: int, seed: int) -> list[PoliceReportPublished]:
    """``count`` police reports, about 4 in 5 for speeding, the rest for parking."""
    rng = random.Random(seed)
    made = []
    for number in range(1, count + 1):
        offense: Offense
        if rng.random() < 0.8:
            limit = rng.choice((30, 50, 70, 90, 120))
            offense = SpeedingViolation(
                maximum_speed=f"{limit} km/h", measured_speed=f"{limit + rng.randint(5, 60)} km/h"
            )
        else:
            offense = ParkingViolation(location=rng.choice(("Grote Markt", "Meir", "Kaai")))
        made.append(PoliceReportPublished(police_report_id=f"PR-{number:05d}", offense=offense))
    return made


def run_demo(db: Path, count: int, timeout: float, seed: int) -> None:
    """Everything the module docstring lists; raises :class:`DemoFailed` if a step fails."""
    for leftover in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        leftover.unlink(missing_ok=True)
    uri = f"sqlite:///{db}"
    log_path = db.with_name("service.log")
    arguments = ["run", APP_SPEC, "--store", uri, "--progress-interval", "1"]
    print(f"$ decider {' '.join(arguments)}   (log: {log_path})", flush=True)
    with log_path.open("w") as log:
        service = subprocess.Popen(
            [*decider_command(), *arguments], stdout=log, stderr=subprocess.STDOUT
        )
    try:
        # Opened after the service started: an SQLite connection must not cross a fork.
        store = SqliteEventStore(db)
        try:
            summary = _drive(
                store,
                service=service,
                count=count,
                timeout=timeout,
                seed=seed,
                log_path=log_path,
            )
            _stop(service, log_path)
            print(*summary, sep="\n")
            print(f"  service stop:        SIGTERM -> exit status {service.returncode} (graceful)")
            for line in _log_lines(log_path, ("signal", "stopped at", "progress")):
                print(f"    {line}")
            _show_one(store, uri, reports(count, seed))
        finally:
            store.close()
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()


def _drive(
    store: SqliteEventStore,
    *,
    service: subprocess.Popen[bytes],
    count: int,
    timeout: float,
    seed: int,
    log_path: Path,
) -> list[str]:
    made = reports(count, seed)
    speeding = sum(isinstance(r.offense, SpeedingViolation) for r in made)

    def ready() -> bool:
        _check_running(service, log_path)
        return bool(_log_lines(log_path, (f"service {app.name!r} started",)))

    if not wait_until(ready, 30):
        raise DemoFailed(f"the service did not start within 30 s; see {log_path}")
    print("service started")
    started = time.monotonic()
    for first in range(0, count, 50):
        app.publish_many(store, made[first : first + 50], REPORTS_STREAM)
    print(f"published {count} police reports ({speeding} speeding, {count - speeding} parking)")
    counts = {"completed": 0, "running": 0, "issued": 0}
    last_print = 0.0

    def finished() -> bool:
        nonlocal last_print
        _check_running(service, log_path)
        instances = status(store, app)
        counts["completed"] = sum(i.status is Lifecycle.COMPLETED for i in instances)
        counts["running"] = len(instances) - counts["completed"]
        counts["issued"] = len(store.read_stream(ISSUED_STREAM))
        now = time.monotonic()
        # The last command (issue the fine) is carried out just after its workflow completes.
        done = counts["completed"] == count and counts["issued"] == speeding
        if now - last_print >= PROGRESS_EVERY or done:
            last_print = now
            print(
                f"  {now - started:5.1f}s  completed {counts['completed']}/{count}"
                f"  (in flight {counts['running']}, fines issued {counts['issued']})",
                flush=True,
            )
        return done

    if not wait_until(finished, timeout):
        raise DemoFailed(
            f"only {counts['completed']} of {count} workflows completed and "
            f"{counts['issued']} of {speeding} fines issued in {timeout:.0f}s"
        )
    elapsed = time.monotonic() - started
    parked = list_parked(store, app)
    issued = counts["issued"]
    if parked:
        raise DemoFailed(f"{len(parked)} commands parked: {parked[0]}")
    return [
        "",
        "summary",
        f"  workflows completed: {counts['completed']} of {count}",
        f"  in flight:           {counts['running']}",
        f"  parked commands:     {len(parked)}",
        f"  fines issued:        {issued} (one per speeding report)",
        f"  elapsed:             {elapsed:.2f} s (first report published to last workflow done)",
        f"  throughput:          {count / elapsed:.0f} workflows/s (1 process, SQLite with fsync)",
    ]


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Check ``predicate`` every ``interval`` seconds until it holds; whether it did in time.

    The service is another process: there is nothing to be notified by, so this polls.
    """
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        pause.wait(interval)
    return True


def _check_running(service: subprocess.Popen[bytes], log_path: Path) -> None:
    if service.poll() is not None:
        raise DemoFailed(
            f"the service exited with status {service.returncode}; see {log_path}:\n"
            + "\n".join(_log_lines(log_path, ("",))[-15:])
        )


def _stop(service: subprocess.Popen[bytes], log_path: Path) -> None:
    service.send_signal(signal.SIGTERM)
    try:
        service.wait(timeout=30)
    except subprocess.TimeoutExpired:
        raise DemoFailed(
            f"the service did not stop within 30 s of SIGTERM; see {log_path}"
        ) from None
    if service.returncode != 0:
        raise DemoFailed(f"the service exited with status {service.returncode}; see {log_path}")


def _log_lines(log_path: Path, needles: tuple[str, ...]) -> list[str]:
    lines = log_path.read_text(errors="replace").splitlines()
    return [line for line in lines if any(needle in line for needle in needles)]


def _show_one(store: SqliteEventStore, uri: str, made: list[PoliceReportPublished]) -> None:
    """The history of the first speeding report's instance (of the first one if none)."""
    chosen = next((r for r in made if isinstance(r.offense, SpeedingViolation)), made[0])
    stream = f"IssueTrafficFineForSpeedingViolation-{chosen.police_report_id}"
    print(f"\n$ decider show {stream} --app {APP_SPEC} --store {uri}")
    print(*instance_lines(app, show(store, app, stream)), sep="\n")


if __name__ == "__main__":
    raise SystemExit(main())
