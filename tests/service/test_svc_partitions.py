"""Several ``decider run --partitions auto`` processes sharing one app's work through leases,
on an SQLite file and on a PostgreSQL schema.

(a) Three processes while 300 workflows are published, one of them SIGKILLed at random moments
and started again, four times; (b) a process SIGSTOPped past its lease expiry, its partitions
taken over, then SIGCONTed: it cannot commit for them, rejoins, and the partitions rebalance on
its join and on another's graceful leave. Either way, at the end: every workflow completed with
exactly its expected history (no event twice), every command has one result per command id,
and the lease history has one owner per epoch of a partition (with fencing: at most one
process commits a partition's work at any time).
"""

from __future__ import annotations

import collections
import random
import signal
from datetime import UTC, datetime

import pytest

from decider.processors.partitions import checkpoint_name, claims, lease_name
from decider.processors.streams import workflow_processor_name
from decider.stores.leases import LeaseStore
from decider.stores.protocol import CheckpointStore, EventStore
from samples.traffic_fine.app import REPORTS_STREAM
from samples.traffic_fine.demo import reports
from samples.traffic_fine.messages import SpeedingViolation
from tests.service.test_svc_crash import WORKFLOWS, Setup, all_done, check_outcome, setup
from tests.support.apps import fines_app
from tests.support.service import ServiceProcess, completed, service_env
from tests.support.waiting import wait_until

__all__ = ["setup"]  # the store fixture, shared with the crash tests

APP = "tests.support.apps:fines_app"
TTL = 2.0
OPTIONS = ("--partitions", "auto", "--lease-ttl", str(TTL))
PARTITIONS = fines_app.partitions


def held_by(store: EventStore, process: ServiceProcess) -> set[int]:
    """The partitions whose unexpired lease the process holds (its owner name has its pid)."""
    assert isinstance(store, LeaseStore) and process.process is not None
    pid, now = str(process.process.pid), datetime.now(UTC)
    names = {lease_name(fines_app.name, p): p for p in range(PARTITIONS)}
    return {
        names[lease.partition]
        for lease in store.leases()
        if lease.partition in names
        and lease.owner is not None
        and lease.owner.split(":")[1] == pid
        and lease.expires_at > now
    }


def lease_history_ok(store: EventStore) -> int:
    """One owner per epoch of a partition, every partition claimed; how many claims."""
    history = claims(store, fines_app)
    owners = collections.defaultdict(set)
    for claim in history:
        owners[claim.partition, claim.epoch].add(claim.owner)
    assert all(len(o) == 1 for o in owners.values()), "two owners under one epoch"
    claimed = {partition for partition, _ in owners}
    assert {lease_name(fines_app.name, p) for p in range(PARTITIONS)} <= claimed
    return len(history)


def checkpoints(store: EventStore) -> dict[int, int | None]:
    """Every partition's workflow checkpoint."""
    assert isinstance(store, CheckpointStore)
    processor = workflow_processor_name(fines_app.name, "IssueTrafficFineForSpeedingViolation")
    return {p: store.load_checkpoint(checkpoint_name(processor, p)) for p in range(PARTITIONS)}


