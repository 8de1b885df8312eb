"""A property of ``decider run --partitions auto`` groups, on an SQLite file and a PostgreSQL
schema: whatever joins, graceful leaves (SIGTERM) and kills (SIGKILL) happen while inputs
arrive, both from ``App.publish_many`` and from a plain writer (``store.append`` of the app's
encoded inputs straight to the input stream), nothing is lost or doubled.

The plan is drawn from a seeded random generator (the same plan every run): which input path
each chunk of reports takes, and after each chunk a join, a leave, a kill or nothing (the
seeds are ones whose plans have each), with a random pause before the next chunk. At the end,
checked:

- every workflow completed once, with exactly its expected history (no event twice, no input
  handled twice), and each report started exactly one instance (no input routed to two);
- every command took effect once (one effect per command id, one stored result);
- no partition had two owners at once: in the lease table, sampled after every step, a
  partition's epoch never goes back and one epoch never has two owners; in the lease history
  (``decider-leases-<app>``), one owner per epoch of a partition.
"""

from __future__ import annotations

import itertools
import random
import uuid

import pytest

from decider import Envelope, Metadata, event_id
from decider.processors.group.partitions import lease_name
from decider.stores.leases import LeaseStore
from decider.stores.protocol import ANY, EventStore, NewEvent
from samples.traffic_fine.app import REPORTS_STREAM
from samples.traffic_fine.demo import reports
from samples.traffic_fine.messages import PoliceReportPublished, SpeedingViolation
from tests.service.test_svc_crash import Setup, setup
from tests.support.apps import fines_app
from tests.support.fines import all_done, check_outcome
from tests.support.scaleout import FINES, lease_history_ok, random_pause
from tests.support.service import ServiceProcess, service_env
from tests.support.waiting import wait_until

__all__ = ["setup"]  # the store fixture, shared with the crash tests

TTL = 1.0
"""Short, so a killed process's partitions move on within about a second."""
OPTIONS = ("--partitions", "auto", "--lease-ttl", str(TTL))
SEEDS = (1, 3)
"""The plans run (each the same every time)."""
REPORTS = 180
CHUNK = 15
MOST = 4
"""The most processes running at once."""


def write_plainly(store: EventStore, made: list[PoliceReportPublished]) -> None:
    """What a writer outside the app does: the app's encoded inputs appended straight to the
    input stream, each with a message id of its own (not through ``App.publish``)."""
    events = []
    for report in made:
        message_id = f"plain-{uuid.uuid4()}"
        type_name, data, metadata = fines_app.codec.encode_envelope(
            Envelope(report, Metadata(message_id=message_id))
        )
        events.append(NewEvent(event_id(REPORTS_STREAM, message_id, 0), type_name, data, metadata))
    store.append(REPORTS_STREAM, events, ANY)


class LeaseTable:
    """Samples of the lease table: a partition's epoch never goes back, and one epoch of a
    partition never has two owners (a release keeps the epoch and clears the owner)."""

    def __init__(self, store: EventStore) -> None:
        assert isinstance(store, LeaseStore)
        self.store = store
        self.names = {lease_name(fines_app.name, p) for p in range(fines_app.partitions)}
        self.owners: dict[tuple[str, int], str] = {}
        self.epochs: dict[str, int] = {}
        self.samples = 0

    def sample(self) -> None:
        """Read the table once and check it against every earlier sample."""
        for lease in self.store.leases():
            if lease.partition not in self.names:
                continue
            last = self.epochs.get(lease.partition, 0)
            assert lease.epoch >= last, f"{lease.partition}: epoch {last} -> {lease.epoch}"
            self.epochs[lease.partition] = lease.epoch
            if lease.owner is not None:
                owner = self.owners.setdefault((lease.partition, lease.epoch), lease.owner)
                assert owner == lease.owner, (
                    f"{lease.partition} epoch {lease.epoch}: owned by {owner} and {lease.owner}"
                )
        self.samples += 1


def next_step(rng: random.Random, running: int) -> str:
    """After a chunk: a join (below :data:`MOST` processes), a leave or a kill (above one), or
    nothing. It depends on the seed and the steps before alone, so a seed is one plan."""
    steps = ["none"]
    if running < MOST:
        steps += ["join", "join"]
    if running > 1:
        steps += ["leave", "kill", "kill"]
    return rng.choice(steps)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_random_joins_leaves_and_kills_lose_and_double_nothing(setup: Setup, seed: int) -> None:
    store, uri, effects_db, processes = setup
    rng = random.Random(seed)
    made = reports(REPORTS, seed=seed % 1000)
    speeding = {r.police_report_id for r in made if isinstance(r.offense, SpeedingViolation)}
    env = service_env(effects_db, 0.01)  # commands in flight at a kill
    running: list[ServiceProcess] = []
    numbers = itertools.count(1)

    def join() -> None:
        log = effects_db.with_name(f"service{next(numbers)}.log")
        service = ServiceProcess(FINES, uri, log, env, options=OPTIONS)
        processes.append(service)
        running.append(service)
        service.start()
        # Started (its signal handlers set): a leave is then a graceful one.
        wait_until(service.started, 30, "the process started")

    table = LeaseTable(store)
    join()
    join()
    chunks = [made[start : start + CHUNK] for start in range(0, REPORTS, CHUNK)]
    done: list[str] = []
    for chunk in chunks:
        if rng.random() < 0.5:
            fines_app.publish_many(store, chunk, REPORTS_STREAM)
            done.append("publish")
        else:
            write_plainly(store, chunk)
            done.append("plain")
        step = next_step(rng, len(running))
        if step == "join":
            join()
        elif step in {"leave", "kill"}:
            victim = running.pop(rng.randrange(len(running)))
            if step == "kill":
                victim.kill()
            else:
                assert victim.terminate() == 0, victim.tail()
        done.append(step)
        table.sample()
        random_pause(rng.uniform(0.0, 0.3))  # the next moment of change, drawn

    def finished() -> bool:
        for service in running:
            service.check_alive()
        table.sample()
        return all_done(store, effects_db, speeding, REPORTS)

    wait_until(finished, 120, f"every workflow completed and command carried out ({done})")
    assert [service.terminate() for service in running] == [0] * len(running)
    table.sample()
    repeats = check_outcome(store, effects_db, speeding, REPORTS)
    claims = lease_history_ok(store)
    assert {"publish", "plain", "join", "leave", "kill"} <= set(done), done
    print(
        f"plan {done}; {claims} claims in the lease history; {table.samples} samples of the "
        f"lease table; {repeats} handler repeats"
    )
