"""Crash and concurrency, at process level: ``decider run`` processes on one store, an SQLite
file or a PostgreSQL schema.

(a) SIGKILL the service at random moments (seeded) while 300 workflows run, restart it, four
times; (b) two service processes on the same store at once. Either way, at the end: every
workflow completed with exactly its expected history (no event twice, no input handled twice),
every command's effect happened exactly once (one row per command id in the handlers' side
table, whose ids are exactly the ``Sent`` command ids), and every command has its results once.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from decider.stores.postgres import PostgresEventStore
from decider.stores.protocol import EventStore
from decider.stores.sqlite import SqliteEventStore
from samples.traffic_fine.app import REPORTS_STREAM
from samples.traffic_fine.demo import reports
from samples.traffic_fine.messages import SpeedingViolation
from tests.support.apps import fines_app
from tests.support.effects import read_effects
from tests.support.fines import HANDLER_STREAMS, WORKFLOWS, all_done, check_outcome
from tests.support.postgres import PG_URI, fresh_schema
from tests.support.service import ServiceProcess, completed, service_env
from tests.support.waiting import wait_until

APP = "tests.support.apps:fines_app"
Setup = tuple[EventStore, str, Path, list[ServiceProcess]]


@pytest.fixture(params=["sqlite", "postgres"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    """The test's store, the URI the services open it by, the effects file, the services."""
    processes: list[ServiceProcess] = []
    with contextlib.ExitStack() as resources:
        store: EventStore
        if request.param == "sqlite":
            db = tmp_path / "events.db"
            store = SqliteEventStore(db)
            uri = f"sqlite:///{db}"
        else:
            schema = resources.enter_context(fresh_schema())
            store = PostgresEventStore(PG_URI, schema=schema)
            uri = f"{PG_URI}{'&' if '?' in PG_URI else '?'}schema={schema}"
        resources.callback(store.close)
        yield store, uri, tmp_path / "effects.db", processes
        for process in processes:
            process.cleanup()


@pytest.mark.slow
def test_sigkill_at_random_moments_then_restart(
    setup: Setup,
) -> None:
    store, uri, effects_db, processes = setup
    rng = random.Random(20261121)
    made = reports(WORKFLOWS, seed=5)
    speeding = {r.police_report_id for r in made if isinstance(r.offense, SpeedingViolation)}
    service = ServiceProcess(
        APP, uri, effects_db.with_name("service.log"), service_env(effects_db, 0.02)
    )
    processes.append(service)

    half = WORKFLOWS // 2
    fines_app.publish_many(store, made[:half], REPORTS_STREAM)
    published = half
    kills_at: list[tuple[int, int]] = []
    for kill in range(4):
        if kill == 2:  # more work arrives while the service is down
            fines_app.publish_many(store, made[half:], REPORTS_STREAM)
            published = WORKFLOWS
        # The number and code commands (the slow part) measure progress finely; completions come
        # in bursts. A speeding workflow completes once both are carried out (the fine is issued
        # after). The target is at most half of those still due, and each takes 20 ms on 16
        # workers, so workflows remain open when the kill lands a few milliseconds after it.
        done = carried_out(effects_db)
        due = len(HANDLER_STREAMS) * sum(r.police_report_id in speeding for r in made[:published])
        target = done + min(rng.randint(20, 200), max(1, (due - done) // 2))
        service.start()

        # Counting completions reads the whole log, far slower than the count of commands, so
        # it is only the fallback (every workflow done before the target), checked now and then.
        fallback = Throttle(0.5)

        def progressed(
            target: int = target, published: int = published, fallback: Throttle = fallback
        ) -> bool:
            service.check_alive()
            if carried_out(effects_db) >= target:
                return True
            return fallback.due() and completed(store, fines_app) == published

        wait_until(progressed, 60, f"{target} commands carried out before kill {kill + 1}")
        # A random moment just after the condition: in the middle of whatever is going on.
        threading_pause(rng.uniform(0.0, 0.01))
        service.kill()
        kills_at.append((completed(store, fines_app), published))
    mid_run = sum(done < published for done, published in kills_at)
    assert mid_run >= 3, f"too few kills in the middle of the work: {kills_at}"

    service.start()
    wait_until(
        lambda: service.check_alive() or all_done(store, effects_db, speeding),
        60,
        "every workflow completed and every command carried out after the last restart",
    )
    assert service.terminate() == 0
    repeats = check_outcome(store, effects_db, speeding)
    print(f"killed at (completed, published) {kills_at}; {repeats} handler calls were repeats")


@pytest.mark.slow
def test_two_services_on_one_store(
    setup: Setup,
) -> None:
    store, uri, effects_db, processes = setup
    made = reports(WORKFLOWS, seed=9)
    speeding = {r.police_report_id for r in made if isinstance(r.offense, SpeedingViolation)}
    env = service_env(effects_db, 0.001)
    services = [
        ServiceProcess(APP, uri, effects_db.with_name(f"service{n}.log"), env) for n in (1, 2)
    ]
    processes.extend(services)
    for service in services:
        service.start()
    for service in services:
        wait_until(service.started, 30, "both services started")
    # Published while both run, in chunks, so they compete for the same instances.
    for first in range(0, WORKFLOWS, 30):
        fines_app.publish_many(store, made[first : first + 30], REPORTS_STREAM)

    def done() -> bool:
        for service in services:
            service.check_alive()
        return all_done(store, effects_db, speeding)

    wait_until(done, 90, "every workflow completed and command carried out by two services")
    assert [service.terminate() for service in services] == [0, 0]
    repeats = check_outcome(store, effects_db, speeding)
    print(f"{repeats} handler calls were repeats")


def carried_out(effects_db: Path) -> int:
    """How many number and code commands the handlers carried out so far (repeats not
    counted): the ones a speeding workflow waits on before it completes."""
    if not effects_db.exists():
        return 0
    return sum(kind != "issue" for kind, _ in read_effects(str(effects_db)).values())


class Throttle:
    """True from :meth:`due` at most once every ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.last = time.monotonic()

    def due(self) -> bool:
        now = time.monotonic()
        if now - self.last < self.seconds:
            return False
        self.last = now
        return True


def threading_pause(seconds: float) -> None:
    """A deliberate random delay (the kill moment itself), not a wait for something."""
    import threading

    threading.Event().wait(seconds)
