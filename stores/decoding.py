"""Decoding stored events with the pure core's codec, reporting bad data as CorruptEvent.

A store keeps bytes; what they mean belongs to :mod:`decider`. This module joins the two and
names the stream and revision of any event that cannot be decoded, so it can be found and
repaired while every other event stays readable.
"""

from __future__ import annotations

from typing import Any

from decider import Codec, DecodeError, Metadata, WorkflowEvent, event_kind
from decider.stores.errors import CorruptEvent
from decider.stores.protocol import RecordedEvent


def decode_metadata(codec: Codec, record: RecordedEvent) -> Metadata:
    """The metadata of a stored event, with the store's recorded time filled in.

    Raises :class:`CorruptEvent` naming the stream and revision when it cannot be decoded.
    """
    try:
        metadata = codec.decode_metadata(record.metadata)
    except DecodeError as exc:
        raise CorruptEvent(record.stream, record.revision, str(exc)) from exc
    if metadata.recorded_at is None:
        return Metadata(
            message_id=metadata.message_id,
            correlation_id=metadata.correlation_id,
            causation_id=metadata.causation_id,
            recorded_at=record.recorded_at,
        )
    return metadata


def decode_event(codec: Codec, record: RecordedEvent) -> WorkflowEvent[Any, Any]:
    """The workflow event a stored event holds; :class:`CorruptEvent` if it holds none."""
    try:
        return codec.decode_event(record.type, record.data)
    except DecodeError as exc:
        raise CorruptEvent(record.stream, record.revision, str(exc)) from exc


def decode_message(codec: Codec, record: RecordedEvent) -> Any:
    """The message a stored event holds (a plain message, not a workflow event).

    Raises :class:`CorruptEvent` for a workflow event type, an unregistered type or bad data.
    """
    if event_kind(record.type) is not None:
        raise CorruptEvent(
            record.stream, record.revision, f"{record.type!r} is a workflow event, not a message"
        )
    try:
        return codec.decode_message(record.type, record.data)
    except DecodeError as exc:
        raise CorruptEvent(record.stream, record.revision, str(exc)) from exc
