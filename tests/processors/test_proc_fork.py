"""Repairing instances by forking them, through the public API, on every store: a buggy
``decide`` fails instances, the fixed one decides their inputs again in a new generation,
reusing what was carried out before the fork point (counted handler calls), and the instance's
later inputs and timers reach only the new generation."""

from __future__ import annotations

import threading
import urllib.request

import pytest

from decider import Lifecycle
from decider.processors import App, FakeClock, Service, list_parked, retry_parked, show
from decider.processors.app.errors import InstanceEnded, OperationError
from decider.processors.client.forking import current_generation, fork_point, plan_fork
from decider.processors.commands.processor import CommandProcessor
from decider.processors.console import Console, make_server
from decider.processors.group.membership import PartitionGroup
from decider.processors.group.partitions import stream_key
from decider.processors.operate.replay_check import replay_stored
from decider.processors.operate.skipped import list_skipped
from decider.processors.timers.processor import TimerProcessor
from decider.stores.leases import LeaseStore
from decider.stores.protocol import EventStore, KeyedStore
from tests.support.fork_app import CALLS, DECLINED, REMIND_AFTER, Order, Poke, make_app
from tests.support.partitions import member
from tests.support.stores import counts, events, types
from tests.support.waiting import wait_until

WAIT = 30.0
OLD = [
    "Began",
    "InitiatedBy:repair.Order",
    "Sent:repair.Charge",
    "Scheduled:repair.Remind",
    "Received:repair.Charged",
    "Failed",
]


def status(store: EventStore, app: App, stream: str) -> Lifecycle:
    return show(store, app, stream).status


def run_buggy(store: EventStore, name: str, *orders: str) -> None:
    """Each order through the buggy code: charged once, then failed."""
    buggy = make_app(name, repaired=False)
    with Service(buggy, store, clock=FakeClock()) as service:
        for order in orders:
            buggy.publish(store, Order(order_id=order, amount=5), "repair-inputs")
        streams = [f"Repair-{order}" for order in orders]
        assert service.wait_until(
            lambda: all(status(store, buggy, s) is Lifecycle.FAILED for s in streams), WAIT
        )
        assert service.wait_idle(WAIT)
    for order in orders:
        assert types(store, f"Repair-{order}") == OLD
    assert CALLS[name, "charge"] == len(orders)


@pytest.mark.parametrize("at", [1, 4])
def test_a_forked_instance_completes_as_the_fixed_code_says_reusing_what_was_done(
    store: EventStore, app_name: str, at: int
) -> None:
    """Forked at its first input (the charge's result is carried over from its results stream)
    or at that result: the charge and the reminder are reused, the shipping is new."""
    run_buggy(store, app_name, "o1", "o2")
    app = make_app(app_name, repaired=True)
    plan = app.fork(store, "Repair", "o1", at=at, reason="ship charged orders")
    assert not plan.already
    assert plan.generation == "Repair-o1~g2"
    assert [e.type for e in plan.events] == [
        "Began",
        "InitiatedBy:repair.Order",
        "Sent:repair.Charge",
        "Scheduled:repair.Remind",
        "Received:repair.Charged",
        "Sent:repair.Ship",
    ]
    old = store.read_stream("Repair-o1")
    assert [e.reuses for e in plan.reused] == [str(old[2].id), str(old[3].id)]
    assert [e.type for e in plan.anew] == ["Sent:repair.Ship"]
    assert plan.carried == (1 if at == 1 else 0)
    ended = store.read_stream("Repair-o1")[-1]
    assert ended.type == "Cancelled"
    assert show(store, app, "Repair-o1").status is Lifecycle.FAILED  # ended as it was
    assert "forked to Repair-o1~g2 at revision" in str(show(store, app, "Repair-o1").history[-1])
    assert current_generation(app, store, "Repair-o1") == "Repair-o1~g2"

    clock = FakeClock()
    with Service(app, store, clock=clock) as service:
        assert service.wait_until(lambda: CALLS[app_name, "ship"] == 1, WAIT)
        assert service.wait_until(
            lambda: types(store, "Repair-o1~g2")[-1] == "Received:repair.Shipped", WAIT
        )
        app.publish(store, Poke(order_id="o1"), "repair-inputs")
        assert service.wait_until(
            lambda: status(store, app, "Repair-o1~g2") is Lifecycle.COMPLETED, WAIT
        )
        commands = service.processor("commands")
        assert isinstance(commands, CommandProcessor)
        assert commands.reused == 1
        assert service.wait_idle(WAIT)
    assert CALLS[app_name, "charge"] == 2  # o1's and o2's, before the fork: none again
    assert CALLS[app_name, "ship"] == 1
    assert types(store, "Repair-o1")[:-1] == OLD  # the old generation got nothing more
    replayed = {r.stream: r.report.ok for r in replay_stored(store, app)}
    assert replayed == {"Repair-o2": False, "Repair-o1~g2": True}  # o1 was repaired
    assert types(store, "Repair-o1~g2")[-2:] == ["Received:repair.Poke", "Completed"]
    assert status(store, app, "Repair-o2") is Lifecycle.FAILED  # not forked: as it was


