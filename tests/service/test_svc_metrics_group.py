"""The app-wide gauges of a partition group (``decider run --partitions auto``): only the
process holding partition 0 exports the instance counts and the parked and skipped gauges, and
they count the whole app; when partition 0 moves (a SIGKILL, a graceful stop), its new holder
reads them from the log's start. Each process exports its own processors' lag. In one process:
the duty follows partition 0's lease, a new epoch on each move."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from decider.processors import Service, status
from decider.processors.group.membership import PartitionGroup
from decider.processors.service.metrics import app_wide_duty
from decider.stores.memory import MemoryEventStore
from decider.stores.protocol import EventStore
from samples.traffic_fine.app import REPORTS_STREAM, make_app
from samples.traffic_fine.demo import reports
from tests.service.test_svc_telemetry import scrape
from tests.support.apps import fines_app
from tests.support.partitions import member, pause_heartbeat
from tests.support.scaleout import held_by
from tests.support.service import ServiceProcess, completed, service_env
from tests.support.waiting import wait_until

APP = "tests.support.apps:fines_app"
TTL = 2.0
OPTIONS = ("--partitions", "auto", "--lease-ttl", str(TTL), "--metrics-port", "0")
PARTITIONS = fines_app.partitions
APP_WIDE = ("decider_instances", "decider_commands_parked", "decider_inputs_skipped")


def port(process: ServiceProcess) -> int:
    """The metrics port of the process's current run (waiting for it to be served)."""
    run = f"===== run {process.runs}"

    def served() -> list[str]:
        lines = process.log.read_text().split(run)[-1].splitlines()
        return [line for line in lines if "metrics served on" in line]

    wait_until(lambda: process.check_alive() or bool(served()), 30, "the metrics endpoint")
    return int(re.findall(r"127\.0\.0\.1:(\d+)/metrics", served()[0])[0])


def instances(samples: dict[str, list[Any]]) -> Counter[tuple[str, str]]:
    """The ``decider_instances`` samples, by (workflow, status)."""
    return Counter(
        {
            (s.labels["decider_workflow"], s.labels["decider_status"]): int(s.value)
            for s in samples.get("decider_instances", [])
            if s.value
        }
    )


def expected(store: EventStore) -> Counter[tuple[str, str]]:
    """The instance counts as the store has them (``decider status``)."""
    return Counter((i.workflow, i.status.value) for i in status(store, fines_app))


def exports_the_app_wide_gauges(process: ServiceProcess, store: EventStore) -> bool:
    """Whether the process's scrape has the app-wide gauges, with the store's counts."""
    samples = scrape(port(process))
    return (
        instances(samples) == expected(store)
        and bool(samples.get("decider_commands_parked"))
        and bool(samples.get("decider_inputs_skipped"))
    )


def exports_none_of_them(process: ServiceProcess) -> None:
    samples = scrape(port(process))
    for family in APP_WIDE:
        found = [(s.labels, s.value) for s in samples.get(family, [])]
        assert not found, (family, found)
    # Its own processors' values it exports all the same.
    lags = samples.get("decider_processor_lag_positions", [])
    assert {s.labels["decider_processor"] for s in lags} >= {
        "svc-fines.commands",
        "svc-fines.timers",
        "svc-fines.workflow.IssueTrafficFineForSpeedingViolation",
    }


def test_one_process_of_a_group_exports_the_app_wide_gauges_and_a_new_holder_takes_over(
    sqlite_store: tuple[str, EventStore], processes: list[ServiceProcess], tmp_path: Path
) -> None:
    uri, events = sqlite_store
    env = service_env(tmp_path / "effects.db")
    first, second = (
        ServiceProcess(APP, uri, tmp_path / f"service{n}.log", env, options=OPTIONS) for n in (1, 2)
    )
    processes.extend([first, second])
    made = reports(30, seed=5)
    fines_app.publish_many(events, made[:20], REPORTS_STREAM)
    first.start()
    wait_until(lambda: first.check_alive() or len(held_by(events, first)) == PARTITIONS, 30)
    second.start()
    wait_until(
        lambda: len(held_by(events, first)) == len(held_by(events, second)) == PARTITIONS // 2,
        30,
        "the partitions split evenly after the join",
    )
    wait_until(lambda: first.check_alive() or completed(events, fines_app) == 20, 60)
    # A rebalance releases the highest partitions first: the first process keeps partition 0.
    assert 0 in held_by(events, first)
    wait_until(
        lambda: first.check_alive() or exports_the_app_wide_gauges(first, events),
        30,
        "the holder of partition 0 exporting the store's counts",
    )
    exports_none_of_them(second)

    # Killed: once its leases expire the other process holds partition 0, and reads the
    # counts from the log's start (it never read them before).
    first.kill()
    wait_until(lambda: second.check_alive() or len(held_by(events, second)) == PARTITIONS, 30)
    fines_app.publish_many(events, made[20:], REPORTS_STREAM)
    wait_until(lambda: second.check_alive() or completed(events, fines_app) == 30, 60)
    wait_until(
        lambda: second.check_alive() or exports_the_app_wide_gauges(second, events),
        30,
        "the new holder exporting the store's counts",
    )
    assert instances(scrape(port(second)))["IssueTrafficFineForSpeedingViolation", "completed"]

    # Restarted, the first process rejoins without partition 0; at the other's graceful stop
    # it takes partition 0 (released, not expired) and with it the gauges.
    first.start()
    wait_until(
        lambda: len(held_by(events, first)) == len(held_by(events, second)) == PARTITIONS // 2,
        30,
        "the partitions split evenly after the restart",
    )
    assert 0 in held_by(events, second)
    exports_none_of_them(first)
    assert second.terminate() == 0
    wait_until(lambda: first.check_alive() or len(held_by(events, first)) == PARTITIONS, 30)
    wait_until(
        lambda: first.check_alive() or exports_the_app_wide_gauges(first, events),
        30,
        "the restarted process exporting the store's counts",
    )
    assert first.terminate() == 0


def test_the_duty_follows_partition_0_s_lease_and_leaves_a_member_whose_lease_expired() -> None:
    store = MemoryEventStore()
    app = make_app("duty")
    assert app_wide_duty(Service(app, store)) == -1  # without a group: always
    first = PartitionGroup(store, app, owner="first", ttl=1)
    second = PartitionGroup(store, app, owner="second", ttl=1)
    with (
        member(Service(app, store, group=first)) as one,
        member(Service(app, store, group=second)) as two,
    ):
        wait_until(lambda: len(first.partitions()) == len(second.partitions()) == 8, 10)
        held = app_wide_duty(one)
        assert held == first.partitions()[0].epoch
        assert app_wide_duty(two) is None
        # As in a paused process: the first's leases pass their deadline, the second takes
        # partition 0 under a new epoch (so it reads the gauges anew).
        pause_heartbeat(first)
        wait_until(lambda: app_wide_duty(two) is not None, 10, "the second taking partition 0")
        assert app_wide_duty(one) is None
        assert app_wide_duty(two) != held