@pytest.mark.slow
def test_three_processes_with_repeated_sigkills_and_restarts(setup: Setup) -> None:
    store, uri, effects_db, processes = setup
    rng = random.Random(20261123)
    made = reports(WORKFLOWS, seed=12)
    speeding = {r.police_report_id for r in made if isinstance(r.offense, SpeedingViolation)}
    env = service_env(effects_db, 0.002)
    services = [
        ServiceProcess(APP, uri, effects_db.with_name(f"service{n}.log"), env, options=OPTIONS)
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
    chunks = [made[first : first + 25] for first in range(0, WORKFLOWS, 25)]
    kills = 0
    for number, chunk in enumerate(chunks):
        fines_app.publish_many(store, chunk, REPORTS_STREAM)
        if number % 3 == 1 and kills < 4:  # SIGKILL one at a random moment, start it again
            victim = rng.choice(services)
            threading_pause(rng.uniform(0.0, 0.3))
            victim.kill()
            kills += 1
            victim.start()

    def done() -> bool:
        for service in services:
            service.check_alive()
        return all_done(store, effects_db, speeding)

    wait_until(done, 120, "every workflow completed and command carried out by three processes")
    assert [service.terminate() for service in services] == [0, 0, 0]
    repeats = check_outcome(store, effects_db, speeding)
    recorded = lease_history_ok(store)
    print(f"{kills} kills; {recorded} claims in the lease history; {repeats} handler repeats")


@pytest.mark.slow
def test_a_paused_process_is_fenced_then_rejoins_and_partitions_rebalance(setup: Setup) -> None:
    store, uri, effects_db, processes = setup
    if uri.startswith("sqlite"):
        # A process stopped while it holds SQLite's write lock (any commit, renewal or
        # heartbeat) stalls every writer on the file until it continues: no takeover can
        # happen then (docs/scaling.md). Fencing on SQLite is shown in one process
        # (tests/processors/test_proc_partitions.py).
        pytest.skip("SIGSTOP may freeze SQLite's write lock: the takeover waits for SIGCONT")
    made = reports(WORKFLOWS, seed=13)
    speeding = {r.police_report_id for r in made if isinstance(r.offense, SpeedingViolation)}
    env = service_env(effects_db, 0.001)
    # As docs/scaling.md advises: a process stopped inside a transaction loses its session (and
    # its locks) after a while, or every reader that waits for older writers waits for it.
    sessions = f"{uri}&options=-c%20idle_in_transaction_session_timeout%3D{int(TTL * 1000)}"
    paused, other = (
        ServiceProcess(APP, sessions, effects_db.with_name(f"service{n}.log"), env, options=OPTIONS)
        for n in (1, 2)
    )
    processes.extend([paused, other])
    paused.start()
    wait_until(lambda: paused.check_alive() or len(held_by(store, paused)) == PARTITIONS, 30)
    other.start()  # a join: the partitions split evenly
    wait_until(
        lambda: len(held_by(store, paused)) == len(held_by(store, other)) == PARTITIONS // 2,
        30,
        "the partitions split evenly after the join",
    )
    third = len(made) // 3
    fines_app.publish_many(store, made[:third], REPORTS_STREAM)
    wait_until(lambda: other.check_alive() or _completed(store) >= third, 60)

    assert paused.process is not None
    paused.process.send_signal(signal.SIGSTOP)
    try:
        # Past its expiry the other process takes every partition over, and works alone.
        wait_until(lambda: len(held_by(store, other)) == PARTITIONS, 30, "the takeover")
        fines_app.publish_many(store, made[third : 2 * third], REPORTS_STREAM)
        wait_until(lambda: other.check_alive() or _completed(store) >= 2 * third, 60)
        before = checkpoints(store)
    finally:
        paused.process.send_signal(signal.SIGCONT)
    # The paused process finds its leases lost (at its next renewal or commit, whichever comes
    # first); whatever it had in hand is not committed: no checkpoint goes back.
    wait_until(lambda: paused.check_alive() or paused.log_lines("lost"), 30, "the loss noticed")
    after = checkpoints(store)
    assert all((after[p] or 0) >= (before[p] or 0) for p in range(PARTITIONS)), (before, after)
    # It rejoins: the partitions split again; then the other leaves gracefully.
    wait_until(
        lambda: len(held_by(store, paused)) == len(held_by(store, other)) == PARTITIONS // 2,
        30,
        "the partitions split evenly after the paused process rejoined",
    )
    fines_app.publish_many(store, made[2 * third :], REPORTS_STREAM)
    assert other.terminate() == 0
    wait_until(
        lambda: paused.check_alive() or len(held_by(store, paused)) == PARTITIONS,
        TTL,  # released at a graceful stop: taken at the next renewal, not after expiry
        "the remaining process holds every partition after the graceful leave",
    )
    wait_until(lambda: paused.check_alive() or all_done(store, effects_db, speeding), 90)
    assert paused.terminate() == 0
    check_outcome(store, effects_db, speeding)
    lease_history_ok(store)
    fenced = paused.log_lines("resuming with the leases still held")
    print(f"commits refused for a lost lease after SIGCONT: {len(fenced)}")


def _completed(store: EventStore) -> int:
    return completed(store, fines_app)


def threading_pause(seconds: float) -> None:
    """A deliberate random delay (the kill moment itself), not a wait for something."""
    import threading

    threading.Event().wait(seconds)