def test_old_timers_never_fire_and_a_reused_timer_fires_once(
    store: EventStore, app_name: str
) -> None:
    run_buggy(store, app_name, "o3")
    app = make_app(app_name, repaired=True)
    app.fork(store, "Repair", "o3", at=4, reason="ship charged orders")
    clock = FakeClock()
    with Service(app, store, clock=clock) as service:
        timers = service.processor("timers")
        assert isinstance(timers, TimerProcessor)
        assert service.wait_until(lambda: len(timers.pending) == 2, WAIT)  # the old and the new
        clock.advance(REMIND_AFTER * 2)
        assert service.wait_until(lambda: timers.fired + timers.dropped == 2, WAIT)
        assert service.wait_until(
            lambda: "Received:repair.Remind" in types(store, "Repair-o3~g2"), WAIT
        )
        assert service.wait_idle(WAIT)
        assert (timers.fired, timers.dropped) == (1, 1)
    assert sum(counts(store, "timer-").values()) == 1
    assert types(store, "Repair-o3~g2").count("Received:repair.Remind") == 1
    assert show(store, app, "Repair-o3~g2").state.reminded == 1
    assert "Received:repair.Remind" not in types(store, "Repair-o3")


def test_a_dry_run_writes_nothing_and_a_second_fork_finds_the_first(
    store: EventStore, app_name: str
) -> None:
    run_buggy(store, app_name, "o4")
    app = make_app(app_name, repaired=True)
    assert fork_point(app, store, "Repair-o4") == 4  # Charged: decided otherwise now
    assert fork_point(make_app(app_name, repaired=False), store, "Repair-o4") is None
    before = len(events(store))
    preview = app.fork(store, "Repair", "o4", at=4, reason="ship", dry_run=True)
    assert len(events(store)) == before
    assert [e.type for e in preview.anew] == ["Sent:repair.Ship"]
    assert len(preview.reused) == 2
    done = app.fork(store, "Repair", "o4", at=4, reason="ship")
    assert done.events == preview.events
    assert len(events(store)) == before + len(done.events) + 1
    again = app.fork(store, "Repair-o4", at=4, reason="ship")
    assert again.already and again.generation == "Repair-o4~g2"
    assert again.events == done.events
    assert fork_point(app, store, "Repair-o4~g2") is None
    assert len(events(store)) == before + len(done.events) + 1
    with pytest.raises(OperationError, match="forked to Repair-o4~g2 at revision 4"):
        app.fork(store, "Repair-o4", at=2, reason="ship")
    with pytest.raises(OperationError, match="revisions 1 to"):
        app.fork(store, "Repair-o4~g2", at=99, reason="ship")


def test_a_generation_forks_again_and_inputs_follow_the_newest(
    store: EventStore, app_name: str
) -> None:
    """A second fork of the new generation (before any service ran): the instance's inputs go
    to generation 3, and the charge is still reused (its first id, through both forks)."""
    run_buggy(store, app_name, "o5")
    app = make_app(app_name, repaired=True)
    app.fork(store, "Repair", "o5", at=4, reason="first try")
    second = app.fork(store, "Repair-o5~g2", at=4, reason="second try")
    assert second.generation == "Repair-o5~g3"
    first_charge = str(store.read_stream("Repair-o5")[2].id)
    assert first_charge in [e.reuses for e in second.reused]
    with Service(app, store, clock=FakeClock()) as service:
        assert service.wait_until(
            lambda: types(store, "Repair-o5~g3")[-1] == "Received:repair.Shipped", WAIT
        )
        app.publish(store, Poke(order_id="o5"), "repair-inputs")
        assert service.wait_until(
            lambda: status(store, app, "Repair-o5~g3") is Lifecycle.COMPLETED, WAIT
        )
        assert service.wait_idle(WAIT)
    assert CALLS[app_name, "charge"] == 1
    assert CALLS[app_name, "ship"] == 1
    assert types(store, "Repair-o5~g2")[-1] == "Cancelled"
    assert "Received:repair.Poke" not in types(store, "Repair-o5~g2")


