"""Codec round trips: every sample message, every workflow event kind, and metadata."""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import samples.order_fulfilment.messages
import samples.traffic_fine.messages
from decider import (
    REGISTRY,
    Began,
    Cancelled,
    Codec,
    Completed,
    Failed,
    Ignored,
    InitiatedBy,
    Metadata,
    Published,
    Received,
    Replied,
    Scheduled,
    Sent,
    event_kind,
)
from decider.testing import strategy_for

codec = Codec()

SAMPLE_MESSAGES = sorted(
    (name, cls)
    for name, cls in REGISTRY
    if cls.__module__
    in (samples.traffic_fine.messages.__name__, samples.order_fulfilment.messages.__name__)
)
ANY_SAMPLE_MESSAGE = st.one_of(*(strategy_for(cls) for _, cls in SAMPLE_MESSAGES))

# Far enough for any real timer; beyond a few centuries float seconds lose microseconds.
DELAYS = st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3650))

WORKFLOW_EVENTS = st.one_of(
    st.just(Began()),
    st.just(Completed()),
    st.builds(Failed, st.text()),
    st.builds(Cancelled, st.text()),
    st.builds(InitiatedBy, ANY_SAMPLE_MESSAGE),
    st.builds(Received, ANY_SAMPLE_MESSAGE),
    st.builds(Replied, ANY_SAMPLE_MESSAGE),
    st.builds(Sent, ANY_SAMPLE_MESSAGE),
    st.builds(Published, ANY_SAMPLE_MESSAGE),
    st.builds(Scheduled, DELAYS, ANY_SAMPLE_MESSAGE),
    st.builds(Ignored, ANY_SAMPLE_MESSAGE, st.text()),
)


def test_both_samples_messages_are_all_covered() -> None:
    names = [name for name, _ in SAMPLE_MESSAGES]

    assert sum(name.startswith("fines.") for name in names) == 6
    assert sum(name.startswith("orders.") for name in names) == 14


@pytest.mark.parametrize(("name", "cls"), SAMPLE_MESSAGES, ids=[n for n, _ in SAMPLE_MESSAGES])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_every_sample_message_round_trips(name: str, cls: type[Any], data: st.DataObject) -> None:
    msg = data.draw(strategy_for(cls))

    type_name, body = codec.encode_message(msg)

    assert type_name == name
    assert codec.decode_message(type_name, body) == msg


@settings(max_examples=100, deadline=None)
@given(WORKFLOW_EVENTS)
def test_every_workflow_event_kind_round_trips(event: Any) -> None:
    type_name, body = codec.encode_event(event)

    assert event_kind(type_name) == type(event).__name__
    assert codec.decode_event(type_name, body) == event


def test_a_workflow_event_stores_its_kind_and_message_type() -> None:
    timeout = samples.order_fulfilment.messages.PaymentTimedOut(order_id="ord-1")

    assert codec.encode_event(Scheduled(timedelta(minutes=15), timeout)) == (
        "Scheduled:orders.PaymentTimedOut",
        b'{"after":900.0,"message":{"order_id":"ord-1"}}',
    )
    assert codec.encode_event(Began()) == ("Began", b"{}")


IDS = st.text(min_size=1, max_size=30)
METADATA = st.builds(
    Metadata,
    message_id=IDS,
    correlation_id=st.none() | IDS,
    causation_id=st.none() | IDS,
    recorded_at=st.none() | st.datetimes(timezones=st.just(UTC)),
)


@settings(max_examples=50, deadline=None)
@given(METADATA)
def test_metadata_round_trips(metadata: Metadata) -> None:
    assert codec.decode_metadata(codec.encode_metadata(metadata)) == metadata


def test_absent_metadata_fields_are_left_out() -> None:
    assert codec.encode_metadata(Metadata(message_id="msg_1")) == b'{"message_id":"msg_1"}'
