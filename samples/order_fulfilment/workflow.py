"""OrderFulfilment: charge the payment, reserve the stock, ship; cancel or compensate on failure.

An order placed is charged, with a deadline: a payment not confirmed within
:data:`PAYMENT_DEADLINE` cancels the order (the deadline is a ``Schedule``d
``PaymentTimedOut`` that comes back as an input; once the payment is confirmed it changes
nothing). A confirmed payment reserves the stock; reserved stock is shipped and the order
fulfilled. A failed reservation refunds the payment (compensation), then cancels the order.

The customer may cancel (a ``decider.CancelRequested``, which this workflow decides on): before
the payment is confirmed the order is cancelled at once; while the stock is being reserved the
payment is refunded and the stock, once its answer comes, released (compensations), and the
instance ends ``Cancelled`` when both are done. Once the order is refunding or shipping it is
too late: the request is recorded and changes nothing.

WARNING: a payment confirmed after the deadline cancelled the order arrives at a completed
instance and is recorded as ignored: the payment service must not capture charges of
cancelled orders (it can subscribe to ``orders.OrderCancelled``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TypeAlias

import attrs

from decider import (
    Cancel,
    Cancelled,
    CancelRequested,
    Command,
    Complete,
    Completed,
    InitiatedBy,
    Publish,
    Received,
    Schedule,
    Send,
    Workflow,
    WorkflowEvent,
)
from samples.order_fulfilment.messages import (
    ChargePayment,
    Input,
    OrderCancelled,
    OrderFulfilled,
    OrderLine,
    OrderPlaced,
    OrderShipped,
    Output,
    PaymentConfirmed,
    PaymentRefunded,
    PaymentTimedOut,
    RefundPayment,
    ReleaseStock,
    ReserveStock,
    ShipOrder,
    StockReservationFailed,
    StockReserved,
)

PAYMENT_DEADLINE = timedelta(minutes=15)
"""How long a payment may take to be confirmed before the order is cancelled."""

PAYMENT_TIMED_OUT = "the payment was not confirmed in time"
"""The reason an order cancelled for want of payment gives."""


@attrs.frozen(kw_only=True)
class Initial:
    """No order yet."""


@attrs.frozen(kw_only=True)
class AwaitingPayment:
    """The order was placed and charged; the payment is not confirmed yet."""

    order_id: str
    items: tuple[OrderLine, ...]
    amount_cents: int


@attrs.frozen(kw_only=True)
class ReservingStock:
    """The payment is confirmed; the stock is being reserved."""

    order_id: str
    payment_id: str
    amount_cents: int


@attrs.frozen(kw_only=True)
class Refunding:
    """The stock could not be reserved; the payment is being refunded."""

    order_id: str
    reason: str


@attrs.frozen(kw_only=True)
class Cancelling:
    """The customer cancelled while the stock was being reserved: the payment is being
    refunded, and the stock released once the reservation's answer comes."""

    order_id: str
    reason: str
    refund_pending: bool = True
    stock_pending: bool = True


@attrs.frozen(kw_only=True)
class Shipping:
    """The stock is reserved; the order is being shipped."""

    order_id: str


@attrs.frozen(kw_only=True)
class Final:
    """Nothing more to do: the order was fulfilled or cancelled."""


State: TypeAlias = (
    Initial | AwaitingPayment | ReservingStock | Refunding | Cancelling | Shipping | Final
)


class UnexpectedInput(Exception):
    """An input the workflow does not expect in its current state."""

    def __init__(self, message: object, state: State) -> None:
        super().__init__(f"{type(message).__name__} is not expected in state {state!r}")