def test_a_running_instance_forked_while_a_partitioned_group_runs_it(
    store: EventStore, app_name: str
) -> None:
    """The group's workflow processor holds the instance in its cache; the fork's mark, appended
    with the instance's revision as expected revision, makes its next commit conflict like any
    other writer's, and the input is decided again in the new generation."""
    app = make_app(app_name, repaired=True)
    assert isinstance(store, LeaseStore)  # every store the tests open holds leases
    group = PartitionGroup(store, app, owner="solo", ttl=5)
    with member(Service(app, store, group=group, clock=FakeClock())) as service:
        app.publish(store, Order(order_id="o6", amount=5), "repair-inputs")
        assert service.wait_until(
            lambda: types(store, "Repair-o6")[-1:] == ["Received:repair.Shipped"], WAIT
        )
        assert service.wait_idle(WAIT)
        plan = app.fork(store, "Repair", "o6", at=1, reason="decide it again")
        assert [e.type for e in plan.anew] == []  # the same code: everything is reused
        assert plan.carried == 2  # Charged and Shipped, received after revision 1
        app.publish(store, Poke(order_id="o6"), "repair-inputs")
        assert service.wait_until(
            lambda: status(store, app, "Repair-o6~g2") is Lifecycle.COMPLETED, WAIT
        )
        assert service.wait_idle(WAIT)
        assert service.errors == []
    assert (CALLS[app_name, "charge"], CALLS[app_name, "ship"]) == (1, 1)
    assert types(store, "Repair-o6")[-1] == "Cancelled"
    assert "Received:repair.Poke" not in types(store, "Repair-o6")


def test_failed_instances_forked_while_a_group_of_two_runs_complete_in_their_partitions(
    store: EventStore, app_name: str
) -> None:
    """Two processes share the partitions; the failed instances are forked while they run. What
    a fork writes is keyed as the instance (on a store that keeps keys), so each generation's
    work is its partition's: the charges are reused, each order shipped once, and the later
    inputs reach only the new generations."""
    orders = [f"p{i}" for i in range(8)]
    run_buggy(store, app_name, *orders)
    app = make_app(app_name, repaired=True)
    assert isinstance(store, LeaseStore)
    first = PartitionGroup(store, app, owner="first", ttl=2)
    second = PartitionGroup(store, app, owner="second", ttl=2)
    one, two = Service(app, store, group=first), Service(app, store, group=second)
    with member(one), member(two):
        wait_until(lambda: len(first.partitions()) == len(second.partitions()) == 8, WAIT)
        for order in orders:
            app.fork(store, "Repair", order, at=4, reason="ship charged orders")
        shipped = "Received:repair.Shipped"
        assert one.wait_until(
            lambda: all(types(store, f"Repair-{o}~g2")[-1:] == [shipped] for o in orders), WAIT
        )
        for order in orders:
            app.publish(store, Poke(order_id=order), "repair-inputs")
        completed = Lifecycle.COMPLETED
        assert one.wait_until(
            lambda: all(status(store, app, f"Repair-{o}~g2") is completed for o in orders), WAIT
        )
        assert one.wait_idle(WAIT) and two.wait_idle(WAIT)
        assert one.errors == two.errors == []
    assert CALLS[app_name, "charge"] == len(orders)  # before the forks: none again
    keyed = isinstance(store, KeyedStore)  # EventStoreDB keeps no keys
    for order in orders:
        instance = f"Repair-{order}"
        assert types(store, instance) == [*OLD, "Cancelled"]  # no Poke, no Remind
        new = store.read_stream(f"{instance}~g2")
        assert [e.type for e in new].count(shipped) == 1
        assert [e.type for e in new][-2:] == ["Received:repair.Poke", "Completed"]
        written = [*new, store.read_stream(instance)[-1]]
        assert {e.partition_key for e in written} == {stream_key(instance) if keyed else None}


def test_a_fork_cut_short_between_its_writes_while_the_service_ran_is_finished_by_a_second(
    store: EventStore, app_name: str
) -> None:
    """Without transactions a fork writes the new generation, then the mark. Cut short between
    the two while the service runs on: the new generation's shipping is carried out and its
    result, routed to the instance, reaches the old generation (not forked yet). The fork run
    again carries that result into the new generation (no shipping again) and writes the rest."""
    run_buggy(store, app_name, "o12")
    app = make_app(app_name, repaired=True)
    plan = plan_fork(app, store, "Repair-o12", at=4, reason="ship charged orders")
    generation, _mark = plan.appends  # only the first of the two is written
    assert generation.stream == "Repair-o12~g2"
    store.append(generation.stream, generation.events, generation.expected_revision)
    with Service(app, store, clock=FakeClock()) as service:
        assert service.wait_until(
            lambda: types(store, "Repair-o12")[-1] == "Ignored:repair.Shipped", WAIT
        )
        assert service.wait_idle(WAIT)
    assert CALLS[app_name, "ship"] == 1

    again = app.fork(store, "Repair", "o12", at=4, reason="ship charged orders")
    assert not again.already
    assert again.carried == 1  # the shipping's result
    assert [e.type for e in again.events[: len(plan.events)]] == [e.type for e in plan.events]
    assert [e.type for e in again.events[len(plan.events) :]] == ["Received:repair.Shipped"]
    assert types(store, "Repair-o12")[-1] == "Cancelled"
    with Service(app, store, clock=FakeClock()) as service:
        app.publish(store, Poke(order_id="o12"), "repair-inputs")
        assert service.wait_until(
            lambda: status(store, app, "Repair-o12~g2") is Lifecycle.COMPLETED, WAIT
        )
        assert service.wait_idle(WAIT)
    assert (CALLS[app_name, "charge"], CALLS[app_name, "ship"]) == (1, 1)
    assert types(store, "Repair-o12~g2").count("Received:repair.Shipped") == 1


