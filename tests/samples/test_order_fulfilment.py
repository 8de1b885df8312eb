"""Given-when-then tests of the order-fulfilment workflow, one per path."""

from __future__ import annotations

from hypothesis import strategies as st

from decider import (
    Began,
    Cancel,
    Cancelled,
    CancelRequested,
    Complete,
    Completed,
    InitiatedBy,
    Publish,
    Published,
    Received,
    Schedule,
    Scheduled,
    Send,
    Sent,
)
from decider.testing import (
    WorkflowSpec,
    assert_decide_deterministic,
    assert_fold_total,
    strategy_for,
)
from samples.order_fulfilment import workflow
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
    ReleaseStock,
    ReserveStock,
    ShipOrder,
    StockReservationFailed,
    StockReserved,
)
from samples.order_fulfilment.workflow import (
    PAYMENT_DEADLINE,
    PAYMENT_TIMED_OUT,
    AwaitingPayment,
    Cancelling,
    Final,
    Refunding,
    ReservingStock,
    Shipping,
    UnexpectedInput,
)

spec = WorkflowSpec(workflow)

ORDER = "ord-1"
ITEMS = (OrderLine(sku="mug", quantity=2), OrderLine(sku="tea", quantity=1))
PLACED = OrderPlaced(order_id=ORDER, items=ITEMS, amount_cents=2450)
CONFIRMED = PaymentConfirmed(order_id=ORDER, payment_id="pay-1")
TIMED_OUT = PaymentTimedOut(order_id=ORDER)
RESERVED = StockReserved(order_id=ORDER, reservation_id="res-1")
NO_STOCK = StockReservationFailed(order_id=ORDER, reason="tea is out of stock")
REFUNDED = PaymentRefunded(order_id=ORDER, payment_id="pay-1")
SHIPPED = OrderShipped(order_id=ORDER, tracking_number="TRK-9")
CANCEL = CancelRequested(reason="the customer changed their mind")
REFUND = RefundPayment(order_id=ORDER, payment_id="pay-1", amount_cents=2450)
CANCELLED = OrderCancelled(order_id=ORDER, reason="the customer changed their mind")


def test_placing_an_order_charges_it_with_a_deadline() -> None:
    spec.when(PLACED).then_commands(
        Send(ChargePayment(order_id=ORDER, amount_cents=2450)),
        Schedule(PAYMENT_DEADLINE, PaymentTimedOut(order_id=ORDER)),
    ).then_state(AwaitingPayment(order_id=ORDER, items=ITEMS, amount_cents=2450))


def test_the_payment_deadline_is_fifteen_minutes() -> None:
    spec.when(PLACED).then_events(
        Began(),
        InitiatedBy(PLACED),
        Sent(ChargePayment(order_id=ORDER, amount_cents=2450)),
        Scheduled(PAYMENT_DEADLINE, TIMED_OUT),
    )
    assert PAYMENT_DEADLINE.total_seconds() == 15 * 60


def test_a_confirmed_payment_reserves_the_stock() -> None:
    spec.given(PLACED).when(CONFIRMED).then_commands(
        Send(ReserveStock(order_id=ORDER, items=ITEMS))
    ).then_state(ReservingStock(order_id=ORDER, payment_id="pay-1", amount_cents=2450))


def test_reserved_stock_is_shipped() -> None:
    spec.given(PLACED, CONFIRMED).when(RESERVED).then_commands(
        Send(ShipOrder(order_id=ORDER, reservation_id="res-1"))
    ).then_state(Shipping(order_id=ORDER))


def test_the_happy_path_fulfils_the_order() -> None:
    spec.given(PLACED, CONFIRMED, RESERVED).when(SHIPPED).then_commands(
        Publish(OrderFulfilled(order_id=ORDER, tracking_number="TRK-9")), Complete()
    ).then_history(
        Began(),
        InitiatedBy(PLACED),
        Sent(ChargePayment(order_id=ORDER, amount_cents=2450)),
        Scheduled(PAYMENT_DEADLINE, TIMED_OUT),
        Received(CONFIRMED),
        Sent(ReserveStock(order_id=ORDER, items=ITEMS)),
        Received(RESERVED),
        Sent(ShipOrder(order_id=ORDER, reservation_id="res-1")),
        Received(SHIPPED),
        Published(OrderFulfilled(order_id=ORDER, tracking_number="TRK-9")),
        Completed(),
    ).then_state(Final()).then_completed()


def test_a_payment_not_confirmed_in_time_cancels_the_order() -> None:
    spec.given(PLACED).when(TIMED_OUT).then_commands(
        Publish(OrderCancelled(order_id=ORDER, reason=PAYMENT_TIMED_OUT)), Complete()
    ).then_completed()


def test_a_late_timeout_after_the_payment_changes_nothing() -> None:
    spec.given(PLACED, CONFIRMED).when(TIMED_OUT).then_nothing().then_events(
        Received(TIMED_OUT)
    ).then_state(ReservingStock(order_id=ORDER, payment_id="pay-1", amount_cents=2450))


def test_a_late_timeout_while_shipping_changes_nothing() -> None:
    spec.given(PLACED, CONFIRMED, RESERVED).when(TIMED_OUT).then_nothing().then_state(
        Shipping(order_id=ORDER)
    )


def test_a_failed_reservation_refunds_the_payment() -> None:
    spec.given(PLACED, CONFIRMED).when(NO_STOCK).then_commands(
        Send(RefundPayment(order_id=ORDER, payment_id="pay-1", amount_cents=2450))
    ).then_state(
        Refunding(order_id=ORDER, reason="the stock could not be reserved: tea is out of stock")
    )


