"""The order-fulfilment sample as a runnable App: the workflow, its handlers and its routes.

``decider run --app samples.order_fulfilment:app`` runs it. Orders come in on the ``orders``
stream (:data:`ORDERS_STREAM`); a customer's cancellation is a ``decider.CancelRequested``,
recorded by ``app.cancel(store, workflow, order_id, reason=...)`` or ``decider cancel``. The
handlers stand in for the services an order needs, with rules simple enough to steer a demo:

- the payment provider confirms every charge, except for orders whose id starts with
  ``slow-`` (:data:`SLOW_PAYMENT`): those are accepted and never confirmed, so the payment
  deadline cancels them (or a customer's cancellation gets there first);
- the warehouse reserves stock of the SKUs in :data:`CATALOGUE` and refuses any other, which
  leads to the refund of the payment (compensation);
- refunds always go through; shipping always succeeds.

Ids derive from the command id, so carrying a command out twice (after a crash or a retry)
gives the same answer. ``ReleaseStock`` is appended to the ``stock-releases`` stream for the
warehouse to read; ``OrderFulfilled`` and ``OrderCancelled`` are published to their topics.
"""

from __future__ import annotations

from decider import CancelRequested, Metadata
from decider.processors import App, RetryPolicy, by_correlation
from samples.order_fulfilment.messages import (
    ChargePayment,
    OrderPlaced,
    OrderShipped,
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
from samples.order_fulfilment.workflow import workflow

ORDERS_STREAM = "orders"
"""Where the shop appends the orders its customers place."""

RELEASES_STREAM = "stock-releases"
"""Where stock to put back on the shelves goes, for the warehouse."""

CATALOGUE = frozenset({"mug", "tea", "teapot", "widget"})
"""The stock-keeping units the warehouse holds."""

SLOW_PAYMENT = "slow-"
"""Orders whose id starts with this are charged, but the payment is never confirmed."""


def charge_payment(command: ChargePayment, command_id: str) -> list[object]:
    """Charge the customer: confirmed at once, except for a ``slow-`` order (never)."""
    if command.order_id.startswith(SLOW_PAYMENT):
        return []
    return [PaymentConfirmed(order_id=command.order_id, payment_id=f"pay-{command_id[:8]}")]


def reserve_stock(command: ReserveStock, command_id: str) -> list[object]:
    """Reserve the order's stock, or refuse it naming the SKUs the warehouse does not hold."""
    missing = sorted({line.sku for line in command.items} - CATALOGUE)
    if missing:
        reason = f"not in the catalogue: {', '.join(missing)}"
        return [StockReservationFailed(order_id=command.order_id, reason=reason)]
    return [StockReserved(order_id=command.order_id, reservation_id=f"res-{command_id[:8]}")]


def refund_payment(command: RefundPayment, command_id: str) -> list[object]:
    """Give the customer their money back."""
    return [PaymentRefunded(order_id=command.order_id, payment_id=command.payment_id)]


def ship_order(command: ShipOrder, command_id: str) -> list[object]:
    """Ship the order, with a tracking number."""
    return [OrderShipped(order_id=command.order_id, tracking_number=f"trk-{command_id[:8]}")]


def _order_id(order: OrderPlaced, _: Metadata) -> str:
    return order.order_id


def make_app(name: str = "orders", retry: RetryPolicy | None = None) -> App:
    """A fresh App for the order-fulfilment workflow (tests make their own from it)."""
    app = App(name, retry=retry)
    app.workflow(
        workflow,
        inputs={
            OrderPlaced: _order_id,
            PaymentConfirmed: by_correlation,
            PaymentTimedOut: by_correlation,
            StockReserved: by_correlation,
            StockReservationFailed: by_correlation,
            PaymentRefunded: by_correlation,
            OrderShipped: by_correlation,
            CancelRequested: by_correlation,
        },
    )
    app.add_handler(ChargePayment, charge_payment)
    app.add_handler(ReserveStock, reserve_stock)
    app.add_handler(RefundPayment, refund_payment)
    app.add_handler(ShipOrder, ship_order)
    app.route(ReleaseStock, stream=RELEASES_STREAM)
    return app


app = make_app()
"""The order-fulfilment App, as ``decider run --app samples.order_fulfilment:app`` runs it."""
