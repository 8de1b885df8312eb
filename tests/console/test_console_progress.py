"""The console's Processors figures are true: in a partitioned run they read each partition's
checkpoint and count each input in its own partition only; timers not due, and timers of ended
instances, are not pending; they agree with the running service's lag gauge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from decider import Lifecycle
from decider.processors import Service, status
from decider.processors.console.data import processor_rows
from decider.processors.console.pages import Chrome, processors_page
from decider.processors.group.membership import PartitionGroup
from decider.processors.operate.partition_status import partition_rows
from decider.processors.service.metrics import _lag
from decider.stores.memory import MemoryEventStore
from decider.stores.sqlite import SqliteEventStore
from samples.order_fulfilment.app import ORDERS_STREAM
from samples.order_fulfilment.app import make_app as make_orders
from samples.order_fulfilment.messages import OrderLine, OrderPlaced
from samples.order_fulfilment.workflow import PAYMENT_DEADLINE
from samples.traffic_fine.app import REPORTS_STREAM, make_app
from tests.processors.test_proc_traffic_fine import all_completed, report
from tests.support.partitions import member


def _order(order_id: str) -> OrderPlaced:
    return OrderPlaced(
        order_id=order_id, items=(OrderLine(sku="mug", quantity=1),), amount_cents=500
    )


def test_a_partitioned_run_shows_each_partitions_checkpoint_and_nothing_pending() -> None:
    store = MemoryEventStore()
    app = make_app("split")
    group = PartitionGroup(store, app, owner="solo", ttl=5)
    n = 40
    app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
    with member(Service(app, store, group=group)) as service:
        assert service.wait_until(lambda: all_completed(store, app, n), 30)
        assert service.wait_idle(30)
        now = datetime.now(UTC)
        rows = processor_rows(store, app, now)
        gauge = {p.name: _lag(p, store, now) for p in service.processors}
    assert {r.name for r in rows} == set(gauge)
    for row in rows:
        # Before: the unpartitioned checkpoint (none), every input "pending", minutes of lag.
        assert row.partitions == (1 if row.name == "split.router" else 16), row
        # No timer ever, no input without a key ever (the router has nothing to commit).
        assert row.checkpoint is not None or row.name in ("split.timers", "split.router"), row
        assert (row.pending, row.waiting, row.oldest_pending_at) == (0, 0, None), row
        assert gauge[row.name] == (0.0, 0), row  # the gauge agrees: nothing to do
    page = processors_page(Chrome(app, False), rows, now)
    assert "lowest of 16 partitions" in page and "minutes" not in page


def test_an_input_counts_in_its_own_partition_only() -> None:
    store = MemoryEventStore()
    app = make_app("split-pending")
    group = PartitionGroup(store, app, owner="solo", ttl=5)
    with member(Service(app, store, group=group)) as service:
        app.publish(store, report(1), REPORTS_STREAM)
        assert service.wait_until(lambda: all_completed(store, app, 1), 30)
        assert service.wait_idle(30)
    # Stopped: two reports come in, each belongs to one partition; no other partition's
    # checkpoint counts them.
    app.publish_many(store, [report(2), report(3)], REPORTS_STREAM)
    (workflow,) = [r for r in processor_rows(store, app) if ".workflow." in r.name]
    assert workflow.pending == 2
    assert workflow.oldest_pending_at is not None
    # decider status's partition lines count the same: 2 in all, not 2 in every partition.
    lags = [lag.lag for row in partition_rows(store, app) for lag in row.processors]
    assert sum(lags) == 2


def test_timers_of_ended_instances_are_not_pending(tmp_path: Path) -> None:
    store = SqliteEventStore(tmp_path / "events.db")
    app = make_orders("timers")
    try:
        with Service(app, store) as service:
            app.publish_many(store, [_order(f"o-{i}") for i in range(6)], ORDERS_STREAM)
            app.publish(store, _order("slow-1"), ORDERS_STREAM)  # never paid: still running

            def settled() -> bool:
                states = [i.status for i in status(store, app)]
                return states.count(Lifecycle.COMPLETED) == 6 and len(states) == 7

            assert service.wait_until(settled, 30)
            assert service.wait_idle(30)
            now = datetime.now(UTC)
            rows = {r.name: r for r in processor_rows(store, app, now)}
            gauge = {p.name: _lag(p, store, now) for p in service.processors}
        timers = rows["timers.timers"]
        # Before: "7 pending, lag ..." for six timers of completed orders and one not due.
        assert (timers.pending, timers.waiting, timers.oldest_pending_at) == (0, 1, None)
        assert gauge["timers.timers"] == (0.0, 0)
        page = processors_page(Chrome(app, False), list(rows.values()), now)
        assert "none pending" in page
        # Once due, the running order's timer is pending (since it fell due); the completed
        # orders' timers stay done: they are dropped, never fired.
        later = now + PAYMENT_DEADLINE + timedelta(minutes=5)
        due = {r.name: r for r in processor_rows(store, app, later)}["timers.timers"]
        assert (due.pending, due.waiting) == (1, 0)
        assert due.oldest_pending_at is not None
        assert timedelta(minutes=4) < later - due.oldest_pending_at < timedelta(minutes=6)
    finally:
        store.close()
