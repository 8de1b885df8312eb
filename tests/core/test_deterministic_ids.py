"""Ids: what a workflow records has derived, repeatable ids; what is new gets a prefixed ULID."""

from __future__ import annotations

import pickle
import time
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ulid import ULID

from decider import Codec, Workflow, WorkflowEvent, advance, event_id, fold, handle, new_id, start
from decider.ids import NAMESPACE
from decider.testing import strategy_for
from samples import order_fulfilment, traffic_fine
from samples.order_fulfilment.messages import (
    OrderPlaced,
    PaymentConfirmed,
    PaymentTimedOut,
    StockReservationFailed,
    StockReserved,
)
from samples.order_fulfilment.workflow import UnexpectedInput as OrderUnexpected
from samples.traffic_fine.messages import (
    PoliceReportPublished,
    TrafficFineManualIdentificationCodeGenerated,
    TrafficFineSystemNumberGenerated,
)
from samples.traffic_fine.workflow import UnexpectedInput as FineUnexpected

codec = Codec()
Record = tuple[uuid.UUID, str, bytes]


def _records(stream: str, message_id: str, events: list[Any]) -> list[Record]:
    """What a processor appends: (event id, stored type name, JSON bytes) per event."""
    return [
        (event_id(stream, message_id, index), *codec.encode_event(event))
        for index, event in enumerate(events)
    ]


def _reread(history: list[WorkflowEvent[Any, Any]]) -> list[WorkflowEvent[Any, Any]]:
    """The history as a restarted processor reads it back from the store."""
    return [codec.decode_event(*codec.encode_event(event)) for event in history]


def test_event_ids_depend_on_stream_message_and_index_only() -> None:
    assert event_id("Fine-1", "msg_1", 0) == event_id("Fine-1", "msg_1", 0)
    assert len({event_id(s, m, i) for s in ("A", "B") for m in ("m1", "m2") for i in (0, 1)}) == 8
    assert event_id("Fine-1", "msg_1", 0).version == 5


# Each sample with its first input (which starts an instance), the inputs that may follow, and
# the exception its decide raises for an input it does not expect in the state it is in.
SAMPLES: list[
    tuple[Workflow[Any, Any, Any], st.SearchStrategy[Any], st.SearchStrategy[Any], type[Exception]]
] = [
    (
        traffic_fine.workflow,
        strategy_for(PoliceReportPublished),
        st.one_of(
            strategy_for(PoliceReportPublished),
            strategy_for(TrafficFineSystemNumberGenerated),
            strategy_for(TrafficFineManualIdentificationCodeGenerated),
        ),
        FineUnexpected,
    ),
    (
        order_fulfilment.workflow,
        strategy_for(OrderPlaced),
        st.one_of(
            strategy_for(OrderPlaced),
            strategy_for(PaymentConfirmed),
            strategy_for(PaymentTimedOut),
            strategy_for(StockReserved),
            strategy_for(StockReservationFailed),
        ),
        OrderUnexpected,
    ),
]


@pytest.mark.parametrize(
    ("workflow", "first", "inputs", "unexpected"), SAMPLES, ids=["traffic_fine", "orders"]
)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_handling_an_input_again_after_a_restart_writes_identical_records(
    workflow: Workflow[Any, Any, Any],
    first: st.SearchStrategy[Any],
    inputs: st.SearchStrategy[Any],
    unexpected: type[Exception],
    data: st.DataObject,
) -> None:
    stream = workflow.stream("wf_1")
    instance, history = start(workflow), list[WorkflowEvent[Any, Any]]()
    handled = 0
    drawn = [data.draw(first), *data.draw(st.lists(inputs, max_size=19))]
    for index, input in enumerate(drawn):
        message_id = f"msg_{index}"
        try:
            events = handle(workflow, instance, input)
        except unexpected:
            continue  # the workflow's own rejection of an input in the wrong state
        handled += 1
        # a processor that crashed before acknowledging refolds the stored history and retries
        restarted = advance(workflow, start(workflow), _reread(history))
        again = handle(workflow, restarted, codec.decode_message(*codec.encode_message(input)))

        assert _records(stream, message_id, again) == _records(stream, message_id, events)
        history.extend(events)
        instance = advance(workflow, instance, events)
    assert handled >= 1, f"no input was handled: {drawn!r}"
    assert fold(workflow, _reread(history)) == instance.state


def test_new_id_is_a_prefixed_ulid() -> None:
    made = new_id("wf")
    prefix, _, rest = made.partition("_")

    assert prefix == "wf"
    assert abs(ULID.from_str(rest).timestamp - time.time()) < 60


def test_new_ids_sort_by_the_millisecond_they_were_made_in() -> None:
    earlier = new_id("msg")
    started = time.monotonic()
    millisecond = time.time_ns() // 1_000_000
    # spin (no sleep) until the clock has moved on to another millisecond
    while time.time_ns() // 1_000_000 == millisecond:
        assert time.monotonic() - started < 1, "the clock did not move"
    later = new_id("msg")

    assert earlier < later
    assert len({new_id("msg") for _ in range(1000)}) == 1000


@pytest.mark.parametrize("prefix", ["", "Wf", "1wf", "w_f", "w-f", "a" * 17])
def test_new_id_refuses_a_malformed_prefix(prefix: str) -> None:
    with pytest.raises(ValueError, match="must be 1-16 lower-case letters or digits"):
        new_id(prefix)


@given(st.text(), st.text(), st.integers(min_value=0, max_value=10**6))
def test_event_ids_are_the_uuid5_of_stream_cause_and_index(
    stream: str, cause: str, index: int
) -> None:
    """The hand-rolled computation is exactly uuid.uuid5 (ids stored earlier stay valid)."""
    expected = uuid.uuid5(NAMESPACE, f"{stream}\x1f{cause}\x1f{index}")
    actual = event_id(stream, cause, index)
    assert actual == expected
    assert (actual.version, actual.variant) == (5, uuid.RFC_4122)
    # made without UUID.__init__: still a plain UUID in every way a store or a user sees it
    assert type(actual) is uuid.UUID
    assert (str(actual), repr(actual), actual.bytes, hash(actual), actual.is_safe) == (
        str(expected),
        repr(expected),
        expected.bytes,
        hash(expected),
        expected.is_safe,
    )
    assert pickle.loads(pickle.dumps(actual)) == expected
