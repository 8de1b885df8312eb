"""A hotel booking as a new user wrote it, for the diagram tests: the request says how long the
guest has to confirm (``confirm_within_s``); once the hotel holds the room, ``decide`` schedules
the timeout with it (5 to 15 minutes, or it refuses the hold); a confirmation completes the
booking, a timeout fails it, and both end in the one final state ``Done``."""

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
    """A guest asks for a room, to confirm within ``confirm_within_s`` seconds."""

    booking_id: str
    confirm_within_s: int


@message("bookings.HoldRoom")
@attrs.frozen(kw_only=True)
class HoldRoom:
    """Hold the room for the booking."""

    booking_id: str


@message("bookings.RoomHeld")
@attrs.frozen(kw_only=True)
class RoomHeld:
    """The hotel holds the room."""

    booking_id: str


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
    """Waiting for the hotel to hold the room; the guest then has ``within`` seconds."""

    within: int


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
        case Holding(within=within), RoomHeld():
            if not 300 <= within <= 900:
                raise ValueError("a hold lasts 5 to 15 minutes")
            timeout = ConfirmationTimedOut(booking_id=input.booking_id)
            return [Schedule(timedelta(seconds=within), timeout)]
        case AwaitingConfirmation(), BookingConfirmed():
            return [Complete()]
        case AwaitingConfirmation(), ConfirmationTimedOut():
            return [Fail("not confirmed in time")]
    raise ValueError(f"{type(input).__name__} is not expected in {state!r}")


def evolve(state: State, event: WorkflowEvent[Input, Any]) -> State:
    """The state after ``event``."""
    if isinstance(event, InitiatedBy) and isinstance(event.message, BookRoom):
        return Holding(event.message.confirm_within_s)
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

REFUSED_BOOKINGS = st.builds(BookRoom, booking_id=st.just("b-1"), confirm_within_s=st.just(-1))
"""Bookings whose hold ``decide`` refuses (a user's strategy, for the CLI test)."""

ONE_HOLD = st.builds(RoomHeld, booking_id=st.just("b-1"))
"""The one hold of booking ``b-1``."""
