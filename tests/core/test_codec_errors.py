"""Codec failures name the type and the reason; type names in data never import anything."""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

import attrs
import pytest

from decider import (
    Codec,
    DecodeError,
    MessageRegistry,
    Received,
    Scheduled,
    Sent,
    UnknownMessageType,
)
from samples.order_fulfilment.messages import OrderLine, OrderPlaced, PaymentTimedOut

codec = Codec()

PLACED = OrderPlaced(order_id="ord-1", items=(OrderLine(sku="mug", quantity=2),), amount_cents=900)


def test_an_unknown_type_name_is_a_decode_error_naming_it() -> None:
    with pytest.raises(DecodeError, match=r"'orders.Unheard'.*not registered") as caught:
        codec.decode_message("orders.Unheard", b"{}")

    assert caught.value.type_name == "orders.Unheard"


def test_an_unknown_message_type_inside_a_workflow_event_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match=r"'orders.Unheard'.*not registered"):
        codec.decode_event("Sent:orders.Unheard", b"{}")


@pytest.mark.parametrize("data", [b"{not json", b"", b"\xff\xfe", b'{"order_id": "ord-1"'])
def test_invalid_json_is_a_decode_error_naming_the_type_and_reason(data: bytes) -> None:
    with pytest.raises(DecodeError, match=r"'orders.PaymentTimedOut'.*invalid JSON"):
        codec.decode_message("orders.PaymentTimedOut", data)


@pytest.mark.parametrize("data", [b"[]", b'"ord-1"', b"42", b"null"])
def test_json_that_is_not_an_object_is_a_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError, match=r"'orders.PaymentTimedOut'.*expected a JSON object"):
        codec.decode_message("orders.PaymentTimedOut", data)


def test_a_missing_field_is_a_decode_error_naming_the_type_and_field() -> None:
    with pytest.raises(DecodeError, match=r"'orders.OrderPlaced'.*amount_cents"):
        codec.decode_message("orders.OrderPlaced", b'{"order_id": "o", "items": []}')


def test_a_field_of_the_wrong_type_is_a_decode_error() -> None:
    body = b'{"order_id": "o", "items": [{"sku": "mug"}], "amount_cents": 5}'

    with pytest.raises(DecodeError, match=r"'orders.OrderPlaced'.*quantity"):
        codec.decode_message("orders.OrderPlaced", body)


@pytest.mark.parametrize(
    ("type_name", "data", "reason"),
    [
        ("orders.PaymentTimedOut", b"{}", "not a workflow event type"),
        ("Unheard:orders.PaymentTimedOut", b'{"order_id": "o"}', "unknown workflow event kind"),
        ("Scheduled:orders.PaymentTimedOut", b'{"message": {"order_id": "o"}}', "'after'"),
        (
            "Scheduled:orders.PaymentTimedOut",
            b'{"after": -1, "message": {"order_id": "o"}}',
            "non-negative",
        ),
        (
            "Scheduled:orders.PaymentTimedOut",
            b'{"after": "soon", "message": {"order_id": "o"}}',
            "non-negative number",
        ),
        ("Ignored:orders.PaymentTimedOut", b'{"message": {"order_id": "o"}}', "'reason'"),
        ("Ignored:orders.PaymentTimedOut", b'{"reason": "done"}', "'message'"),
        ("Sent:orders.PaymentTimedOut", b"[1]", "expected a JSON object"),
    ],
)
def test_a_workflow_event_of_the_wrong_shape_is_a_decode_error(
    type_name: str, data: bytes, reason: str
) -> None:
    with pytest.raises(DecodeError, match=reason) as caught:
        codec.decode_event(type_name, data)

    assert "orders.PaymentTimedOut" in str(caught.value)


@pytest.mark.parametrize(
    "type_name", ["os.system", "subprocess.Popen", "builtins.eval", "this", "decider.codec.Codec"]
)
def test_a_type_name_in_data_never_imports_anything(type_name: str) -> None:
    codec.decode_message("orders.PaymentTimedOut", b'{"order_id": "warm-up"}')
    modules_before = set(sys.modules)

    with pytest.raises(DecodeError, match="not registered"):
        codec.decode_message(type_name, b'{"command": "echo pwned"}')
    with pytest.raises(DecodeError, match="not registered"):
        codec.decode_event(f"Sent:{type_name}", b'{"command": "echo pwned"}')

    assert set(sys.modules) == modules_before


