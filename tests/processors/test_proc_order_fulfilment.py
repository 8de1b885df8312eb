"""The order-fulfilment sample through the processors: payment timeout and compensation."""

from __future__ import annotations

from typing import Any

from decider import Lifecycle, Metadata
from decider.processors import App, FakeClock, Service, by_correlation, show
from decider.stores.protocol import EventStore
from samples.order_fulfilment.messages import (
    ChargePayment,
    OrderCancelled,
    OrderFulfilled,
    OrderLine,
    OrderPlaced,
    OrderShipped,
    PaymentConfirmed,
    PaymentRefunded,
    PaymentTimedOut,
    RefundPayment,
    ReserveStock,
    ShipOrder,
    StockReservationFailed,
    StockReserved,
)
from samples.order_fulfilment.workflow import PAYMENT_DEADLINE, PAYMENT_TIMED_OUT, workflow
from tests.support.stores import counts, types


def order_id(placed: OrderPlaced, _: Metadata) -> str:
    return placed.order_id


def order_app(name: str) -> App:
    app = App(name)
    app.workflow(
        workflow,
        inputs={
            OrderPlaced: order_id,
            PaymentConfirmed: by_correlation,
            PaymentTimedOut: by_correlation,
            StockReserved: by_correlation,
            StockReservationFailed: by_correlation,
            PaymentRefunded: by_correlation,
            OrderShipped: by_correlation,
        },
    )

    @app.handler(ChargePayment)
    def charge(command: ChargePayment, command_id: str) -> list[object]:
        if command.order_id.startswith("slow"):
            return []  # accepted, but the payment provider never confirms
        return [PaymentConfirmed(order_id=command.order_id, payment_id=f"pay-{command_id[:8]}")]

    @app.handler(ReserveStock)
    def reserve(command: ReserveStock, command_id: str) -> list[object]:
        if any(line.sku == "unobtainium" for line in command.items):
            return [StockReservationFailed(order_id=command.order_id, reason="out of stock")]
        return [StockReserved(order_id=command.order_id, reservation_id=f"res-{command_id[:8]}")]

    @app.handler(RefundPayment)
    def refund(command: RefundPayment, command_id: str) -> list[object]:
        return [PaymentRefunded(order_id=command.order_id, payment_id=command.payment_id)]

    @app.handler(ShipOrder)
    def ship(command: ShipOrder, command_id: str) -> list[object]:
        return [OrderShipped(order_id=command.order_id, tracking_number=f"trk-{command_id[:8]}")]

    return app


def place(app: App, store: EventStore, order_id: str, sku: str) -> None:
    line = OrderLine(sku=sku, quantity=1)
    app.publish(store, OrderPlaced(order_id=order_id, items=(line,), amount_cents=999), "orders")


def status_of(store: EventStore, app: App, order_id: str) -> Lifecycle:
    return show(store, app, workflow.stream(order_id)).status


def published(store: EventStore, app: App, type_name: str) -> dict[str, Any]:
    found = {}
    for stream in counts(store, f"topic-{type_name}-"):
        for event in store.read_stream(stream):
            message = app.codec.decode_message(event.type, event.data)
            found[message.order_id] = message
    return found


def test_fulfilment_timeout_and_compensation(store: EventStore, app_name: str) -> None:
    clock = FakeClock()
    app = order_app(app_name)
    place(app, store, "ok", "widget")
    place(app, store, "slow", "widget")
    place(app, store, "nostock", "unobtainium")
    with Service(app, store, clock=clock) as service:
        assert service.wait_until(
            lambda: all(status_of(store, app, o) is Lifecycle.COMPLETED for o in ("ok", "nostock")),
            30,
        )
        assert service.wait_idle(30)
        assert status_of(store, app, "slow") is Lifecycle.RUNNING
        clock.advance(PAYMENT_DEADLINE.total_seconds() + 1)
        assert service.wait_until(lambda: status_of(store, app, "slow") is Lifecycle.COMPLETED, 30)
        assert service.wait_idle(30)
        assert service.errors == []
    fulfilled = published(store, app, "orders.OrderFulfilled")
    cancelled = published(store, app, "orders.OrderCancelled")
    assert set(fulfilled) == {"ok"}
    assert isinstance(fulfilled["ok"], OrderFulfilled)
    assert cancelled == {
        "slow": OrderCancelled(order_id="slow", reason=PAYMENT_TIMED_OUT),
        "nostock": OrderCancelled(
            order_id="nostock", reason="the stock could not be reserved: out of stock"
        ),
    }
    # Compensation: the refund was carried out once, for the order whose stock failed.
    refunds = counts(store, "refund-")
    assert len(refunds) == 1 and set(refunds.values()) == {1}
    assert "Sent:orders.RefundPayment" in types(store, workflow.stream("nostock"))
    # The deadline of a finished order never fires: nothing is recorded after its end.
    assert types(store, workflow.stream("ok"))[-1] == "Completed"
    assert types(store, workflow.stream("slow"))[-3:] == [
        "Received:orders.PaymentTimedOut",
        "Published:orders.OrderCancelled",
        "Completed",
    ]
    assert sum(counts(store, "timer-").values()) == 1  # only the running order's deadline
