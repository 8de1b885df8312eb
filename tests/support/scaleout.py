"""Process-level partition tests: the leases a ``decider run --partitions auto`` process holds,
the lease history checked, and the run of three processes with repeated SIGKILLs that every
store's test shares (``tests/service/test_svc_partitions.py``, ``tests/esdb``)."""

from __future__ import annotations

import collections
import random
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from decider.processors import App
from decider.processors.group.partitions import claims, lease_name
from decider.stores.leases import LeaseStore
from decider.stores.protocol import EventStore
from samples.traffic_fine.app import REPORTS_STREAM
from samples.traffic_fine.demo import reports
from samples.traffic_fine.messages import PoliceReportPublished, SpeedingViolation
from tests.support.apps import fines_app
from tests.support.effects import effect_pids, read_effects
from tests.support.fines import WORKFLOWS, all_done, check_outcome
from tests.support.service import ServiceProcess, service_env
from tests.support.waiting import wait_until

FINES = "tests.support.apps:fines_app"
"""The app spec of the fines app, as ``decider run`` takes it."""


def held_by(store: EventStore, process: ServiceProcess, app: App = fines_app) -> set[int]:
    """The partitions whose unexpired lease the process holds (its owner name has its pid)."""
    assert isinstance(store, LeaseStore) and process.process is not None
    pid, now = str(process.process.pid), datetime.now(UTC)
    names = {lease_name(app.name, p): p for p in range(app.partitions)}
    return {
        names[lease.partition]
        for lease in store.leases()
        if lease.partition in names
        and lease.owner is not None
        and lease.owner.split(":")[1] == pid
        and lease.expires_at > now
    }


def lease_history_ok(store: EventStore, app: App = fines_app) -> int:
    """One owner per epoch of a partition, every partition claimed; how many claims."""
    history = claims(store, app)
    owners = collections.defaultdict(set)
    for claim in history:
        owners[claim.partition, claim.epoch].add(claim.owner)
    assert all(len(o) == 1 for o in owners.values()), "two owners under one epoch"
    claimed = {partition for partition, _ in owners}
    assert {lease_name(app.name, p) for p in range(app.partitions)} <= claimed
    return len(history)


def pids(services: list[ServiceProcess]) -> set[int]:
    """The process ids of the services running now."""
    return {s.process.pid for s in services if s.process is not None and s.process.poll() is None}


def random_pause(seconds: float) -> None:
    """A deliberate random delay (the kill moment itself), not a wait for something."""
    threading.Event().wait(seconds)


def three_processes_with_sigkills(
    store: EventStore,
    uri: str,
    effects_db: Path,
    processes: list[ServiceProcess],
    options: Sequence[str],
    *,
    kills: int = 4,
    handler_delay: float = 0.002,
) -> str:
    """Three ``decider run`` processes of the fines app on ``uri`` (``options``: the partition
    options), :data:`~tests.support.fines.WORKFLOWS` reports published while they run, one of
    them SIGKILLed at a random moment and started again ``kills`` times; then every check of
    :func:`~tests.support.fines.check_outcome` and :func:`lease_history_ok`. The first
    workflows' commands are carried out by more than one process. A line for the test's output.
    """
    rng = random.Random(20261123)
    made = reports(WORKFLOWS, seed=12)
    speeding = {r.police_report_id for r in made if isinstance(r.offense, SpeedingViolation)}
    env = service_env(effects_db, handler_delay)
    services = [
        ServiceProcess(FINES, uri, effects_db.with_name(f"service{n}.log"), env, options=options)
        for n in (1, 2, 3)
    ]
    processes.extend(services)
    for service in services:
        service.start()
    wait_until(
        lambda: all(s.check_alive() or held_by(store, s) for s in services),
        30,
        "every process holds partitions",
    )
    # The first workflows, before any kill: their commands are spread over the processes.
    first = 30
    fines_app.publish_many(store, made[:first], REPORTS_STREAM)
    wait_until(
        lambda: (
            all(s.check_alive() for s in services)
            or len(read_effects(str(effects_db))) >= 3 * len(speeding & _ids(made[:first]))
        ),
        60,
        "the first workflows' commands carried out",
    )
    handled_by = collections.Counter(effect_pids(str(effects_db)).values())
    assert set(handled_by) <= pids(services)
    assert len(handled_by) >= 2, f"one process carried out every command: {handled_by}"
    chunks = [made[first:][start : start + 25] for start in range(0, WORKFLOWS - first, 25)]
    killed = 0
    for number, chunk in enumerate(chunks):
        fines_app.publish_many(store, chunk, REPORTS_STREAM)
        if number % 3 == 1 and killed < kills:  # SIGKILL one at a random moment, start it again
            victim = rng.choice(services)
            random_pause(rng.uniform(0.0, 0.3))
            victim.kill()
            killed += 1
            victim.start()

    def done() -> bool:
        for service in services:
            service.check_alive()
        return all_done(store, effects_db, speeding)

    wait_until(done, 120, "every workflow completed and command carried out by three processes")
    assert [service.terminate() for service in services] == [0, 0, 0]
    repeats = check_outcome(store, effects_db, speeding)
    recorded = lease_history_ok(store)
    return (
        f"{killed} kills; {recorded} claims in the lease history; {repeats} handler repeats; "
        f"first commands by pid {dict(handled_by)}"
    )


def _ids(made: list[PoliceReportPublished]) -> set[str]:
    return {r.police_report_id for r in made}
