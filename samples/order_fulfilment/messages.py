"""The messages of the order-fulfilment workflow: its inputs and its outputs.

Amounts are integer cents: a float cannot hold most decimal amounts exactly.
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

from decider import CancelRequested, message


@attrs.frozen(kw_only=True)
class OrderLine:
    """A quantity of one stock-keeping unit."""

    sku: str
    quantity: int


@message("orders.OrderPlaced")
@attrs.frozen(kw_only=True)
class OrderPlaced:
    """A customer placed an order: it begins the workflow."""

    order_id: str
    items: tuple[OrderLine, ...]
    amount_cents: int


@message("orders.ChargePayment")
@attrs.frozen(kw_only=True)
class ChargePayment:
    """Charge the customer for an order."""

    order_id: str
    amount_cents: int


@message("orders.PaymentConfirmed")
@attrs.frozen(kw_only=True)
class PaymentConfirmed:
    """The customer's payment for an order went through."""

    order_id: str
    payment_id: str


@message("orders.PaymentTimedOut")
@attrs.frozen(kw_only=True)
class PaymentTimedOut:
    """The deadline for confirming an order's payment passed (a scheduled message)."""

    order_id: str


@message("orders.ReserveStock")
@attrs.frozen(kw_only=True)
class ReserveStock:
    """Set aside the stock an order needs."""

    order_id: str
    items: tuple[OrderLine, ...]


@message("orders.StockReserved")
@attrs.frozen(kw_only=True)
class StockReserved:
    """The stock of an order was set aside."""

    order_id: str
    reservation_id: str


@message("orders.StockReservationFailed")
@attrs.frozen(kw_only=True)
class StockReservationFailed:
    """The stock of an order could not be set aside."""

    order_id: str
    reason: str


@message("orders.RefundPayment")
@attrs.frozen(kw_only=True)
class RefundPayment:
    """Give the customer their money back: compensates a charge."""

    order_id: str
    payment_id: str
    amount_cents: int


@message("orders.PaymentRefunded")
@attrs.frozen(kw_only=True)
class PaymentRefunded:
    """The customer's payment was refunded."""

    order_id: str
    payment_id: str


@message("orders.ReleaseStock")
@attrs.frozen(kw_only=True)
class ReleaseStock:
    """Put reserved stock back on the shelves: compensates a reservation."""

    order_id: str
    reservation_id: str


@message("orders.ShipOrder")
@attrs.frozen(kw_only=True)
class ShipOrder:
    """Ship the reserved stock of an order to the customer."""

    order_id: str
    reservation_id: str


@message("orders.OrderShipped")
@attrs.frozen(kw_only=True)
class OrderShipped:
    """The order left the warehouse."""

    order_id: str
    tracking_number: str


@message("orders.OrderFulfilled")
@attrs.frozen(kw_only=True)
class OrderFulfilled:
    """The order was paid for and shipped (published)."""

    order_id: str
    tracking_number: str


@message("orders.OrderCancelled")
@attrs.frozen(kw_only=True)
class OrderCancelled:
    """The order will not be fulfilled; the customer owes nothing (published)."""

    order_id: str
    reason: str


Input: TypeAlias = (
    OrderPlaced
    | PaymentConfirmed
    | PaymentTimedOut
    | StockReserved
    | StockReservationFailed
    | PaymentRefunded
    | OrderShipped
    | CancelRequested
)
Output: TypeAlias = (
    ChargePayment
    | PaymentTimedOut
    | ReserveStock
    | RefundPayment
    | ReleaseStock
    | ShipOrder
    | OrderFulfilled
    | OrderCancelled
)
