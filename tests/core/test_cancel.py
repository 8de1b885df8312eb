"""Cancel requests: decided by a workflow that lists them, or cancelling the instance at once."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import pytest

from decider import (
    Began,
    Cancel,
    Cancelled,
    CancelRequested,
    Codec,
    Command,
    Ignored,
    InitiatedBy,
    Instance,
    Lifecycle,
    Received,
    Send,
    Sent,
    Workflow,
    WorkflowEvent,
    advance,
    handle_cancel,
    start,
)
from decider.testing import WorkflowSpec

REQUEST = CancelRequested(reason="the customer changed their mind")


@attrs.frozen
class Booking:
    """Test state: whether a room is held, and whether a cancel is under way."""

    held: bool = False
    cancelling: str | None = None


def _evolve(state: Booking, event: WorkflowEvent[object, str]) -> Booking:
    match event:
        case InitiatedBy("book"):
            return attrs.evolve(state, held=True)
        case Received(CancelRequested(reason=reason)):
            return attrs.evolve(state, cancelling=reason)
        case Received("released"):
            return attrs.evolve(state, held=False)
    return state


def _decide(input: object, state: Booking) -> Sequence[Command[str]]:
    match input, state:
        case "book", Booking():
            return [Send("hold room")]
        case CancelRequested(), Booking(held=True):
            return [Send("release room")]  # compensate first, end once it is done
        case "released", Booking(cancelling=str(reason)):
            return [Cancel(reason)]
    raise ValueError(f"{input!r} is not expected in {state!r}")


booking: Workflow[object, Booking, str] = Workflow("Booking", Booking(), _evolve, _decide)


def _running() -> Instance[Booking]:
    return advance(booking, start(booking), [Began(), InitiatedBy("book"), Sent("hold room")])


def test_a_workflow_that_does_not_decide_on_cancel_requests_is_cancelled_at_once() -> None:
    events = handle_cancel(booking, _running(), REQUEST, decides=False)

    assert events == [Received(REQUEST), Cancelled("the customer changed their mind")]
    assert advance(booking, _running(), events).status is Lifecycle.CANCELLED


def test_a_workflow_that_decides_on_cancel_requests_compensates_then_cancels() -> None:
    spec = WorkflowSpec(booking, decides_cancel=True)

    spec.given("book").when(REQUEST).then_commands(Send("release room")).then_state(
        Booking(held=True, cancelling="the customer changed their mind")
    )
    spec.given("book", REQUEST).when("released").then_commands(
        Cancel("the customer changed their mind")
    ).then_cancelled("changed their mind")
    spec.given("book", REQUEST, "released").when("book").then_ignored()


def test_handle_cancel_gives_a_deciding_workflow_the_request_as_an_input() -> None:
    assert handle_cancel(booking, _running(), REQUEST, decides=True) == [
        Received(REQUEST),
        Sent("release room"),
    ]


def test_the_spec_cancels_at_once_when_told_the_workflow_does_not_list_the_request() -> None:
    spec = WorkflowSpec(booking, decides_cancel=False)

    spec.given("book").when(REQUEST).then_events(
        Received(REQUEST), Cancelled("the customer changed their mind")
    ).then_cancelled()


@pytest.mark.parametrize("decides", [True, False])
def test_a_cancel_request_for_an_instance_that_has_not_started_records_nothing(
    decides: bool,
) -> None:
    assert handle_cancel(booking, start(booking), REQUEST, decides=decides) == []


@pytest.mark.parametrize("decides", [True, False])
@pytest.mark.parametrize("status", [Lifecycle.COMPLETED, Lifecycle.FAILED, Lifecycle.CANCELLED])
def test_a_cancel_request_for_an_ended_instance_is_ignored(
    decides: bool, status: Lifecycle
) -> None:
    ended = Instance(Booking(), status, 4)

    [event] = handle_cancel(booking, ended, REQUEST, decides=decides)

    assert isinstance(event, Ignored) and event.message == REQUEST


def test_a_cancel_request_is_a_registered_system_message_that_round_trips() -> None:
    codec = Codec()

    type_name, data = codec.encode_event(Received(REQUEST))

    assert type_name == "Received:decider.CancelRequested"
    assert codec.decode_event(type_name, data) == Received(REQUEST)
    assert codec.encode_event(Cancelled("x"))[0] == "Cancelled"
