"""Partitions and leases in one process: the hash, a group of one, rebalancing on join and on
graceful leave, fencing of a member that lost its leases, the recorded partition count, and
``decider status``'s partition listing."""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from decider.processors import App, Service
from decider.processors.cli import main
from decider.processors.group import PartitionGroup
from decider.processors.partitions import (
    PartitionCountMismatch,
    checkpoint_name,
    claims,
    ensure_count,
    lease_name,
    partition_of,
)
from decider.processors.streams import workflow_processor_name
from decider.stores.leases import Lease
from decider.stores.memory import MemoryEventStore
from decider.stores.sqlite import SqliteEventStore
from samples.traffic_fine.app import REPORTS_STREAM, make_app
from samples.traffic_fine.workflow import workflow
from tests.processors.test_proc_traffic_fine import all_completed, check_exactly_once, report
from tests.support.stores import instance_streams
from tests.support.waiting import wait_until


@contextlib.contextmanager
def member(service: Service) -> Iterator[Service]:
    """``service`` started, and stopped at the end (also when the test fails)."""
    service.start()
    try:
        yield service
    finally:
        if service.running:
            service.stop()


def test_the_partition_of_a_stream_is_stable_and_spread() -> None:
    # crc32, not hash(): the same in every process (a process's hash() is salted).
    assert partition_of("Order-o-1", 16) == 14
    spread = collections.Counter(partition_of(f"Order-o-{i}", 16) for i in range(1600))
    assert set(spread) == set(range(16))
    assert min(spread.values()) > 60


def test_a_group_of_one_holds_every_partition_and_does_all_the_work() -> None:
    store = MemoryEventStore()
    app = make_app("one")
    group = PartitionGroup(store, app, owner="solo", ttl=5)
    n = 40
    app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
    with member(Service(app, store, group=group)) as service:
        assert sorted(group.partitions()) == list(range(16))
        assert group.singleton("commands") is not None
        assert group.singleton("timers") is not None
        assert service.wait_until(lambda: all_completed(store, app, n), 30)
        assert service.wait_idle(30)
        assert service.errors == []
    check_exactly_once(store, n)
    # Each partition has its own checkpoint; the processor's unpartitioned one is not used.
    processor = workflow_processor_name(app.name, workflow.name)
    assert store.load_checkpoint(processor) is None
    assert all(store.load_checkpoint(checkpoint_name(processor, p)) for p in range(16))
    # A graceful stop released every lease.
    assert all(lease.owner is None for lease in store.leases())


def test_partitions_rebalance_when_a_member_joins_and_when_one_leaves() -> None:
    store = MemoryEventStore()
    app = make_app("pair")
    first = PartitionGroup(store, app, owner="first", ttl=1)
    second = PartitionGroup(store, app, owner="second", ttl=1)
    with member(Service(app, store, group=first)) as one:
        app.publish_many(store, [report(i) for i in range(30)], REPORTS_STREAM)
        with member(Service(app, store, group=second)) as two:
            wait_until(lambda: len(first.partitions()) == len(second.partitions()) == 8, 10)
            assert not set(first.partitions()) & set(second.partitions())
            app.publish_many(store, [report(i) for i in range(30, 60)], REPORTS_STREAM)
            assert one.wait_until(lambda: all_completed(store, app, 60), 30)
            assert one.wait_idle(30) and two.wait_idle(30)
            assert one.errors == two.errors == []
        # The second left gracefully: its partitions were released, the first takes them all.
        wait_until(lambda: len(first.partitions()) == 16, 10, "the first holds every partition")
        app.publish_many(store, [report(i) for i in range(60, 80)], REPORTS_STREAM)
        assert one.wait_until(lambda: all_completed(store, app, 80), 30)
        assert one.wait_idle(30)
    check_exactly_once(store, 80)
    history = claims(store, app)
    assert {c.owner for c in history} == {"first", "second"}
    epochs = collections.Counter((c.partition, c.epoch) for c in history)
    assert max(epochs.values()) == 1  # one owner per epoch of a partition


def test_a_member_whose_leases_were_taken_over_commits_nothing() -> None:
    store = MemoryEventStore()
    app = make_app("fenced")
    group = PartitionGroup(store, app, owner="paused", ttl=0.5)
    lost: list[Lease] = []
    with member(Service(app, store, group=group)):
        # The heartbeat stops (a paused process): the leases expire and another owner takes
        # every partition over, while the processors still hold their old leases in hand.
        original_lost = group.lost
        group.tick = lambda: None  # type: ignore[method-assign]

        def losing(lease: Any) -> None:
            lost.append(lease)
            original_lost(lease)

        group.lost = losing  # type: ignore[method-assign]
        taken = []

        def take_over() -> bool:
            for number in range(16):
                name = lease_name(app.name, number)
                if name not in taken and store.claim_lease(name, "thief", 60) is not None:
                    taken.append(name)
            return len(taken) == 16

        wait_until(take_over, 10, "another owner took every partition over")
        app.publish_many(store, [report(i) for i in range(10)], REPORTS_STREAM)
        wait_until(lambda: lost, 10, "a commit refused for a lost lease")
    assert {lease.owner for lease in lost} == {"paused"}
    assert instance_streams(store, f"{workflow.name}-") == {}


def test_a_process_with_another_partition_count_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "events.db"
    with contextlib.closing(SqliteEventStore(db)) as store:
        assert ensure_count(store, App("svc-fines", partitions=8)) == 8
        with pytest.raises(PartitionCountMismatch, match="configured with 16 partitions but"):
            PartitionGroup(store, make_app("svc-fines"), owner="x").start()
    uri = f"sqlite:///{db}"
    arguments = ["run", "tests.support.apps:fines_app", "--store", uri, "--partitions", "auto"]
    assert main(arguments) == 2
    assert "records 8" in capsys.readouterr().err


def test_status_lists_the_partitions_with_owner_checkpoint_and_lag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "events.db"
    app = make_app()
    with contextlib.closing(SqliteEventStore(db)) as store:
        group = PartitionGroup(store, app, owner="host:1:abcd", ttl=30)
        app.publish_many(store, [report(i) for i in range(10)], REPORTS_STREAM)
        with member(Service(app, store, group=group)) as service:
            assert service.wait_until(lambda: all_completed(store, app, 10), 30)
            spec = "samples.traffic_fine.app:app"
            assert main(["status", "--app", spec, "--store", f"sqlite:///{db}"]) == 0
    out = capsys.readouterr().out
    assert "partitions: 16" in out
    assert "host:1:abcd epoch 1 until" in out
    assert "lag 0" in out
