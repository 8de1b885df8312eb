"""Messages decode strictly wherever JSON becomes one: an unknown key, a float for an integer, a
string for a number or a missing field is a DecodeError naming each field in plain words."""

from __future__ import annotations

import enum
import json
from datetime import datetime, timedelta

import attrs
import pydantic
import pytest

from decider import Codec, DecodeError, MessageRegistry, message
from samples.order_fulfilment.messages import OrderPlaced

codec = Codec()
registry = MessageRegistry()


class Room(enum.StrEnum):
    """A room kind: a string enum decodes to its member."""

    SINGLE = "single"
    DOUBLE = "double"


@attrs.frozen(kw_only=True)
class Guest:
    """A guest of a booking."""

    name: str
    age: int


@message("hotel.BookingRequested", registry=registry)
@attrs.frozen(kw_only=True)
class BookingRequested:
    """A booking as a user publishes it."""

    hotel: str
    nights: int
    price: float
    room: Room
    breakfast: bool = False
    guests: tuple[Guest, ...] = ()
    confirm_within: timedelta = timedelta(minutes=5)
    at: datetime | None = None


@message("hotel.Quoted", registry=registry)
class Quoted(pydantic.BaseModel):
    """A pydantic message: decoded in pydantic's strict JSON mode, extras refused."""

    model_config = pydantic.ConfigDict(frozen=True)
    hotel: str
    nights: int


hotels = Codec(registry)
GOOD = {"hotel": "Ritz", "nights": 2, "price": 3, "room": "double"}


def _reason(type_name: str, doc: object) -> str:
    with pytest.raises(DecodeError) as caught:
        hotels.decode_message(type_name, json.dumps(doc).encode())
    assert caught.value.type_name == type_name
    assert "Structuring" not in str(caught.value) and "KeyError" not in str(caught.value)
    return caught.value.reason


def test_a_valid_message_decodes_with_enums_ints_for_floats_and_defaults() -> None:
    decoded = hotels.decode_message("hotel.BookingRequested", json.dumps(GOOD).encode())

    assert decoded == BookingRequested(hotel="Ritz", nights=2, price=3.0, room=Room.DOUBLE)
    assert decoded.room is Room.DOUBLE


def test_the_issues_message_names_each_field_that_does_not_fit() -> None:
    doc = {"nights": 2.7, "price": "100", "room": "double", "confirm_withn": 5}

    reason = _reason("hotel.BookingRequested", doc)

    assert reason.split("; ") == [
        "missing field: hotel",
        "nights: expected an integer, got 2.7",
        'price: expected a number, got "100"',
        "unknown field: confirm_withn",
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"nights": "2"}, 'nights: expected an integer, got "2"'),
        ({"nights": 2.0}, "nights: expected an integer, got 2.0"),
        ({"nights": True}, "nights: expected an integer, got true"),
        ({"hotel": 5}, "hotel: expected a string, got 5"),
        ({"breakfast": "yes"}, 'breakfast: expected true or false, got "yes"'),
        ({"breakfast": 1}, "breakfast: expected true or false, got 1"),
        ({"confirm_within": "5m"}, "confirm_within: expected a number of seconds"),
        ({"guests": [{"name": "A", "age": 3}, {"name": "B"}]}, "missing field: guests[1].age"),
        ({"guests": [{"name": "A", "age": 3, "vip": 1}]}, "unknown field: guests[0].vip"),
        ({"guests": [{"name": "A", "age": 3.5}]}, "guests[0].age: expected an integer, got 3.5"),
        ({"room": "suite"}, "room: "),
    ],
)
def test_each_kind_of_mismatch_names_its_field(change: dict[str, object], expected: str) -> None:
    assert expected in _reason("hotel.BookingRequested", {**GOOD, **change})


def test_a_pydantic_message_is_as_strict() -> None:
    assert hotels.decode_message("hotel.Quoted", b'{"hotel": "Ritz", "nights": 2}') == Quoted(
        hotel="Ritz", nights=2
    )
    reason = _reason("hotel.Quoted", {"nights": "2", "extra": 1})
    assert reason == "unknown field: extra"
    assert _reason("hotel.Quoted", {"nights": 2.7}).split("; ") == [
        "missing field: hotel",
        "nights: expected an integer, got 2.7",
    ]


def test_stored_events_and_engine_messages_decode_as_strictly() -> None:
    with pytest.raises(DecodeError, match=r"amount_cents: expected an integer, got 9\.5"):
        codec.decode_event(
            "InitiatedBy:orders.OrderPlaced",
            b'{"order_id": "o", "items": [], "amount_cents": 9.5}',
        )
    with pytest.raises(DecodeError, match="unknown field: note"):
        codec.decode_data(
            OrderPlaced, "x", b'{"order_id": "o", "items": [], "amount_cents": 9, "note": ""}'
        )


def test_an_upcaster_still_accepts_an_old_shape() -> None:
    upcasting = Codec(registry)
    upcasting.add_upcaster(
        "hotel.BookingRequested.v1",
        lambda doc: {**{k: v for k, v in doc.items() if k != "confirm_withn"}, "price": 1},
        to="hotel.BookingRequested",
    )
    old = {"hotel": "Ritz", "nights": 1, "room": "single", "confirm_withn": 5}

    decoded = upcasting.decode_message("hotel.BookingRequested.v1", json.dumps(old).encode())

    assert decoded == BookingRequested(hotel="Ritz", nights=1, price=1.0, room=Room.SINGLE)


@pytest.mark.parametrize(
    ("nights", "got"),
    [({"n": 1}, "an object"), ([1], "an array"), ("x" * 100, "a string of 100 characters")],
)
def test_a_value_of_the_wrong_shape_is_named_by_what_it_is(nights: object, got: str) -> None:
    reason = _reason("hotel.BookingRequested", {**GOOD, "nights": nights})

    assert reason == f"nights: expected an integer, got {got}"
