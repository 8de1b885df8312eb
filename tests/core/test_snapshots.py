"""Snapshots in the pure core: a state as JSON with its shape version, and back."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decider import (
    DecodeError,
    Instance,
    Lifecycle,
    StateCodec,
    Workflow,
    WorkflowDefinitionError,
    WorkflowEvent,
    advance,
    fold,
    handle,
    snapshot_due,
    start,
)
from decider.testing import strategy_for
from samples.order_fulfilment import workflow
from samples.order_fulfilment.messages import (
    OrderPlaced,
    OrderShipped,
    PaymentConfirmed,
    PaymentRefunded,
    PaymentTimedOut,
    StockReservationFailed,
    StockReserved,
)
from samples.order_fulfilment.workflow import AwaitingPayment, State, UnexpectedInput

snapshotted = attrs.evolve(workflow, snapshot_every=3, state_version="orders-2")
codec = StateCodec(snapshotted)

ORDER = st.just("ord-1")
PLACED = strategy_for(OrderPlaced, order_id=ORDER)
INPUTS = st.one_of(
    PLACED,
    strategy_for(PaymentConfirmed, order_id=ORDER),
    strategy_for(PaymentTimedOut, order_id=ORDER),
    strategy_for(StockReserved, order_id=ORDER),
    strategy_for(StockReservationFailed, order_id=ORDER),
    strategy_for(PaymentRefunded, order_id=ORDER),
    strategy_for(OrderShipped, order_id=ORDER),
)


# Every path starts with an order placed, so at least its first input is handled: a walk that
# skipped every input (decide raising for all of them) would check nothing.
PATHS = st.builds(lambda first, rest: [first, *rest], PLACED, st.lists(INPUTS, max_size=11))


def _walk(inputs: list[Any]) -> list[tuple[Instance[State], list[WorkflowEvent[Any, Any]]]]:
    """Every instance along the path the inputs take, with the events up to it.

    Only the workflow's own rejection of an input in the wrong state is passed over; any other
    exception fails the test, and the first input (an order placed) must be handled.
    """
    instance, history = start(snapshotted), list[WorkflowEvent[Any, Any]]()
    path = [(instance, list(history))]
    for input in inputs:
        try:
            events = handle(snapshotted, instance, input)
        except UnexpectedInput:
            continue
        history.extend(events)
        instance = advance(snapshotted, instance, events)
        path.append((instance, list(history)))
    assert len(path) > 1, f"no input was handled: {inputs!r}"
    return path


@settings(max_examples=60, deadline=None)
@given(PATHS, st.frozensets(st.text(max_size=8), max_size=4))
def test_every_reachable_state_comes_back_from_its_snapshot(
    inputs: list[Any], handled: frozenset[str]
) -> None:
    for instance, history in _walk(inputs):
        restored = codec.decode(codec.encode(instance, handled))

        assert restored.instance == instance
        assert restored.handled == handled
        assert fold(snapshotted, history) == restored.instance.state


@settings(max_examples=40, deadline=None)
@given(PATHS, st.integers(min_value=0, max_value=30))
def test_folding_the_events_after_a_snapshot_gives_the_state_of_the_whole_stream(
    inputs: list[Any], cut: int
) -> None:
    *_, (whole, history) = _walk(inputs)
    cut = min(cut, len(history))
    snapshot = codec.encode(advance(snapshotted, start(snapshotted), history[:cut]))

    resumed = advance(snapshotted, codec.decode(snapshot).instance, history[cut:])

    assert resumed == whole


def test_a_snapshot_is_json_with_the_class_of_the_state_named() -> None:
    state = AwaitingPayment(order_id="o", items=(), amount_cents=5)

    doc = json.loads(codec.encode(Instance(state, Lifecycle.RUNNING, 3), {"m2", "m1"}))

    assert doc == {
        "workflow": "OrderFulfilment",
        "state_version": "orders-2",
        "version": 3,
        "status": "running",
        "state": {"_type": "AwaitingPayment", "order_id": "o", "items": [], "amount_cents": 5},
        "handled": ["m1", "m2"],
    }


def test_a_snapshot_of_another_state_version_is_refused_so_it_is_rebuilt() -> None:
    old = StateCodec(attrs.evolve(snapshotted, state_version="orders-1"))
    data = old.encode(start(snapshotted))

    with pytest.raises(DecodeError, match="state_version 'orders-1' is not the current 'orders-2'"):
        codec.decode(data)


def test_a_snapshot_that_no_longer_fits_the_state_classes_is_refused() -> None:
    doc = json.loads(
        codec.encode(
            Instance(AwaitingPayment(order_id="o", items=(), amount_cents=5), Lifecycle.RUNNING, 3)
        )
    )
    doc["state"]["_type"] = "Vanished"

    with pytest.raises(DecodeError, match="the state does not decode"):
        codec.decode(json.dumps(doc).encode())


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"not json", "invalid JSON"),
        (b"[]", "expected a JSON object"),
        (b'{"workflow": "Other"}', "snapshot of workflow 'Other'"),
        (
            b'{"workflow": "OrderFulfilment", "state_version": "orders-2", "version": -1}',
            "'version' must be a non-negative integer",
        ),
        (
            b'{"workflow": "OrderFulfilment", "state_version": "orders-2", "version": 1,'
            b' "handled": [1]}',
            "'handled' must be a list of message ids",
        ),
    ],
)
def test_a_broken_snapshot_is_refused_naming_why(data: bytes, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        codec.decode(data)


def test_the_state_type_comes_from_evolves_annotation_or_is_given() -> None:
    assert codec.state_type == State
    counter: Workflow[Any, int, Any] = Workflow(
        "Count", 0, lambda s, e: s + 1, lambda i, s: [], state_type=int
    )
    assert (
        StateCodec(counter)
        .decode(StateCodec(counter).encode(Instance(7, Lifecycle.RUNNING, 7)))
        .instance.state
        == 7
    )


def test_a_state_type_that_cannot_be_known_is_refused_with_what_to_write() -> None:
    anonymous: Workflow[Any, int, Any] = Workflow(
        "Count", 0, lambda s, e: s + 1, lambda i, s: [], snapshot_every=10
    )

    with pytest.raises(WorkflowDefinitionError, match=r"pass Workflow\(\.\.\., state_type=State\)"):
        StateCodec(anonymous)


def test_a_state_that_is_not_json_is_refused_naming_the_workflow() -> None:
    opaque: Workflow[Any, object, Any] = Workflow(
        "Opaque", None, lambda s, e: s, lambda i, s: [], state_type=object
    )

    with pytest.raises(
        WorkflowDefinitionError, match=r"'Opaque': its state .* cannot be snapshotted"
    ):
        StateCodec(opaque).encode(Instance(object(), Lifecycle.RUNNING, 1))


@pytest.mark.parametrize(
    ("before", "after", "due"),
    [(0, 2, False), (2, 3, True), (0, 4, True), (3, 5, False), (5, 9, True), (6, 6, False)],
)
def test_a_snapshot_is_due_each_time_an_append_passes_a_multiple_of_the_interval(
    before: int, after: int, due: bool
) -> None:
    assert snapshot_due(snapshotted, before, after) is due
    assert snapshot_due(workflow, before, after) is False  # no snapshot_every: never


def _quote_scenario() -> tuple[Workflow[Any, Any, Any], list[Any]]:
    from samples.quotes import workflow as quotes
    from samples.quotes.messages import AcceptQuote, QuoteLine, RequestQuote

    lines = (QuoteLine(sku="teapot", quantity=4),)
    request = RequestQuote(quote_id="q", customer_id="c", lines=lines)
    return quotes, [request, AcceptQuote(quote_id="q")]


def _fine_scenario() -> tuple[Workflow[Any, Any, Any], list[Any]]:
    from samples.traffic_fine import workflow as fines
    from samples.traffic_fine.messages import (
        PoliceReportPublished,
        SpeedingViolation,
        TrafficFineSystemNumberGenerated,
    )

    offense = SpeedingViolation(maximum_speed="50", measured_speed="70")
    report = PoliceReportPublished(police_report_id="r", offense=offense)
    return fines, [report, TrafficFineSystemNumberGenerated(police_report_id="r", number="n")]


@pytest.mark.parametrize("scenario", [_quote_scenario, _fine_scenario], ids=["quotes", "fines"])
def test_the_other_samples_states_come_back_from_their_snapshots(scenario: Any) -> None:
    sample, inputs = scenario()
    states = StateCodec(sample)
    instance = start(sample)
    for input in inputs:
        instance = advance(sample, instance, handle(sample, instance, input))

        assert states.decode(states.encode(instance)).instance == instance