def test_encoding_an_unregistered_message_raises_unknown_message_type() -> None:
    @attrs.frozen
    class Stray:
        x: int

    with pytest.raises(UnknownMessageType, match="Stray"):
        codec.encode_message(Stray(1))
    with pytest.raises(UnknownMessageType, match="Stray"):
        codec.encode_event(Sent(Stray(1)))


def test_a_codec_decodes_only_its_own_registry() -> None:
    name, body = codec.encode_message(PaymentTimedOut(order_id="ord-1"))

    with pytest.raises(DecodeError, match="not registered"):
        Codec(MessageRegistry()).decode_message(name, body)


# -- upcasters ---------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Shipped:
    """The current shape: v1 had ``tracking``; v2 renamed it; v3 added the carrier."""

    order_id: str
    tracking_number: str
    carrier: str


def _registry() -> MessageRegistry:
    registry = MessageRegistry()
    registry.register("test.Shipped.v3", Shipped)
    return registry


def _v1_to_v2(doc: dict[str, Any]) -> dict[str, Any]:
    return {"order_id": doc["order_id"], "tracking_number": doc["tracking"]}


def _v2_to_v3(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "carrier": "unknown"}


def test_an_upcaster_turns_an_old_shape_into_the_current_type() -> None:
    upcasting = Codec(_registry())
    upcasting.add_upcaster(
        "test.Shipped.v2", lambda doc: {**doc, "carrier": "post"}, to="test.Shipped.v3"
    )

    old = b'{"order_id": "o1", "tracking_number": "T1"}'

    assert upcasting.decode_message("test.Shipped.v2", old) == Shipped(
        order_id="o1", tracking_number="T1", carrier="post"
    )


def test_upcasters_chain_from_v1_through_v2_to_v3() -> None:
    upcasting = Codec(_registry())
    upcasting.add_upcaster("test.Shipped.v1", _v1_to_v2, to="test.Shipped.v2")
    upcasting.add_upcaster("test.Shipped.v2", _v2_to_v3, to="test.Shipped.v3")
    expected = Shipped(order_id="o1", tracking_number="T1", carrier="unknown")

    assert upcasting.decode_message("test.Shipped.v1", b'{"order_id":"o1","tracking":"T1"}') == (
        expected
    )
    assert upcasting.decode_event(
        "Received:test.Shipped.v1", b'{"order_id":"o1","tracking":"T1"}'
    ) == Received(expected)
    assert upcasting.decode_event(
        "Scheduled:test.Shipped.v2",
        b'{"after":60,"message":{"order_id":"o1","tracking_number":"T1"}}',
    ) == Scheduled(timedelta(minutes=1), expected)


def test_an_upcaster_under_the_same_name_upgrades_in_place() -> None:
    upcasting = Codec(_registry())
    upcasting.add_upcaster("test.Shipped.v3", lambda doc: {"carrier": "post", **doc})

    assert upcasting.decode_message(
        "test.Shipped.v3", b'{"order_id": "o1", "tracking_number": "T1"}'
    ) == Shipped(order_id="o1", tracking_number="T1", carrier="post")
    assert upcasting.decode_message(
        "test.Shipped.v3", b'{"order_id": "o1", "tracking_number": "T1", "carrier": "dhl"}'
    ) == Shipped(order_id="o1", tracking_number="T1", carrier="dhl")


def test_an_upcaster_to_an_unregistered_name_is_a_decode_error() -> None:
    upcasting = Codec(_registry())
    upcasting.add_upcaster("test.Shipped.v1", _v1_to_v2, to="test.Shipped.v2")

    with pytest.raises(DecodeError, match=r"'test.Shipped.v2'.*not registered"):
        upcasting.decode_message("test.Shipped.v1", b'{"order_id":"o1","tracking":"T1"}')


def test_an_upcaster_that_fails_on_a_stored_shape_is_a_decode_error() -> None:
    upcasting = Codec(_registry())
    upcasting.add_upcaster("test.Shipped.v1", _v1_to_v2, to="test.Shipped.v2")
    upcasting.add_upcaster("test.Shipped.v2", _v2_to_v3, to="test.Shipped.v3")

    with pytest.raises(DecodeError, match=r"'test.Shipped.v1'.*tracking"):
        upcasting.decode_message("test.Shipped.v1", b'{"order_id": "o1"}')
