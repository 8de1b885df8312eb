"""The order-fulfilment App as a service: fulfilment, payment deadline, compensation, cancel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from decider import Lifecycle
from decider.processors import FakeClock, Service, show
from decider.processors.cli import main
from decider.processors.cli.loading import load_app
from decider.stores.protocol import EventStore
from decider.stores.sqlite import SqliteEventStore
from samples.order_fulfilment.app import ORDERS_STREAM, make_app
from samples.order_fulfilment.messages import OrderCancelled, OrderFulfilled, OrderLine, OrderPlaced
from samples.order_fulfilment.workflow import PAYMENT_DEADLINE, PAYMENT_TIMED_OUT, workflow
from tests.support.stores import events

CUSTOMER_REASON = "the customer found it cheaper elsewhere"


def _place(app: Any, store: EventStore, order_id: str, sku: str) -> None:
    line = OrderLine(sku=sku, quantity=1)
    order = OrderPlaced(order_id=order_id, items=(line,), amount_cents=1250)
    app.publish(store, order, ORDERS_STREAM)


def _status(store: EventStore, app: Any, order_id: str) -> Lifecycle:
    return show(store, app, workflow.stream(order_id)).status


def _published(store: EventStore, app: Any, type_name: str) -> dict[str, Any]:
    found = {}
    for event in events(store, f"topic-{type_name}-"):
        message = app.codec.decode_message(event.type, event.data)
        found[message.order_id] = message
    return found


def test_the_app_loads_as_the_command_line_names_it() -> None:
    app = load_app("samples.order_fulfilment:app")

    assert set(app.workflows) == {"OrderFulfilment"}
    assert "decider.CancelRequested" in app.workflows["OrderFulfilment"].inputs
    assert set(app.handlers) == {
        "orders.ChargePayment",
        "orders.ReserveStock",
        "orders.RefundPayment",
        "orders.ShipOrder",
    }
    assert app.routes == {"orders.ReleaseStock": "stock-releases"}


def test_the_command_line_shows_an_order_of_the_apps_store(tmp_path: Path, capsys: Any) -> None:
    store = SqliteEventStore(tmp_path / "orders.db")
    app = make_app()
    _place(app, store, "ok", "mug")
    with Service(app, store) as service:
        assert service.wait_until(lambda: _status(store, app, "ok") is Lifecycle.COMPLETED, 30)
    store.close()
    uri = f"sqlite:///{tmp_path / 'orders.db'}"

    code = main(
        ["show", "OrderFulfilment-ok", "--app", "samples.order_fulfilment:app", "--store", uri]
    )

    out = capsys.readouterr().out
    assert code == 0
    assert "Published:orders.OrderFulfilled" in out and "Completed" in out


def test_orders_are_fulfilled_refunded_timed_out_and_cancelled(store: EventStore) -> None:
    clock = FakeClock()
    app = make_app()
    _place(app, store, "ok", "mug")
    _place(app, store, "nostock", "unobtainium")
    _place(app, store, "slow-late", "tea")
    _place(app, store, "slow-changed-mind", "teapot")
    with Service(app, store, clock=clock) as service:
        assert service.wait_until(
            lambda: all(_status(store, app, o) is Lifecycle.COMPLETED for o in ("ok", "nostock")),
            30,
        )
        assert service.wait_idle(30)
        # The customer cancels an order whose payment is still awaited.
        app.cancel(store, workflow, "slow-changed-mind", reason=CUSTOMER_REASON)
        assert service.wait_until(
            lambda: _status(store, app, "slow-changed-mind") is Lifecycle.CANCELLED, 30
        )
        assert _status(store, app, "slow-late") is Lifecycle.RUNNING
        clock.advance(PAYMENT_DEADLINE.total_seconds() + 1)
        assert service.wait_until(
            lambda: _status(store, app, "slow-late") is Lifecycle.COMPLETED, 30
        )
        assert service.wait_idle(30)
        assert service.errors == []

    fulfilled = _published(store, app, "orders.OrderFulfilled")
    assert set(fulfilled) == {"ok"} and isinstance(fulfilled["ok"], OrderFulfilled)
    assert _published(store, app, "orders.OrderCancelled") == {
        "nostock": OrderCancelled(
            order_id="nostock",
            reason="the stock could not be reserved: not in the catalogue: unobtainium",
        ),
        "slow-late": OrderCancelled(order_id="slow-late", reason=PAYMENT_TIMED_OUT),
        "slow-changed-mind": OrderCancelled(order_id="slow-changed-mind", reason=CUSTOMER_REASON),
    }
    # The compensation: one refund, for the order whose stock could not be reserved.
    refunds = {e.stream for e in events(store, "refund_payment-")}
    assert len(refunds) == 1
    cancelled = [e.type for e in store.read_stream(workflow.stream("slow-changed-mind"))]
    ended = cancelled.index("Cancelled")
    assert cancelled[ended - 2 : ended + 1] == [
        "Received:decider.CancelRequested",
        "Published:orders.OrderCancelled",
        "Cancelled",
    ]
