"""The message registry: stable type names, checked when a class is registered."""

from __future__ import annotations

import attrs
import pytest

from decider import (
    REGISTRY,
    MessageRegistrationError,
    MessageRegistry,
    UnknownMessageType,
    message,
    type_name_of,
)
from samples.order_fulfilment.messages import OrderPlaced
from samples.traffic_fine.messages import ParkingViolation, PoliceReportPublished


@attrs.frozen(kw_only=True)
class Pinged:
    target: str


@attrs.frozen(kw_only=True)
class Ponged:
    target: str


def test_a_registered_class_is_known_by_name_both_ways() -> None:
    registry = MessageRegistry()
    message("test.Pinged", registry=registry)(Pinged)

    assert registry.name_of(Pinged) == "test.Pinged"
    assert registry.class_of("test.Pinged") is Pinged
    assert "test.Pinged" in registry
    assert list(registry) == [("test.Pinged", Pinged)]


def test_registering_the_same_class_under_the_same_name_twice_is_harmless() -> None:
    registry = MessageRegistry()
    registry.register("test.Pinged", Pinged)
    registry.register("test.Pinged", Pinged)

    assert list(registry) == [("test.Pinged", Pinged)]


def test_a_name_taken_by_another_class_is_refused() -> None:
    registry = MessageRegistry()
    registry.register("test.Pinged", Pinged)

    with pytest.raises(MessageRegistrationError, match=r"'test.Pinged' is already registered"):
        registry.register("test.Pinged", Ponged)
    assert registry.class_of("test.Pinged") is Pinged


def test_a_class_registered_under_another_name_is_refused() -> None:
    registry = MessageRegistry()
    registry.register("test.Pinged", Pinged)

    with pytest.raises(MessageRegistrationError, match=r"already registered as 'test.Pinged'"):
        registry.register("test.PingedAgain", Pinged)
    assert "test.PingedAgain" not in registry


@pytest.mark.parametrize(
    "name", ["", "1abc", "Sent:test.Pinged", "test Pinged", "_hidden", "test/Pinged"]
)
def test_a_malformed_name_is_refused(name: str) -> None:
    with pytest.raises(MessageRegistrationError, match="must start with a letter"):
        MessageRegistry().register(name, Pinged)


def test_a_class_that_is_not_attrs_is_refused() -> None:
    class Plain:
        pass

    with pytest.raises(MessageRegistrationError, match="must be an attrs class"):
        MessageRegistry().register("test.Plain", Plain)


def test_an_unknown_class_or_name_raises_unknown_message_type() -> None:
    registry = MessageRegistry()

    with pytest.raises(UnknownMessageType, match=r"'test.Nope'.*not registered"):
        registry.class_of("test.Nope")
    with pytest.raises(UnknownMessageType, match="'Ponged'"):
        registry.name_of(Ponged)


def test_the_samples_register_their_messages_in_the_default_registry() -> None:
    parking = ParkingViolation(location="Grote Markt")
    report = PoliceReportPublished(police_report_id="PR-1", offense=parking)

    assert type_name_of(report) == "fines.PoliceReportPublished"
    assert REGISTRY.class_of("orders.OrderPlaced") is OrderPlaced
