"""Quote: price a request at once and reply; hold the price until it is accepted or expires.

The caller of a request waits for the reply, so ``decide`` answers in the same decision: the
price comes from :data:`PRICES`, a table in the code (``decide`` reads no database), with
:data:`VOLUME_DISCOUNT_PERCENT` off totals of :data:`VOLUME_DISCOUNT_FROM_CENTS` or more. A
request for an unknown SKU is declined. A quote holds for :data:`VALIDITY`: accepting it in
time replies ``QuoteAccepted`` (and publishes it for the order system); a request repeated
while it holds (a caller that timed out and asked again) gets the same quote.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TypeAlias

import attrs

from decider import (
    Command,
    Complete,
    Completed,
    InitiatedBy,
    Publish,
    Replied,
    Reply,
    Schedule,
    Workflow,
    WorkflowEvent,
)
from samples.quotes.messages import (
    AcceptQuote,
    Input,
    Output,
    Quote,
    QuoteAccepted,
    QuoteDeclined,
    QuoteExpired,
    QuoteLine,
    RequestQuote,
)

PRICES: dict[str, int] = {"mug": 850, "tea": 1200, "teapot": 3900}
"""The unit price of each stock-keeping unit, in cents."""

VOLUME_DISCOUNT_FROM_CENTS = 10_000
"""The total from which the volume discount applies."""

VOLUME_DISCOUNT_PERCENT = 10
"""The volume discount, in percent of the total."""

VALIDITY = timedelta(hours=24)
"""How long a quote holds."""


@attrs.frozen(kw_only=True)
class Initial:
    """No request yet."""


@attrs.frozen(kw_only=True)
class Requested:
    """A request came; its answer is being recorded."""

    customer_id: str


@attrs.frozen(kw_only=True)
class Quoted:
    """A quote was given and holds."""

    quote: Quote
    customer_id: str


@attrs.frozen(kw_only=True)
class Final:
    """The quote was declined, accepted or expired."""


State: TypeAlias = Initial | Requested | Quoted | Final


class UnexpectedInput(Exception):
    """An input the workflow does not expect in its current state."""

    def __init__(self, message: object, state: State) -> None:
        super().__init__(f"{type(message).__name__} is not expected in state {state!r}")


def price(request: RequestQuote) -> Quote | QuoteDeclined:
    """The quote for a request, or why it cannot be priced."""
    unknown = sorted({line.sku for line in request.lines} - PRICES.keys())
    if unknown:
        return QuoteDeclined(quote_id=request.quote_id, reason=f"unknown SKU: {', '.join(unknown)}")
    if not request.lines or any(line.quantity < 1 for line in request.lines):
        return QuoteDeclined(quote_id=request.quote_id, reason="every line needs a quantity")
    total = sum(_line_total(line) for line in request.lines)
    discount = total * VOLUME_DISCOUNT_PERCENT // 100 if total >= VOLUME_DISCOUNT_FROM_CENTS else 0
    return Quote(quote_id=request.quote_id, total_cents=total - discount, discount_cents=discount)


def _line_total(line: QuoteLine) -> int:
    return PRICES[line.sku] * line.quantity


def decide(message: Input, state: State) -> Sequence[Command[Output]]:
    """What the workflow decides for an input in a state."""
    match message, state:
        case RequestQuote() as request, Initial():
            answer = price(request)
            if isinstance(answer, QuoteDeclined):
                return [Reply(answer), Complete()]
            return [Reply(answer), Schedule(VALIDITY, QuoteExpired(quote_id=request.quote_id))]
        case RequestQuote(), Quoted(quote=quote):
            return [Reply(quote)]  # asked again while it holds: the same answer
        case AcceptQuote(), Quoted(quote=quote, customer_id=customer_id):
            accepted = QuoteAccepted(
                quote_id=quote.quote_id, customer_id=customer_id, total_cents=quote.total_cents
            )
            return [Reply(accepted), Publish(accepted), Complete()]
        case QuoteExpired(), Quoted():
            return [Complete()]
    raise UnexpectedInput(message, state)


def evolve(state: State, event: WorkflowEvent[Input, Output]) -> State:
    """The state after a workflow event.

    The quote held is the one replied, as recorded: never priced again here, so a change of
    :data:`PRICES` does not change the quotes already given.
    """
    match event, state:
        case InitiatedBy(RequestQuote(customer_id=customer_id)), Initial():
            return Requested(customer_id=customer_id)
        case Replied(Quote() as quote), Requested(customer_id=customer_id):
            return Quoted(quote=quote, customer_id=customer_id)
        case Completed(), _:
            return Final()
    return state


workflow: Workflow[Input, State, Output] = Workflow(
    name="Quote",
    initial_state=Initial(),
    evolve=evolve,
    decide=decide,
    version="quotes-1",
)
"""The workflow, ready to be tested or run by the processors."""
