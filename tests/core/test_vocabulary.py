"""The kind vocabulary and the grammar of stream names: one owner each, the stored text kept.

:class:`decider.kinds.Kind` spells every kind the codec writes, and what is stored is the plain
text it always was; :mod:`decider.streams` builds the names the processors and the EventStoreDB
adapter store under, byte for byte as before.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs
import pytest

from decider import (
    Began,
    Cancelled,
    Completed,
    Failed,
    Ignored,
    InitiatedBy,
    Published,
    Received,
    Replied,
    Scheduled,
    Sent,
    WorkflowEvent,
    message,
    streams,
)
from decider.codec import (
    BEGAN,
    COMMAND_KINDS,
    COMPLETED,
    EVENT_KINDS,
    LIFECYCLE_TYPES,
    TIMER_KINDS,
    Codec,
    Kind,
    event_kind,
)
from decider.messages import MessageRegistry

REGISTRY = MessageRegistry()


@message("vocabulary.Ping", registry=REGISTRY)
@attrs.frozen(kw_only=True)
class Ping:
    n: int


EVENTS: list[tuple[WorkflowEvent[Any, Any], Kind]] = [
    (Began(), Kind.BEGAN),
    (InitiatedBy(Ping(n=1)), Kind.INITIATED_BY),
    (Received(Ping(n=1)), Kind.RECEIVED),
    (Replied(Ping(n=1)), Kind.REPLIED),
    (Sent(Ping(n=1)), Kind.SENT),
    (Published(Ping(n=1)), Kind.PUBLISHED),
    (Scheduled(timedelta(seconds=5), Ping(n=1)), Kind.SCHEDULED),
    (Completed(), Kind.COMPLETED),
    (Ignored(Ping(n=1), "ended"), Kind.IGNORED),
    (Failed("boom"), Kind.FAILED),
    (Cancelled("no"), Kind.CANCELLED),
]


def test_the_vocabulary_is_every_kind_the_grammar_knows() -> None:
    assert tuple(kind.value for kind in Kind) == EVENT_KINDS
    assert [kind for _, kind in EVENTS] == list(Kind)
    assert set(COMMAND_KINDS) == {Kind.SENT, Kind.PUBLISHED, Kind.REPLIED}
    assert TIMER_KINDS == (Kind.SCHEDULED,)
    assert LIFECYCLE_TYPES == (Kind.BEGAN, Kind.COMPLETED, Kind.FAILED, Kind.CANCELLED)
    # The grammar's own tuples hold plain text: they go to the stores as filters.
    for name in (*EVENT_KINDS, *COMMAND_KINDS, *TIMER_KINDS, *LIFECYCLE_TYPES, BEGAN, COMPLETED):
        assert type(name) is str


@pytest.mark.parametrize("event, kind", EVENTS, ids=lambda v: str(v)[:20])
def test_each_event_is_stored_under_its_kind_as_plain_text(
    event: WorkflowEvent[Any, Any], kind: Kind
) -> None:
    type_name, data = Codec(REGISTRY).encode_event(event)
    assert type(type_name) is str
    assert event_kind(type_name) == kind
    assert type_name in (kind.value, f"{kind.value}:vocabulary.Ping")
    assert Codec(REGISTRY).decode_event(type_name, data) == event


def test_a_subclass_of_an_event_is_stored_under_its_kind_not_its_class_name() -> None:
    class Started(Began):
        pass

    class Done(Completed):
        pass

    class Broke(Failed):
        pass

    codec = Codec(REGISTRY)
    assert codec.encode_event(Started())[0] == "Began"
    assert codec.encode_event(Done())[0] == "Completed"
    assert codec.encode_event(Broke("x")) == ("Failed", b'{"reason":"x"}')


def test_the_stream_names_are_stored_as_before() -> None:
    assert streams.instance_stream("Order", "o-1") == "Order-o-1"
    assert streams.system_stream("parked", "fines") == "decider-parked-fines"
    assert streams.checkpoint_stream("fines.commands") == "decider-checkpoint-fines.commands"
    assert streams.CHECKPOINT_PREFIX == "decider-checkpoint-"
    assert streams.lease_stream("fines.p0") == "decider-lease-fines.p0"
    assert streams.LEASE_PREFIX == "decider-lease-"
    assert streams.LEASE_INDEX_STREAM == "decider-leaseindex"
    assert streams.RESERVED == ("decider", "timer", "topic", "reply")
