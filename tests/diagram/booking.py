"""A hotel booking as a new user wrote it, for the diagram tests: the hold's reply says how long
the guest has to confirm (5 to 15 minutes, or ``decide`` refuses it), and ``decide`` schedules
the timeout with it; a confirmation completes the booking, a timeout fails it, and both end in
the one final state ``Done``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs
from hypothesis import strategies as st

from decider import (
    Complete,
    Completed,
    Fail,
    Failed,
    InitiatedBy,
    Metadata,
    Schedule,
    Scheduled,
    Send,
    Workflow,
    WorkflowEvent,
    message,
)
from decider.processors import App, by_correlation


@message("bookings.BookRoom")
@attrs.frozen(kw_only=True)
class BookRoom:
    """A guest asks for a room."""

    booking_id: str


@message("bookings.HoldRoom")
@attrs.frozen(kw_only=True)
class HoldRoom:
    """Hold the room for the booking."""

    booking_id: str


@message("bookings.RoomHeld")
@attrs.frozen(kw_only=True)
class RoomHeld:
    """The hotel holds the room for ``confirm_within_s`` seconds."""

    booking_id: str
    confirm_within_s: int


@message("bookings.ConfirmationTimedOut")
@attrs.frozen(kw_only=True)
class ConfirmationTimedOut:
    """The guest did not confirm in time."""

    booking_id: str


@message("bookings.BookingConfirmed")
@attrs.frozen(kw_only=True)
class BookingConfirmed:
    """The guest confirmed."""

    booking_id: str


@attrs.frozen
class Idle:
    """No booking yet."""


@attrs.frozen
class Holding:
    """Waiting for the hotel to hold the room."""


@attrs.frozen
class AwaitingConfirmation:
    """Waiting for the guest."""


@attrs.frozen
class Done:
    """Confirmed or timed out."""


Input = BookRoom | RoomHeld | BookingConfirmed | ConfirmationTimedOut
State = Idle | Holding | AwaitingConfirmation | Done
INPUTS: list[type[Any]] = [BookRoom, RoomHeld, BookingConfirmed, ConfirmationTimedOut]


def decide(input: Input, state: State) -> list[Any]:
    """Hold, then wait for the guest with a timeout, then complete or fail."""
    match state, input:
        case Idle(), BookRoom():
            return [Send(HoldRoom(booking_id=input.booking_id))]
        case Holding(), RoomHeld():
            if not 300 <= input.confirm_within_s <= 900:
                raise ValueError("a hold lasts 5 to 15 minutes")
            timeout = ConfirmationTimedOut(booking_id=input.booking_id)
            return [Schedule(timedelta(seconds=input.confirm_within_s), timeout)]
        case AwaitingConfirmation(), BookingConfirmed():
            return [Complete()]
        case AwaitingConfirmation(), ConfirmationTimedOut():
            return [Fail("not confirmed in time")]
    raise ValueError(f"{type(input).__name__} is not expected in {state!r}")


def evolve(state: State, event: WorkflowEvent[Input, Any]) -> State:
    """The state after ``event``."""
    if isinstance(event, InitiatedBy):
        return Holding()
    if isinstance(event, Scheduled):
        return AwaitingConfirmation()
    if isinstance(event, (Completed, Failed)):
        return Done()
    return state


workflow: Workflow[Input, State, Any] = Workflow("Booking", Idle(), evolve, decide)


def _booking_id(booking: BookRoom, _: Metadata) -> str:
    return booking.booking_id


app = App("bookings")
app.workflow(
    workflow,
    inputs={
        BookRoom: _booking_id,
        RoomHeld: by_correlation,
        BookingConfirmed: by_correlation,
        ConfirmationTimedOut: by_correlation,
    },
)

REFUSED_HOLDS = st.builds(RoomHeld, booking_id=st.just("b-1"), confirm_within_s=st.just(-1))
"""A strategy whose every hold ``decide`` refuses (a user's strategy, for the CLI test)."""