def decide(message: Input, state: State) -> Sequence[Command[Output]]:
    """What the workflow decides for an input in a state."""
    match message, state:
        case OrderPlaced(order_id=order_id, amount_cents=amount), Initial():
            return [
                Send(ChargePayment(order_id=order_id, amount_cents=amount)),
                Schedule(PAYMENT_DEADLINE, PaymentTimedOut(order_id=order_id)),
            ]
        case PaymentConfirmed(), AwaitingPayment(order_id=order_id, items=items):
            return [Send(ReserveStock(order_id=order_id, items=items))]
        case PaymentTimedOut(), AwaitingPayment(order_id=order_id):
            return [
                Publish(OrderCancelled(order_id=order_id, reason=PAYMENT_TIMED_OUT)),
                Complete(),
            ]
        case PaymentTimedOut(), ReservingStock() | Refunding() | Cancelling() | Shipping():
            return []  # the payment was confirmed in time: the deadline no longer matters
        case StockReserved(reservation_id=reservation_id), ReservingStock(order_id=order_id):
            return [Send(ShipOrder(order_id=order_id, reservation_id=reservation_id))]
        case StockReservationFailed(), ReservingStock() as reserving:
            return [
                Send(
                    RefundPayment(
                        order_id=reserving.order_id,
                        payment_id=reserving.payment_id,
                        amount_cents=reserving.amount_cents,
                    )
                )
            ]
        case PaymentRefunded(), Refunding(order_id=order_id, reason=reason):
            return [Publish(OrderCancelled(order_id=order_id, reason=reason)), Complete()]
        case OrderShipped(tracking_number=tracking), Shipping(order_id=order_id):
            return [
                Publish(OrderFulfilled(order_id=order_id, tracking_number=tracking)),
                Complete(),
            ]
        case CancelRequested() | StockReserved() | StockReservationFailed() | PaymentRefunded(), _:
            return _cancel(message, state)
    raise UnexpectedInput(message, state)


def _cancel(message: Input, state: State) -> Sequence[Command[Output]]:
    """The decisions of a customer's cancellation, and of the answers to its compensations."""
    match message, state:
        case CancelRequested(reason=reason), AwaitingPayment(order_id=order_id):
            return [Publish(OrderCancelled(order_id=order_id, reason=reason)), Cancel(reason)]
        case CancelRequested(), ReservingStock() as reserving:
            return [
                Send(
                    RefundPayment(
                        order_id=reserving.order_id,
                        payment_id=reserving.payment_id,
                        amount_cents=reserving.amount_cents,
                    )
                )
            ]
        case CancelRequested(), Refunding() | Cancelling() | Shipping():
            return []  # too late, or already under way: the order ends as it was going to
        case StockReserved(reservation_id=reservation_id), Cancelling() as cancelling:
            release: Command[Output] = Send(
                ReleaseStock(order_id=cancelling.order_id, reservation_id=reservation_id)
            )
            return [release, *_cancelled_once(cancelling, refund_pending=cancelling.refund_pending)]
        case StockReservationFailed(), Cancelling() as cancelling:
            return _cancelled_once(cancelling, refund_pending=cancelling.refund_pending)
        case PaymentRefunded(), Cancelling() as cancelling:
            return _cancelled_once(cancelling, stock_pending=cancelling.stock_pending)
    raise UnexpectedInput(message, state)


def _cancelled_once(
    cancelling: Cancelling, *, refund_pending: bool = False, stock_pending: bool = False
) -> Sequence[Command[Output]]:
    """End the cancellation when the last compensation is done (what is still pending after
    this input is given)."""
    if refund_pending or stock_pending:
        return []
    reason = cancelling.reason
    return [Publish(OrderCancelled(order_id=cancelling.order_id, reason=reason)), Cancel(reason)]


def evolve(state: State, event: WorkflowEvent[Input, Output]) -> State:
    """The state after a workflow event: only inputs and completion move it."""
    match event, state:
        case InitiatedBy(OrderPlaced() as placed), Initial():
            return AwaitingPayment(
                order_id=placed.order_id, items=placed.items, amount_cents=placed.amount_cents
            )
        case Received(PaymentConfirmed(payment_id=payment_id)), AwaitingPayment() as awaiting:
            return ReservingStock(
                order_id=awaiting.order_id,
                payment_id=payment_id,
                amount_cents=awaiting.amount_cents,
            )
        case Received(StockReserved()), ReservingStock(order_id=order_id):
            return Shipping(order_id=order_id)
        case Received(StockReservationFailed(reason=reason)), ReservingStock(order_id=order_id):
            return Refunding(order_id=order_id, reason=f"the stock could not be reserved: {reason}")
        case Received(CancelRequested(reason=reason)), ReservingStock(order_id=order_id):
            return Cancelling(order_id=order_id, reason=reason)
        case Received(StockReserved() | StockReservationFailed()), Cancelling() as cancelling:
            return attrs.evolve(cancelling, stock_pending=False)
        case Received(PaymentRefunded()), Cancelling() as cancelling:
            return attrs.evolve(cancelling, refund_pending=False)
        case Completed() | Cancelled(), _:
            return Final()
    return state


workflow: Workflow[Input, State, Output] = Workflow(
    name="OrderFulfilment",
    initial_state=Initial(),
    evolve=evolve,
    decide=decide,
)
"""The workflow, ready to be tested or run by the processors."""
