"""Definition diagrams explored from each sample's decide and evolve; paths and observed counts;
the Mermaid text; ``decider diagram`` run as a process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from decider import Complete, Completed, Workflow, WorkflowEvent, advance, handle, start
from decider.diagram import (
    CURRENT,
    ERROR,
    FUTURE,
    PAST,
    Transition,
    explore,
    observed,
    path,
    path_classes,
    to_mermaid,
)
from samples.order_fulfilment import workflow as orders
from samples.order_fulfilment.messages import (
    OrderPlaced,
    OrderShipped,
    PaymentConfirmed,
    PaymentRefunded,
    PaymentTimedOut,
    StockReservationFailed,
    StockReserved,
)
from samples.traffic_fine.app import app as fines_app
from samples.traffic_fine.messages import (
    Input,
    Output,
    ParkingViolation,
    PoliceReportPublished,
    SpeedingViolation,
    TrafficFineManualIdentificationCodeGenerated,
    TrafficFineSystemNumberGenerated,
)
from samples.traffic_fine.workflow import workflow as fines

ROOT = Path(__file__).resolve().parents[2]
FINES_INPUTS = [
    PoliceReportPublished,
    TrafficFineSystemNumberGenerated,
    TrafficFineManualIdentificationCodeGenerated,
]
ORDER_INPUTS = [
    OrderPlaced,
    PaymentConfirmed,
    PaymentTimedOut,
    StockReserved,
    StockReservationFailed,
    PaymentRefunded,
    OrderShipped,
]

# The diagram of "The Workflow Pattern": PoliceReportPublished [yes] / Send(Generate...Number),
# [no] / Complete; then the number, then the code, then Send(IssueTrafficFine), Complete.
FINES_TRANSITIONS = {
    Transition(
        "Initial",
        "AwaitingSystemNumber",
        "PoliceReportPublished / Send(GenerateTrafficFineSystemNumber)",
    ),
    Transition("Initial", "Final", "PoliceReportPublished / Complete"),
    Transition(
        "AwaitingSystemNumber",
        "AwaitingManualIdentificationCode",
        "TrafficFineSystemNumberGenerated / Send(GenerateTrafficFineManualIdentificationCode)",
    ),
    Transition(
        "AwaitingManualIdentificationCode",
        "Final",
        "TrafficFineManualIdentificationCodeGenerated / Send(IssueTrafficFine), Complete",
    ),
}

ORDER_TRANSITIONS = {
    Transition(
        "Initial", "AwaitingPayment", "OrderPlaced / Send(ChargePayment), Schedule(PaymentTimedOut)"
    ),
    Transition("AwaitingPayment", "ReservingStock", "PaymentConfirmed / Send(ReserveStock)"),
    Transition("AwaitingPayment", "Final", "PaymentTimedOut / Publish(OrderCancelled), Complete"),
    Transition("ReservingStock", "Shipping", "StockReserved / Send(ShipOrder)"),
    Transition("ReservingStock", "Refunding", "StockReservationFailed / Send(RefundPayment)"),
    Transition("Shipping", "Final", "OrderShipped / Publish(OrderFulfilled), Complete"),
    Transition("Refunding", "Final", "PaymentRefunded / Publish(OrderCancelled), Complete"),
    # The deadline that comes after the payment changes nothing:
    Transition("ReservingStock", "ReservingStock", "PaymentTimedOut / -"),
    Transition("Shipping", "Shipping", "PaymentTimedOut / -"),
    Transition("Refunding", "Refunding", "PaymentTimedOut / -"),
}


def test_the_traffic_fine_diagram_is_the_one_of_the_workflow_pattern() -> None:
    diagram = explore(fines, FINES_INPUTS)
    assert diagram.initial == "Initial"
    assert set(diagram.states) == {
        "Initial",
        "AwaitingSystemNumber",
        "AwaitingManualIdentificationCode",
        "Final",
    }
    assert set(diagram.transitions) == FINES_TRANSITIONS
    assert diagram.terminals == {"Final": ("completed",)}


def test_the_order_fulfilment_diagram_has_every_path_and_no_other() -> None:
    diagram = explore(orders, ORDER_INPUTS)
    assert set(diagram.states) == {
        "Initial",
        "AwaitingPayment",
        "ReservingStock",
        "Shipping",
        "Refunding",
        "Final",
    }
    assert set(diagram.transitions) == ORDER_TRANSITIONS
    assert diagram.terminals == {"Final": ("completed",)}


def test_exploring_again_gives_the_same_diagram_and_another_seed_the_same_graph() -> None:
    first, again = explore(orders, ORDER_INPUTS), explore(orders, ORDER_INPUTS)
    assert first == again
    assert to_mermaid(first) == to_mermaid(again)
    assert set(explore(orders, ORDER_INPUTS, seed=7).transitions) == ORDER_TRANSITIONS


def test_an_input_a_state_rejects_makes_no_transition() -> None:
    # Only the code ever comes: decide rejects it in the initial state, so nothing moves.
    diagram = explore(fines, [TrafficFineManualIdentificationCodeGenerated])
    assert diagram.states == ("Initial",)
    assert diagram.transitions == ()
    assert diagram.terminals == {}


def _mermaid_edges(text: str) -> set[tuple[str, str, str]]:
    edges = set()
    for line in text.splitlines()[1:]:
        found = re.fullmatch(r"    (\S+) --> (\S+)(?: : (.*))?", line)
        if found:
            edges.add((found.group(1), found.group(2), found.group(3) or ""))
    return edges


def test_the_mermaid_text_draws_start_transitions_and_end() -> None:
    text = to_mermaid(explore(fines, FINES_INPUTS))
    assert text.splitlines()[0] == "stateDiagram-v2"
    assert _mermaid_edges(text) == {
        ("[*]", "Initial", ""),
        *((t.source, t.target, t.label) for t in FINES_TRANSITIONS),
        ("Final", "[*]", "completed"),
    }


def _history(*inputs: Input) -> list[WorkflowEvent[Input, Output]]:
    instance, history = start(fines), list[WorkflowEvent[Input, Output]]()
    for value in inputs:
        events = handle(fines, instance, value)
        history += events
        instance = advance(fines, instance, events)
    return history


SPEEDING = PoliceReportPublished(
    police_report_id="PR-1",
    offense=SpeedingViolation(maximum_speed="50", measured_speed="80"),
)
NUMBER = TrafficFineSystemNumberGenerated(police_report_id="PR-1", number="N")
CODE = TrafficFineManualIdentificationCodeGenerated(police_report_id="PR-1", number="N", code="C")
PARKING = PoliceReportPublished(police_report_id="PR-2", offense=ParkingViolation(location="x"))


def test_an_instance_path_and_its_classes_on_the_definition() -> None:
    definition = explore(fines, FINES_INPUTS)
    steps = path(fines, _history(SPEEDING, NUMBER))
    assert [(s.source, s.target) for s in steps] == [
        ("Initial", "AwaitingSystemNumber"),
        ("AwaitingSystemNumber", "AwaitingManualIdentificationCode"),
    ]
    assert all(step in definition.transitions for step in steps)
    assert path_classes(definition, steps, error=False) == {
        "Initial": PAST,
        "AwaitingSystemNumber": PAST,
        "AwaitingManualIdentificationCode": CURRENT,
        "Final": FUTURE,
    }
    marked = path_classes(definition, steps, error=True)
    assert marked["AwaitingManualIdentificationCode"] == ERROR
    text = to_mermaid(definition, marked)
    assert "    class Initial,AwaitingSystemNumber past" in text
    assert "    class AwaitingManualIdentificationCode error" in text
    assert "    classDef error " in text
    assert path_classes(definition, [], error=False)["Initial"] == CURRENT


def test_an_ignored_input_makes_no_step() -> None:
    history = _history(PARKING, NUMBER)  # the number arrives after completion: ignored
    assert [(s.source, s.target) for s in path(fines, history)] == [("Initial", "Final")]


def test_observed_counts_the_transitions_instances_took() -> None:
    histories = [
        _history(SPEEDING, NUMBER, CODE),
        _history(SPEEDING, NUMBER),
        _history(PARKING),
    ]
    seen = observed(fines, histories)
    by_edge = {(t.source, t.target): n for t, n in seen.counts.items()}
    assert by_edge == {
        ("Initial", "AwaitingSystemNumber"): 2,
        ("AwaitingSystemNumber", "AwaitingManualIdentificationCode"): 2,
        ("AwaitingManualIdentificationCode", "Final"): 1,
        ("Initial", "Final"): 1,
    }
    assert seen.terminals == {"Final": ("completed",)}
    assert (
        "    Initial --> AwaitingSystemNumber : "
        "PoliceReportPublished / Send(GenerateTrafficFineSystemNumber) (2)"
    ) in to_mermaid(seen).splitlines()


@attrs.frozen
class Open:
    """Taking knocks."""


@attrs.frozen
class Closed:
    """Done."""


@attrs.frozen(kw_only=True)
class Knock:
    """Knocks once, or ``last`` time."""

    last: bool


def test_a_loop_and_an_end_both_show() -> None:
    wf: Workflow[Knock, Open | Closed, Knock] = Workflow(
        "Door",
        Open(),
        lambda s, e: Closed() if isinstance(e, Completed) else s,
        lambda i, s: [Complete()] if i.last else [],
    )
    diagram = explore(wf, [Knock])
    assert set(diagram.transitions) == {
        Transition("Open", "Open", "Knock / -"),
        Transition("Open", "Closed", "Knock / Complete"),
    }
    assert diagram.terminals == {"Closed": ("completed",)}
    assert diagram.edges() == {("Open", "Open"), ("Open", "Closed")}


def _decider(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "decider.processors.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )


def test_decider_diagram_prints_the_definition() -> None:
    done = _decider("diagram", "samples.traffic_fine:app", fines.name)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("stateDiagram-v2\n")
    # The README shows this very output.
    readme = (ROOT / "README.md").read_text()
    shown = re.search(
        rf"\$ decider diagram samples.traffic_fine:app {fines.name}\n(.*?)```", readme, re.S
    )
    assert shown is not None and shown.group(1) == done.stdout + done.stderr
    assert _mermaid_edges(done.stdout) == {
        ("[*]", "Initial", ""),
        *((t.source, t.target, t.label) for t in FINES_TRANSITIONS),
        ("Final", "[*]", "completed"),
    }


def test_decider_diagram_names_an_unknown_workflow() -> None:
    done = _decider("diagram", "samples.traffic_fine:app", "Nope")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "decider: error: no workflow 'Nope' in app 'traffic-fines' "
        "(known: IssueTrafficFineForSpeedingViolation)"
    )


def test_decider_diagram_observed_and_instance_read_the_store(tmp_path: Path) -> None:
    from decider.processors import Service, status
    from decider.stores.sqlite import SqliteEventStore
    from samples.traffic_fine.app import REPORTS_STREAM

    db = tmp_path / "events.db"
    store = SqliteEventStore(db)
    with Service(fines_app, store) as service:
        fines_app.publish_many(store, [SPEEDING, PARKING], REPORTS_STREAM)
        assert service.wait_until(
            lambda: [i.status.value for i in status(store, fines_app)] == ["completed"] * 2, 30
        )
        assert service.wait_idle(30)
    store.close()
    uri = f"sqlite:///{db}"
    seen = _decider("diagram", "samples.traffic_fine:app", fines.name, "--store", uri, "--observed")
    assert seen.returncode == 0, seen.stderr
    edges = {
        (s, t): label[-3:] for s, t, label in _mermaid_edges(seen.stdout) if "[*]" not in (s, t)
    }
    assert ("Final", "[*]", "completed") in _mermaid_edges(seen.stdout)
    assert edges == {
        ("Initial", "AwaitingSystemNumber"): "(1)",
        ("AwaitingSystemNumber", "AwaitingManualIdentificationCode"): "(1)",
        ("AwaitingManualIdentificationCode", "Final"): "(1)",
        ("Initial", "Final"): "(1)",
    }
    one = _decider(
        "diagram",
        "samples.traffic_fine:app",
        fines.name,
        "--store",
        uri,
        "--instance",
        f"{fines.name}-PR-2",
    )
    assert one.returncode == 0, one.stderr
    assert "    class Initial past" in one.stdout
    assert "    class Final current" in one.stdout
    assert "    class AwaitingSystemNumber" not in one.stdout  # neither visited nor ahead


@pytest.mark.parametrize("flag", ["--observed", "--instance=X"])
def test_decider_diagram_needs_a_store_to_read(flag: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DECIDER_STORE", raising=False)
    done = _decider("diagram", "samples.traffic_fine:app", fines.name, flag)
    assert done.returncode == 2
    assert "give --store URI" in done.stderr