def test_a_refund_cancels_the_order() -> None:
    spec.given(PLACED, CONFIRMED, NO_STOCK).when(REFUNDED).then_commands(
        Publish(
            OrderCancelled(
                order_id=ORDER, reason="the stock could not be reserved: tea is out of stock"
            )
        ),
        Complete(),
    ).then_state(Final())


def test_a_late_timeout_while_refunding_changes_nothing() -> None:
    spec.given(PLACED, CONFIRMED, NO_STOCK).when(TIMED_OUT).then_nothing()


def test_an_input_after_the_order_was_fulfilled_is_ignored() -> None:
    spec.given(PLACED, CONFIRMED, RESERVED, SHIPPED).when(TIMED_OUT).then_ignored()


def test_a_payment_confirmed_after_the_cancellation_is_ignored() -> None:
    spec.given(PLACED, TIMED_OUT).when(CONFIRMED).then_ignored().then_state(Final())


def test_stock_news_before_the_payment_is_unexpected() -> None:
    spec.given(PLACED).when(RESERVED).then_raises(
        UnexpectedInput, match="StockReserved is not expected in state AwaitingPayment"
    )


def test_a_timeout_before_any_order_is_unexpected() -> None:
    spec.when(TIMED_OUT).then_raises(UnexpectedInput, match="in state Initial")


def test_a_cancel_before_the_payment_is_confirmed_cancels_the_order_at_once() -> None:
    spec.given(PLACED).when(CANCEL).then_commands(
        Publish(CANCELLED), Cancel("the customer changed their mind")
    ).then_cancelled("changed their mind").then_state(Final())


def test_a_payment_confirmed_after_a_cancel_is_ignored() -> None:
    spec.given(PLACED, CANCEL).when(CONFIRMED).then_ignored()


def test_a_cancel_while_reserving_refunds_the_payment_first() -> None:
    spec.given(PLACED, CONFIRMED).when(CANCEL).then_commands(Send(REFUND)).then_state(
        Cancelling(order_id=ORDER, reason="the customer changed their mind")
    )


def test_stock_reserved_during_a_cancel_is_released() -> None:
    spec.given(PLACED, CONFIRMED, CANCEL).when(RESERVED).then_commands(
        Send(ReleaseStock(order_id=ORDER, reservation_id="res-1"))
    ).then_state(
        Cancelling(order_id=ORDER, reason="the customer changed their mind", stock_pending=False)
    )


def test_the_cancel_ends_when_the_refund_and_the_stock_are_both_settled() -> None:
    spec.given(PLACED, CONFIRMED, CANCEL, RESERVED).when(REFUNDED).then_commands(
        Publish(CANCELLED), Cancel("the customer changed their mind")
    ).then_cancelled()
    spec.given(PLACED, CONFIRMED, CANCEL, REFUNDED).when(RESERVED).then_commands(
        Send(ReleaseStock(order_id=ORDER, reservation_id="res-1")),
        Publish(CANCELLED),
        Cancel("the customer changed their mind"),
    ).then_cancelled()
    spec.given(PLACED, CONFIRMED, CANCEL, REFUNDED).when(NO_STOCK).then_commands(
        Publish(CANCELLED), Cancel("the customer changed their mind")
    ).then_history(
        Began(),
        InitiatedBy(PLACED),
        Sent(ChargePayment(order_id=ORDER, amount_cents=2450)),
        Scheduled(PAYMENT_DEADLINE, TIMED_OUT),
        Received(CONFIRMED),
        Sent(ReserveStock(order_id=ORDER, items=ITEMS)),
        Received(CANCEL),
        Sent(REFUND),
        Received(REFUNDED),
        Received(NO_STOCK),
        Published(CANCELLED),
        Cancelled("the customer changed their mind"),
    )


def test_the_refund_alone_does_not_end_a_cancel_awaiting_the_stock() -> None:
    spec.given(PLACED, CONFIRMED, CANCEL).when(REFUNDED).then_nothing().then_state(
        Cancelling(order_id=ORDER, reason="the customer changed their mind", refund_pending=False)
    )


def test_a_cancel_once_shipping_is_too_late_and_the_order_is_fulfilled() -> None:
    spec.given(PLACED, CONFIRMED, RESERVED).when(CANCEL).then_nothing()
    spec.given(PLACED, CONFIRMED, RESERVED, CANCEL).when(SHIPPED).then_completed()


def test_a_cancel_while_refunding_for_want_of_stock_changes_nothing() -> None:
    spec.given(PLACED, CONFIRMED, NO_STOCK).when(CANCEL).then_nothing()


def test_a_cancel_after_the_order_ended_is_ignored() -> None:
    spec.given(PLACED, TIMED_OUT).when(CANCEL).then_ignored()


ORDER_IDS = st.sampled_from(["ord-1", "ord-2"])
INPUTS = st.one_of(
    strategy_for(OrderPlaced, order_id=ORDER_IDS),
    strategy_for(PaymentConfirmed, order_id=ORDER_IDS),
    strategy_for(PaymentTimedOut, order_id=ORDER_IDS),
    strategy_for(StockReserved, order_id=ORDER_IDS),
    strategy_for(StockReservationFailed, order_id=ORDER_IDS),
    strategy_for(PaymentRefunded, order_id=ORDER_IDS),
    strategy_for(OrderShipped, order_id=ORDER_IDS),
    strategy_for(CancelRequested),
)


def test_decide_is_deterministic() -> None:
    assert_decide_deterministic(workflow, INPUTS)


def test_fold_is_total_over_the_histories_it_produces() -> None:
    assert_fold_total(workflow, INPUTS)