def parked_charge(store: EventStore, name: str, order: str) -> str:
    """``order`` through the buggy code while its card is declined: its charge is parked and
    the instance waits; the parked command's id."""
    buggy = make_app(name, repaired=False)
    DECLINED.add(order)
    with Service(buggy, store, clock=FakeClock()) as service:
        buggy.publish(store, Order(order_id=order, amount=5), "repair-inputs")
        assert service.wait_until(lambda: len(list_parked(store, buggy)) == 1, WAIT)
        assert service.wait_idle(WAIT)
    (parked,) = list_parked(store, buggy)
    return parked.command_id


def test_a_parked_command_the_new_generation_reuses_is_retried_for_it(
    store: EventStore, app_name: str
) -> None:
    command_id = parked_charge(store, app_name, "o7")
    app = make_app(app_name, repaired=True)
    plan = app.fork(store, "Repair", "o7", at=1, reason="declined cards are fixed")
    assert command_id in [e.reuses for e in plan.reused]
    DECLINED.discard("o7")
    retry_parked(store, app, command_id)  # allowed: the new generation is running
    with Service(app, store, clock=FakeClock()) as service:
        assert service.wait_until(
            lambda: types(store, "Repair-o7~g2")[-1:] == ["Received:repair.Shipped"], WAIT
        )
        assert service.wait_idle(WAIT)
    assert (CALLS[app_name, "charge"], CALLS[app_name, "ship"]) == (2, 1)  # declined, then paid
    assert "Received:repair.Charged" not in types(store, "Repair-o7")


def test_a_result_of_a_command_the_new_generation_does_not_reuse_reaches_no_generation(
    store: EventStore, app_name: str
) -> None:
    command_id = parked_charge(store, app_name, "o8")
    app = make_app(app_name, repaired=True, surcharge=1)  # charges 6, not 5: a new command
    plan = app.fork(store, "Repair", "o8", at=1, reason="charge the fee")
    assert [e.type for e in plan.anew] == ["Sent:repair.Charge"]
    with pytest.raises(InstanceEnded):
        retry_parked(store, app, command_id)
    DECLINED.discard("o8")
    retry_parked(store, app, command_id, force=True)
    with Service(app, store, clock=FakeClock()) as service:
        assert service.wait_until(
            lambda: any("does not reuse it" in s.reason for s in list_skipped(store, app)), WAIT
        )
        assert service.wait_until(
            lambda: types(store, "Repair-o8~g2")[-1:] == ["Received:repair.Shipped"], WAIT
        )
        assert service.wait_idle(WAIT)
    # The old charge (declined, then forced), and the new one: the new generation got the new
    # one's result only.
    assert CALLS[app_name, "charge"] == 3
    assert types(store, "Repair-o8~g2").count("Received:repair.Charged") == 1
    assert "Received:repair.Charged" not in types(store, "Repair-o8")


def test_the_console_names_the_fork_and_a_cancel_goes_to_the_newest_generation(
    store: EventStore, app_name: str
) -> None:
    run_buggy(store, app_name, "o9")
    app = make_app(app_name, repaired=True)
    app.fork(store, "Repair", "o9", at=4, reason="ship charged orders")
    console = Console(app, store)
    server = make_server(console)
    host, port = server.server_address[:2]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://{host!s}:{port}/instance?stream=Repair-o9"
        with urllib.request.urlopen(url, timeout=30) as answer:
            page = answer.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert "<b>Forked</b> to" in page
    assert "/instance?stream=Repair-o9~g2" in page

    request = app.cancel(store, "Repair", "o9", reason="no longer wanted")
    assert request.stream == "Repair-o9" and not request.already
    with Service(app, store, clock=FakeClock()) as service:
        assert service.wait_until(
            lambda: status(store, app, "Repair-o9~g2") is Lifecycle.CANCELLED, WAIT
        )
        assert service.wait_idle(WAIT)
    assert types(store, "Repair-o9")[-1] == "Cancelled"  # the fork's mark, nothing after it
    assert len(types(store, "Repair-o9")) == len(OLD) + 1
