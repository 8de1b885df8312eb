"""A hotel booking whose card charge is always declined: the charge command is parked, the
booking fails on ``decider.CommandFailed``, and an operator's retry of the charge must not
charge a booking that has ended (``tests/service/test_svc_retry_ended.py``).

The handler answers as docs/processors.md shows: ``Failure(HandlerFailure(reason, ...))``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
from returns.result import Failure, Result

from decider import Command, Complete, Fail, Metadata, Send, Workflow, WorkflowEvent, message
from decider.processors import App, CommandFailed, HandlerFailure, by_correlation


@message("hotel.BookingRequested")
@attrs.frozen(kw_only=True)
class BookingRequested:
    """A guest asks for a room."""

    booking_id: str
    price_cents: int


@message("hotel.ChargeCard")
@attrs.frozen(kw_only=True)
class ChargeCard:
    """Charge the guest's card for the booking."""

    booking_id: str
    price_cents: int


@message("hotel.CardCharged")
@attrs.frozen(kw_only=True)
class CardCharged:
    """The card was charged."""

    booking_id: str


def decide(request: Any, state: None) -> Sequence[Command[Any]]:
    """Charge the card; confirm when charged; fail the booking when the charge failed."""
    match request:
        case BookingRequested(booking_id=booking_id, price_cents=price):
            return [Send(ChargeCard(booking_id=booking_id, price_cents=price))]
        case CardCharged():
            return [Complete()]
        case CommandFailed(reason=reason):
            return [Fail(f"payment failed: {reason}")]
    raise ValueError(f"unexpected {request!r}")


def evolve(state: None, event: WorkflowEvent[Any, Any]) -> None:
    """Nothing to remember."""
    return state


booking = Workflow("Booking", None, evolve, decide)


def _booking_id(request: BookingRequested, _: Metadata) -> str:
    return request.booking_id


booking_app = App("hotel")
"""``Booking`` and the card charge that is always declined."""
booking_app.workflow(
    booking,
    inputs={
        BookingRequested: _booking_id,
        CardCharged: by_correlation,
        CommandFailed: by_correlation,
    },
)


@booking_app.handler(ChargeCard)
def charge_card(command: ChargeCard, command_id: str) -> Result[list[object], HandlerFailure]:
    """Declined, for good (the documented positional reason)."""
    return Failure(HandlerFailure("card declined", retryable=False))
