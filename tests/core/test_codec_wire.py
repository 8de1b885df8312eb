"""The codec owns the stored type grammar, timers and metadata; any failure is a DecodeError."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from decider import Codec, DecodeError, Scheduled, WorkflowEvent
from decider.codec import (
    COMMAND_KINDS,
    EVENT_KINDS,
    kind_prefixes,
    parse_type,
    stored_type,
)
from samples.order_fulfilment.messages import PaymentTimedOut

CODEC = Codec()
DEEP = b'{"order_id": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
"""100,000 levels of nesting: json.loads raises RecursionError, which must not escape."""

_type_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_.\-]{0,30}", fullmatch=True)


@given(kind=st.sampled_from([k for k in EVENT_KINDS if k not in ("Began", "Completed")]))
def test_a_stored_type_parses_back_to_its_kind_and_message_type(kind: str) -> None:
    assert parse_type(stored_type(kind, "orders.PaymentTimedOut")) == (
        kind,
        "orders.PaymentTimedOut",
    )


@given(name=_type_names)
def test_a_message_type_name_is_no_workflow_event(name: str) -> None:
    assert parse_type(name) in ((None, name), (name, ""))  # Began/Completed are their own kind


def test_kind_prefixes_are_what_a_command_reader_subscribes_with() -> None:
    prefixes = kind_prefixes(COMMAND_KINDS)
    assert prefixes == ("Sent:", "Published:", "Replied:")
    assert all(
        stored_type(k, "x.Y").startswith(p) for k, p in zip(COMMAND_KINDS, prefixes, strict=False)
    )


def test_a_scheduled_event_decodes_to_its_timer_with_the_message_as_bytes() -> None:
    type_name, data = CODEC.encode_event(
        Scheduled(timedelta(seconds=90), PaymentTimedOut(order_id="o"))
    )
    timer = CODEC.decode_timer(type_name, data)
    assert (timer.message_type, timer.after) == ("orders.PaymentTimedOut", timedelta(seconds=90))
    assert CODEC.decode_message(timer.message_type, timer.message) == PaymentTimedOut(order_id="o")


@pytest.mark.parametrize(
    ("type_name", "data", "reason"),
    [
        ("Sent:orders.PaymentTimedOut", b"{}", "not a Scheduled"),
        ("Scheduled:orders.PaymentTimedOut", b'{"after": true, "message": {}}', "'after'"),
        ("Scheduled:orders.PaymentTimedOut", b'{"after": 1e300, "message": {}}', "'after'"),
        ("Scheduled:orders.PaymentTimedOut", b'{"after": 1, "message": [1]}', "'message'"),
        ("Scheduled:orders.PaymentTimedOut", b'{"after": 1}', "'message'"),
    ],
)
def test_a_bad_timer_is_a_decode_error(type_name: str, data: bytes, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        CODEC.decode_timer(type_name, data)


def test_deeply_nested_json_is_a_decode_error_everywhere() -> None:
    scheduled = b'{"after": 1, "message": ' + DEEP + b"}"
    calls: list[Callable[[], object]] = [
        lambda: CODEC.decode_message("orders.PaymentTimedOut", DEEP),
        lambda: CODEC.decode_event("Sent:orders.PaymentTimedOut", DEEP),
        lambda: CODEC.decode_event("Scheduled:orders.PaymentTimedOut", scheduled),
        lambda: CODEC.decode_timer("Scheduled:orders.PaymentTimedOut", scheduled),
        lambda: CODEC.decode_metadata(DEEP),
    ]
    for call in calls:
        with pytest.raises(DecodeError, match="nested too deeply"):
            call()
    assert CODEC.causation_of(DEEP) is None


@given(data=st.binary(max_size=64), metadata=st.binary(max_size=64), name=_type_names)
def test_no_bytes_make_a_decode_raise_anything_but_decode_error(
    data: bytes, metadata: bytes, name: str
) -> None:
    calls: list[Callable[[], object]] = [
        lambda: CODEC.decode_message(name, data),
        lambda: CODEC.decode_event(f"Sent:{name}", data),
        lambda: CODEC.decode_timer(f"Scheduled:{name}", data),
        lambda: CODEC.decode_metadata(metadata),
    ]
    for call in calls:
        try:
            call()
        except DecodeError as exc:
            assert exc.reason


def test_every_lifecycle_event_type_names_its_status() -> None:
    from decider import Began, Cancelled, Completed, Failed, Lifecycle
    from decider.codec import LIFECYCLE_TYPES, lifecycle_of_type

    events: list[WorkflowEvent[Any, Any]] = [Began(), Completed(), Failed("x"), Cancelled("y")]
    statuses = [lifecycle_of_type(CODEC.encode_event(e)[0]) for e in events]
    assert statuses == [
        Lifecycle.RUNNING,
        Lifecycle.COMPLETED,
        Lifecycle.FAILED,
        Lifecycle.CANCELLED,
    ]
    assert {CODEC.encode_event(e)[0] for e in events} == set(LIFECYCLE_TYPES)
    assert lifecycle_of_type(stored_type("Sent", "Completed")) is None


def test_with_ids_replaces_the_ids_and_keeps_every_other_field() -> None:
    import json

    stored = b'{"message_id":"m1","correlation_id":"c1","trace":"t"}'
    doc = json.loads(CODEC.with_ids(stored, "m2", "e1"))
    assert doc == {"message_id": "m2", "causation_id": "e1", "correlation_id": "c1", "trace": "t"}
    for bad in (b"", b"not json", b"[1]", DEEP):
        assert json.loads(CODEC.with_ids(bad, "m2", "e1")) == {
            "message_id": "m2",
            "causation_id": "e1",
        }


def test_decode_data_structures_an_unregistered_class_or_names_the_type() -> None:
    from decider import CancelRequested

    data = CODEC.encode_data(CancelRequested(reason="late"))
    assert CODEC.decode_data(CancelRequested, "x.Cancel", data) == CancelRequested(reason="late")
    with pytest.raises(DecodeError, match=r"x\.Cancel"):
        CODEC.decode_data(CancelRequested, "x.Cancel", b'{"other": 1}')
