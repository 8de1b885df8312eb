"""Publish from outside a service: append inputs for the workflows to a stream.

An input's event id derives from its stream and message id, so publishing the same message id
to the same stream again is stored once (the store recognises the event id); published to
another stream it is recognised by the workflow processor, which handles a message id once per
instance. Each publish opens a telemetry span and carries its trace context in the metadata.

Each input is stored with its partition key (:func:`~decider.processors.group.partitions.input_key`:
the app routes it here, once), so in a group of processes only the process holding its
instance's partition reads it. An input that several workflows take, or whose route fails, is
stored without one and read by every process.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from decider import Envelope, Metadata, event_id, new_id
from decider.processors.app.definition import AppDefinition
from decider.processors.engine import telemetry
from decider.processors.group import partitions
from decider.stores.protocol import ANY, EventStore, NewEvent


def publish(
    app: AppDefinition,
    store: EventStore,
    message: object,
    stream: str,
    message_id: str | None = None,
    *,
    correlation_id: str | None = None,
) -> str:
    """Append ``message`` to ``stream`` as an input for ``app``'s workflows; returns its message
    id.

    See :meth:`App.publish <decider.processors.client.app.App.publish>`.
    """
    message_id = message_id or new_id("msg")
    with telemetry.publish_span(stream, app.codec.registry.name_of(type(message))):
        metadata = telemetry.inject(Metadata(message_id=message_id, correlation_id=correlation_id))
        type_name, data, encoded = app.codec.encode_envelope(Envelope(message, metadata))
        key = partitions.input_key(app, type_name, lambda: message, metadata)
        event = NewEvent(
            event_id(stream, message_id, 0), type_name, data, encoded, partition_key=key
        )
        store.append(stream, [event], ANY)
    return message_id


def publish_many(
    app: AppDefinition,
    store: EventStore,
    messages: Sequence[object],
    stream: str,
    message_ids: Sequence[str] | None = None,
) -> list[str]:
    """Append several inputs to ``stream`` in one append; returns their message ids.

    See :meth:`App.publish_many <decider.processors.client.app.App.publish_many>`.
    """
    if message_ids is not None and len(message_ids) != len(messages):
        raise ValueError(f"{len(messages)} messages but {len(message_ids)} message ids were given")
    ids = list(message_ids) if message_ids is not None else [new_id("msg") for _ in messages]
    if not messages:
        return ids
    first_type = app.codec.registry.name_of(type(messages[0]))
    with telemetry.publish_span(stream, first_type, len(messages)):
        events = []
        for message, message_id in zip(messages, ids, strict=True):
            metadata = telemetry.inject(Metadata(message_id=message_id))
            type_name, data, encoded = app.codec.encode_envelope(Envelope(message, metadata))
            key = partitions.input_key(app, type_name, _given(message), metadata)
            new = event_id(stream, message_id, 0)
            events.append(NewEvent(new, type_name, data, encoded, partition_key=key))
        store.append(stream, events, ANY)
    return ids


def _given(message: object) -> Callable[[], object]:
    """``message``, for :func:`~decider.processors.group.partitions.input_key`."""
    return lambda: message
