"""An app whose ``decide`` had a bug, and the same app with the bug fixed: what the fork tests
repair (``tests.support.fork_app:buggy_app`` and ``tests.support.fork_app:fixed_app`` for the
command line).

``Repair``: ``Order`` sends ``Charge`` (handled by ``charge``, which answers ``Charged``) and
schedules a ``Remind`` an hour later. On ``Charged`` the buggy code fails the instance; the
fixed one sends ``Ship`` (handled by ``ship``: ``Shipped``). ``Poke`` completes a shipped
order (and is recorded, deciding nothing, before). Every handler call is counted in
:data:`CALLS` (by app name and handler), and ``Remind`` in the state.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import attrs

from decider import (
    Command,
    Complete,
    Fail,
    Metadata,
    Received,
    Schedule,
    Send,
    Workflow,
    WorkflowEvent,
    message,
)
from decider.processors import App, FakeClock, RetryPolicy, Service, by_correlation
from decider.stores.protocol import EventStore
from tests.support.stores import types

CALLS: collections.Counter[tuple[str, str]] = collections.Counter()
"""How many times each (app name, handler) was called in this process."""

DECLINED: set[str] = set()
"""The orders whose charge fails now (it is parked at its first failure)."""

REMIND_AFTER = timedelta(hours=1)


@message("repair.Order")
@attrs.frozen(kw_only=True)
class Order:
    order_id: str
    amount: int


@message("repair.Charge")
@attrs.frozen(kw_only=True)
class Charge:
    order_id: str
    amount: int


@message("repair.Charged")
@attrs.frozen(kw_only=True)
class Charged:
    order_id: str


@message("repair.Ship")
@attrs.frozen(kw_only=True)
class Ship:
    order_id: str


@message("repair.Shipped")
@attrs.frozen(kw_only=True)
class Shipped:
    order_id: str


@message("repair.Remind")
@attrs.frozen(kw_only=True)
class Remind:
    order_id: str


@message("repair.Poke")
@attrs.frozen(kw_only=True)
class Poke:
    order_id: str


@attrs.frozen
class State:
    shipped: bool = False
    reminded: int = 0


def evolve(state: State, event: WorkflowEvent[Any, Any]) -> State:
    match event:
        case Received(message=Shipped()):
            return attrs.evolve(state, shipped=True)
        case Received(message=Remind()):
            return attrs.evolve(state, reminded=state.reminded + 1)
    return state


def _decide(fixed: bool, surcharge: int = 0) -> Any:
    def decide(input: Any, state: State) -> Sequence[Command[Any]]:
        match input:
            case Order(order_id=oid, amount=amount):
                return [
                    Send(Charge(order_id=oid, amount=amount + surcharge)),
                    Schedule(REMIND_AFTER, Remind(order_id=oid)),
                ]
            case Charged(order_id=oid):
                if not fixed:
                    return [Fail("the bug: a charged order fails")]
                return [Send(Ship(order_id=oid))]
            case Poke():
                return [Complete()] if state.shipped else []
        return []

    return decide


buggy = Workflow("Repair", State(), evolve, _decide(fixed=False))
fixed = Workflow("Repair", State(), evolve, _decide(fixed=True))


def _order_id(msg: Order | Poke, _: Metadata) -> str:
    return msg.order_id


def make_app(name: str, *, repaired: bool, surcharge: int = 0) -> App:
    """The app named ``name``, with the buggy ``decide`` or the fixed one (which charges
    ``surcharge`` more than the order's amount, if given)."""
    app = App(name)
    chosen = fixed if repaired else buggy
    if surcharge:
        chosen = attrs.evolve(chosen, decide=_decide(fixed=repaired, surcharge=surcharge))
    app.workflow(
        chosen,
        inputs={
            Order: _order_id,
            Poke: _order_id,
            Charged: by_correlation,
            Shipped: by_correlation,
            Remind: by_correlation,
        },
    )

    @app.handler(Charge, retry=RetryPolicy(max_attempts=1))
    def charge(command: Charge, command_id: str) -> list[object]:
        CALLS[name, "charge"] += 1
        if command.order_id in DECLINED:
            raise RuntimeError(f"the card of order {command.order_id} was declined")
        return [Charged(order_id=command.order_id)]

    @app.handler(Ship)
    def ship(command: Ship, command_id: str) -> list[object]:
        CALLS[name, "ship"] += 1
        return [Shipped(order_id=command.order_id)]

    return app


buggy_app = make_app("repair", repaired=False)
fixed_app = make_app("repair", repaired=True)


def run_buggy(store: EventStore, name: str, *orders: str, wait: float = 30.0) -> None:
    """Each order through the buggy app ``name``, in this process: charged once, then failed."""
    buggy = make_app(name, repaired=False)
    with Service(buggy, store, clock=FakeClock()) as service:
        for order in orders:
            buggy.publish(store, Order(order_id=order, amount=5), "repair-inputs")
        assert service.wait_until(
            lambda: all(types(store, f"Repair-{o}")[-1:] == ["Failed"] for o in orders), wait
        )
        assert service.wait_idle(wait)
