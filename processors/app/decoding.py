"""Stored events to the pure core's values, and what each processor subscribes to.

A store keeps bytes; what they mean belongs to :mod:`decider.codec`. This module joins the two
for the processors and the operator's views: it decodes a :class:`RecordedEvent` with the codec
and names the stream and revision of any event that cannot be decoded
(:class:`~decider.stores.errors.CorruptEvent`), so it can be found and repaired while every
other event stays readable. The subscription filters combine the stream names of
:mod:`decider.processors.app.streams` with the type prefixes the codec gives for each kind.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from decider import Codec, DecodeError, Metadata, WorkflowEvent
from decider.codec import (
    COMMAND_KINDS,
    LIFECYCLE_TYPES,
    TIMER_KINDS,
    Kind,
    Timer,
    kind_prefixes,
)
from decider.processors.app import streams
from decider.processors.app.messages import ForkMark
from decider.stores.errors import CorruptEvent
from decider.stores.protocol import Filter, RecordedEvent


def decode_metadata(codec: Codec, record: RecordedEvent) -> Metadata:
    """The metadata of a stored event, with the store's recorded time filled in.

    Raises :class:`CorruptEvent` naming the stream and revision when it cannot be decoded.
    """
    try:
        metadata = codec.decode_metadata(record.metadata)
    except DecodeError as exc:
        raise CorruptEvent(record.stream, record.revision, str(exc)) from exc
    if metadata.recorded_at is None:
        return attrs.evolve(metadata, recorded_at=record.recorded_at)
    return metadata


def input_metadata(codec: Codec, record: RecordedEvent) -> Metadata:
    """The metadata of an input as stored (``recorded_at`` only if it holds one); an event
    stored with none (written by another system) gets its event id as message id.

    Raises :class:`CorruptEvent` naming the stream and revision when it cannot be decoded.
    """
    if not record.metadata:
        return Metadata(message_id=str(record.id))
    try:
        return codec.decode_metadata(record.metadata)
    except DecodeError as exc:
        raise CorruptEvent(record.stream, record.revision, str(exc)) from exc


def decode_event(codec: Codec, record: RecordedEvent) -> WorkflowEvent[Any, Any]:
    """The workflow event a stored event holds; :class:`CorruptEvent` if it holds none."""
    try:
        return codec.decode_event(record.type, record.data)
    except DecodeError as exc:
        raise CorruptEvent(record.stream, record.revision, str(exc)) from exc


def decode_message(codec: Codec, record: RecordedEvent, type_name: str | None = None) -> Any:
    """The message a stored event holds (a plain message, not a workflow event).

    ``type_name`` decodes the data as that message type instead of the stored type (the message
    a ``Sent`` event carries). Raises :class:`CorruptEvent` for a workflow event type, an
    unregistered type or bad data.
    """
    try:
        return codec.decode_message(type_name or record.type, record.data)
    except DecodeError as exc:
        reason = exc.reason
        if reason == "a workflow event, not a message":
            reason = f"{record.type!r} is a workflow event, not a message"
        raise CorruptEvent(record.stream, record.revision, reason) from exc


def decode_timer(codec: Codec, record: RecordedEvent) -> Timer:
    """The timer a stored ``Scheduled`` event holds; :class:`CorruptEvent` if it holds none."""
    try:
        return codec.decode_timer(record.type, record.data)
    except DecodeError as exc:
        raise CorruptEvent(record.stream, record.revision, str(exc)) from exc


_FORK_FIELD = b'"forked_to"'
_CANCELLED = Kind.CANCELLED.value  # a plain str: compared faster than the enum member


def is_fork_mark(record: RecordedEvent) -> bool:
    """Whether ``record`` ends a generation that was forked (a :class:`ForkMark`): a type
    comparison and, on a ``Cancelled`` event only, one search of its bytes."""
    return record.type == _CANCELLED and _FORK_FIELD in record.data


def fork_mark(codec: Codec, record: RecordedEvent) -> ForkMark | None:
    """The fork that ``record`` records, if it ends a generation that was forked; ``None``
    for any other event. Raises :class:`CorruptEvent` for a fork mark that does not decode."""
    if not is_fork_mark(record):
        return None
    try:
        mark: ForkMark = codec.decode_data(ForkMark, record.type, record.data)
    except DecodeError as exc:
        raise CorruptEvent(record.stream, record.revision, str(exc)) from exc
    return mark


def causation_of(codec: Codec, record: RecordedEvent) -> str | None:
    """The causation id of an event the processors wrote; ``None`` if it has none."""
    return codec.causation_of(record.metadata)


# -- what each processor reads --------------------------------------------------------------


def workflow_filter(input_types: Iterable[str]) -> Filter:
    """A workflow processor's subscription: its input message types, from any stream."""
    return Filter(event_types=tuple(sorted(input_types)))


def command_filter(workflows: Iterable[str], ledger: str, retried_type: str) -> Filter:
    """The command processor's: commands, publications and replies of the workflows' instance
    streams, and the retry requests of its parked-command ledger."""
    return Filter(
        stream_prefixes=(*(streams.instance_prefix(w) for w in workflows), ledger),
        event_types=(retried_type,),
        event_type_prefixes=kind_prefixes(COMMAND_KINDS),
    )


def timer_filter(workflows: Iterable[str]) -> Filter:
    """The timer processor's: the ``Scheduled`` events of the workflows' instance streams."""
    return Filter(
        stream_prefixes=tuple(streams.instance_prefix(w) for w in workflows),
        event_type_prefixes=kind_prefixes(TIMER_KINDS),
    )


def lifecycle_filter(workflows: Iterable[str]) -> Filter:
    """The events that say an instance began or ended (completed, failed, cancelled), in the
    workflows' instance streams."""
    return Filter(
        stream_prefixes=tuple(streams.instance_prefix(w) for w in workflows),
        event_types=LIFECYCLE_TYPES,
    )
