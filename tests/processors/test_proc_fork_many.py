"""Repairing instances in bulk through the public API, on every store: ``fork_many`` forks each
instance a query selects at the input before its first difference under the fixed code, reuses
what was carried out before it (counted handler calls), and says why it left the others."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from decider import Lifecycle
from decider.processors import FakeClock, Service, show
from decider.processors.app.errors import OperationError
from decider.processors.operate.bulk_fork import fork_many
from decider.processors.operate.listing import InstanceQuery
from decider.stores.protocol import EventStore
from tests.support.fork_app import CALLS, Order, Poke, make_app, run_buggy
from tests.support.stores import events, types

WAIT = 30.0
FAILED = InstanceQuery(workflow="Repair", statuses=frozenset({Lifecycle.FAILED}), limit=None)


def test_every_failed_instance_is_forked_where_it_first_differs_and_completes(
    store: EventStore, app_name: str
) -> None:
    run_buggy(store, app_name, "b1", "b2")
    app = make_app(app_name, repaired=True)
    before = len(events(store))
    preview = fork_many(store, app, FAILED, reason="ship charged orders", dry_run=True)
    assert len(events(store)) == before
    assert [(i.stream, i.at) for i in preview.forked] == [("Repair-b1", 4), ("Repair-b2", 4)]
    assert preview.summary() == "2 instance(s) selected: 2 would be forked, 0 not"
    first = preview.instances[0]
    assert first.plan is not None
    assert (len(first.plan.reused), [e.type for e in first.plan.anew]) == (2, ["Sent:repair.Ship"])
    text = "\n".join(preview.lines())
    assert "\n    #5 Sent:repair.Ship  (carried out anew)\n" in text

    done = fork_many(store, app, FAILED, reason="ship charged orders")
    assert [i.line() for i in done.instances] == [
        f"Repair-{o} (failed): forked to Repair-{o}~g2 at revision 4: 2 command(s)/timer(s) "
        "reused, 1 carried out anew, 2 input(s) decided again"
        for o in ("b1", "b2")
    ]
    assert [i.plan.events if i.plan else () for i in done.instances] == [
        i.plan.events if i.plan else () for i in preview.instances
    ]
    with Service(app, store, clock=FakeClock()) as service:
        assert service.wait_until(
            lambda: all(
                types(store, f"Repair-{o}~g2")[-1] == "Received:repair.Shipped"
                for o in ("b1", "b2")
            ),
            WAIT,
        )
        for order in ("b1", "b2"):
            app.publish(store, Poke(order_id=order), "repair-inputs")
        assert service.wait_until(
            lambda: all(
                show(store, app, f"Repair-{o}~g2").status is Lifecycle.COMPLETED
                for o in ("b1", "b2")
            ),
            WAIT,
        )
        assert service.wait_idle(WAIT)
    assert (CALLS[app_name, "charge"], CALLS[app_name, "ship"]) == (2, 2)  # no charge again

    again = fork_many(store, app, FAILED, reason="ship charged orders")
    assert again.forked == []
    assert [i.why_not for i in again.instances] == [
        "forked already, to Repair-b1~g2",
        "forked already, to Repair-b2~g2",
    ]
    assert again.as_json()["not_forked"] == 2


def test_instances_that_replay_the_same_are_left_and_since_selects_by_last_event(
    store: EventStore, app_name: str
) -> None:
    app = make_app(app_name, repaired=True)
    with Service(app, store, clock=FakeClock()) as service:
        app.publish(store, Order(order_id="s1", amount=5), "repair-inputs")
        assert service.wait_until(
            lambda: types(store, "Repair-s1")[-1:] == ["Received:repair.Shipped"], WAIT
        )
        assert service.wait_idle(WAIT)
    since = datetime.now(UTC)
    run_buggy(store, app_name, "s2")
    everything = InstanceQuery(workflow="Repair", limit=None)
    report = fork_many(store, app, everything, reason="repair", dry_run=True)
    assert [(i.stream, i.forked, i.why_not) for i in report.instances] == [
        ("Repair-s1", False, "it replays the same: no difference found"),
        ("Repair-s2", True, None),
    ]
    recent = InstanceQuery(workflow="Repair", updated_after=since, limit=None)
    report = fork_many(store, app, recent, reason="repair")
    assert [(i.stream, i.forked) for i in report.instances] == [("Repair-s2", True)]
    assert types(store, "Repair-s2")[-1] == "Cancelled"
    assert types(store, "Repair-s1")[-1] == "Received:repair.Shipped"  # left as it was
    running = InstanceQuery(workflow="Repair", statuses=frozenset({Lifecycle.RUNNING}))
    report = fork_many(store, app, running, reason="repair")
    assert [(i.stream, i.why_not) for i in report.instances] == [
        ("Repair-s1", "it replays the same: no difference found"),
        ("Repair-s2~g2", "it replays the same: no difference found"),
    ]
    with pytest.raises(OperationError, match="a fork needs a reason"):
        fork_many(store, app, everything, reason=" ")
    with pytest.raises(KeyError, match="no workflow 'Nope'"):
        fork_many(store, app, InstanceQuery(workflow="Nope"), reason="repair")
