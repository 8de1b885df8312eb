"""An app whose user code raises a few calls deep, for the tests of kept tracebacks: ``decide``
raises ``KeyError('missing_key')`` for a booking of hotel ``"nowhere"`` (the input is skipped),
and the ``Charge`` handler raises ``KeyError('card_token')`` for every charge (parked after one
attempt)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from decider import Command, Complete, Metadata, Send, Workflow, WorkflowEvent, message
from decider.processors import App, RetryPolicy

INPUTS = "bookings"
"""The stream the bookings are published to."""


@message("ftest.BookingRequested")
@attrs.frozen(kw_only=True)
class BookingRequested:
    """A booking of ``nights`` at ``hotel``."""

    booking_id: str
    hotel: str


@message("ftest.Charge")
@attrs.frozen(kw_only=True)
class Charge:
    """Charge the card of a booking."""

    booking_id: str


def _rates() -> dict[str, int]:
    return {"ritz": 300}


def _rate_of(hotel: str) -> int:
    return _rates()[{"ritz": "ritz"}.get(hotel, "missing_key")]


def _price(request: BookingRequested) -> int:
    return _rate_of(request.hotel) * 2


def decide(request: Any, state: None) -> Sequence[Command[Any]]:
    """Charge the booking (its price read three calls deep: an unknown hotel raises)."""
    _price(request)
    return [Send(Charge(booking_id=request.booking_id)), Complete()]


def evolve(state: None, event: WorkflowEvent[Any, Any]) -> None:
    """No state."""
    return state


booking = Workflow("Booking", None, evolve, decide)


def _booking_id(request: BookingRequested, _: Metadata) -> str:
    return request.booking_id


def _card_token(command: Charge) -> str:
    cards: dict[str, str] = {}
    return cards["card_token"]


app = App("failing", retry=RetryPolicy(max_attempts=1, initial_delay=0, jitter=0))
app.workflow(booking, inputs={BookingRequested: _booking_id})


@app.handler(Charge)
def charge(command: Charge, command_id: str) -> list[object]:
    """Charge the card: always fails (no card token is known)."""
    _card_token(command)
    return []
