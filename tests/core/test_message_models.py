"""Messages beyond attrs: frozen dataclasses and frozen pydantic models register and round-trip."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from datetime import datetime, timedelta
from typing import Any

import attrs
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decider import (
    Codec,
    DecodeError,
    MessageRegistrationError,
    MessageRegistry,
    Received,
    Schedule,
    Scheduled,
    Send,
    Sent,
    Workflow,
    message,
)
from decider.testing import WorkflowSpec, strategy_for, value_diff

registry = MessageRegistry()
codec = Codec(registry)


@dataclasses.dataclass(frozen=True)
class Line:
    """A nested dataclass (not a message itself)."""

    sku: str
    quantity: int


@message("models.OrderTaken", registry=registry)
@dataclasses.dataclass(frozen=True, kw_only=True)
class OrderTaken:
    """A dataclass message with nested values, optionals and a delay."""

    order_id: str
    lines: tuple[Line, ...]
    note: str | None = None
    weight: float
    deadline: timedelta


@message("models.Priced", registry=registry)
class Priced(pydantic.BaseModel):
    """A pydantic message with a nested model and a timestamp."""

    model_config = pydantic.ConfigDict(frozen=True)

    order_id: str
    total_cents: int = pydantic.Field(ge=0)
    at: datetime
    lines: tuple[LineModel, ...] = ()


class LineModel(pydantic.BaseModel):
    """A nested pydantic model (not a message itself)."""

    model_config = pydantic.ConfigDict(frozen=True)

    sku: str
    quantity: int


Priced.model_rebuild()

DELAYS = st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3650))
TAKEN = strategy_for(OrderTaken, deadline=DELAYS)
PRICED = strategy_for(
    Priced,
    total_cents=st.integers(min_value=0),
    at=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
)


@settings(max_examples=50, deadline=None)
@given(TAKEN)
def test_a_frozen_dataclass_round_trips_like_an_attrs_class(msg: OrderTaken) -> None:
    type_name, data = codec.encode_message(msg)

    assert type_name == "models.OrderTaken"
    assert codec.decode_message(type_name, data) == msg


@settings(max_examples=50, deadline=None)
@given(PRICED)
def test_a_frozen_pydantic_model_round_trips_under_its_stable_name(msg: Priced) -> None:
    type_name, data = codec.encode_message(msg)

    assert type_name == "models.Priced"
    assert codec.decode_message(type_name, data) == msg


@settings(max_examples=30, deadline=None)
@given(st.one_of(TAKEN, PRICED), DELAYS)
def test_workflow_events_over_dataclasses_and_models_round_trip(msg: Any, after: timedelta) -> None:
    for event in (Received(msg), Sent(msg), Scheduled(after, msg)):
        assert codec.decode_event(*codec.encode_event(event)) == event


def test_a_pydantic_model_is_validated_when_it_is_read_back() -> None:
    with pytest.raises(DecodeError, match=r"models\.Priced"):
        codec.decode_message(
            "models.Priced", b'{"order_id": "o", "total_cents": -1, "at": "2024-01-01T00:00:00"}'
        )


def test_a_dataclass_stores_its_fields_as_a_json_object() -> None:
    msg = OrderTaken(
        order_id="o", lines=(Line("mug", 2),), weight=1.5, deadline=timedelta(minutes=1)
    )

    assert codec.encode_message(msg) == (
        "models.OrderTaken",
        b'{"order_id":"o","lines":[{"sku":"mug","quantity":2}],"note":null,"weight":1.5,'
        b'"deadline":60.0}',
    )


def test_a_mutable_dataclass_is_refused_with_the_line_to_write() -> None:
    with pytest.raises(MessageRegistrationError, match=r"write @dataclass\(frozen=True\)"):

        @message("models.Mutable", registry=MessageRegistry())
        @dataclasses.dataclass
        class Mutable:
            x: int


def test_a_mutable_pydantic_model_is_refused_with_the_line_to_write() -> None:
    with pytest.raises(MessageRegistrationError, match=r"ConfigDict\(frozen=True\)"):

        @message("models.MutableModel", registry=MessageRegistry())
        class MutableModel(pydantic.BaseModel):
            x: int


def test_a_plain_class_is_refused_naming_the_three_kinds() -> None:
    with pytest.raises(
        MessageRegistrationError, match=r"attrs class .* frozen dataclass .* pydantic"
    ):

        @message("models.Plain", registry=MessageRegistry())
        class Plain:
            pass


def test_a_name_stays_taken_whatever_the_kind_of_class() -> None:
    local = MessageRegistry()

    @message("models.Same", registry=local)
    @attrs.frozen
    class First:
        x: int

    with pytest.raises(MessageRegistrationError, match="already registered to"):

        @message("models.Same", registry=local)
        @dataclasses.dataclass(frozen=True)
        class Second:
            x: int


def test_workflows_over_dataclasses_are_tested_like_any_other() -> None:
    def decide(input: OrderTaken, state: None) -> list[Send[Priced] | Schedule[Priced]]:
        priced = Priced(order_id=input.order_id, total_cents=100, at=datetime(2024, 1, 1))
        return [Send(priced)]

    spec = WorkflowSpec(Workflow("Pricing", None, lambda s, e: s, decide), registry=registry)
    taken = OrderTaken(order_id="o", lines=(), weight=0.0, deadline=timedelta(0))

    spec.when(taken).then_commands(
        Send(Priced(order_id="o", total_cents=100, at=datetime(2024, 1, 1)))
    )


def test_differences_name_the_fields_of_dataclasses_and_models() -> None:
    a = OrderTaken(order_id="o", lines=(Line("mug", 2),), weight=1.0, deadline=timedelta(0))
    b = dataclasses.replace(a, weight=2.0)
    p = Priced(order_id="o", total_cents=1, at=datetime(2024, 1, 1))

    assert "field weight: expected 1.0, actual 2.0" in (value_diff("message", a, b) or "")
    assert "field total_cents: expected 1, actual 2" in (
        value_diff("message", p, p.model_copy(update={"total_cents": 2})) or ""
    )


def test_the_core_never_imports_pydantic_itself() -> None:
    code = (
        "import sys, decider, decider.testing; from decider import Codec; Codec(); "
        "assert 'pydantic' not in sys.modules, 'decider imported pydantic'"
    )

    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
