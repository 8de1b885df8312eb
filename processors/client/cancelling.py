"""Cancel from outside a service: record a ``decider.CancelRequested`` input for an instance.

One request per instance: it goes to ``decider-cancel-<instance stream>`` with the instance id
as correlation id, so the default route delivers it to the instance, and a repeated request
finds the first. ``App.cancel``, ``decider cancel`` and the console's *Cancel* all call
:func:`request_cancel`.
"""

from __future__ import annotations

from typing import Any

import attrs

from decider import CancelRequested, DecodeError, Lifecycle, Metadata, Workflow, event_id
from decider.codec import lifecycle_of_type
from decider.processors.app import streams
from decider.processors.app.definition import AppDefinition
from decider.processors.app.errors import OperationError
from decider.processors.app.messages import CANCEL_TYPE
from decider.processors.app.streams import cancel_stream
from decider.processors.client.forking import current_generation
from decider.processors.engine.reading import read_stream
from decider.processors.group import partitions
from decider.stores.protocol import ANY, EventStore, NewEvent, RecordedEvent


def cancel(
    app: AppDefinition,
    store: EventStore,
    workflow: Workflow[Any, Any, Any] | str,
    instance_id: str | None = None,
    *,
    reason: str,
) -> CancelRequest:
    """Ask a running instance of ``app`` to cancel, for ``reason``: by workflow and instance id,
    or by the instance's stream (``instance_id`` left out).

    See :meth:`App.cancel <decider.processors.client.app.App.cancel>`.
    """
    name = workflow if isinstance(workflow, str) else workflow.name
    stream = name if instance_id is None else streams.instance_stream(name, instance_id)
    return request_cancel(store, app, stream, reason)


@attrs.frozen
class CancelRequest:
    """A recorded cancel request; ``already``: one was recorded before (this one was not)."""

    stream: str
    message_id: str
    reason: str
    already: bool

    def as_json(self) -> dict[str, object]:
        """As a JSON object."""
        return {
            "instance": self.stream,
            "message_id": self.message_id,
            "reason": self.reason,
            "already_requested": self.already,
        }


def request_cancel(
    store: EventStore, app: AppDefinition, instance_stream: str, reason: str
) -> CancelRequest:
    """Record a ``decider.CancelRequested`` input for a running instance (one per instance: a
    repeated request returns the first, ``already=True``, also once the instance has ended).

    It goes to :func:`cancel_stream` with the instance id as correlation id, so the default
    route (:func:`~decider.processors.app.definition.by_correlation`) delivers it to the instance.
    Raises :class:`~decider.processors.app.errors.OperationError` for a stream of no workflow, an
    instance without events, or one that is no longer running. For a forked instance (given by
    any generation's stream) the request is the instance's, and its newest generation's status
    counts.
    """
    registration = app.workflow_of_stream(instance_stream)
    if registration is None:
        raise OperationError(f"{instance_stream!r} is not the stream of a workflow of {app.name!r}")
    # A forked instance's inputs are routed to its own stream, and go on to its newest
    # generation: that one's status is the instance's.
    instance_stream = streams.generation_of(instance_stream)[0]
    stream = cancel_stream(instance_stream)
    existing = store.read_stream(stream, 0, 1)
    if existing:  # first: a repeated request is answered the same after the instance ended
        first = _cancel_reason(app, existing[0])
        return CancelRequest(instance_stream, str(existing[0].id), first, True)
    status = _status(read_stream(store, current_generation(app, store, instance_stream)))
    if status is None:
        raise OperationError(f"instance {instance_stream!r} has no events")
    if status is not Lifecycle.RUNNING:
        raise OperationError(f"instance {instance_stream!r} is {status.value}, not running")
    instance_id = instance_stream[len(registration.stream_prefix) :]
    new = event_id(stream, "cancel", 0)
    data = _encode_cancel(app, reason)
    metadata = Metadata(message_id=str(new), correlation_id=instance_id)
    encoded = app.codec.encode_metadata(metadata)
    key = partitions.stream_key(instance_stream)  # its instance's partition
    store.append(stream, [NewEvent(new, CANCEL_TYPE, data, encoded, partition_key=key)], ANY)
    return CancelRequest(instance_stream, str(new), reason, False)


def _encode_cancel(app: AppDefinition, reason: str) -> bytes:
    """The request's data: through the codec where the message class is registered, else as
    :class:`~decider.CancelRequested` (the type the engine reads)."""
    if CANCEL_TYPE in app.codec.registry:
        cls: Any = app.codec.registry.class_of(CANCEL_TYPE)
        type_name, data = app.codec.encode_message(cls(reason=reason))
        assert type_name == CANCEL_TYPE
        return data
    return app.codec.encode_data(CancelRequested(reason=reason))


def _cancel_reason(app: AppDefinition, record: RecordedEvent) -> str:
    """The reason a stored cancel request gives (``None`` as text if it cannot be read)."""
    try:
        request = app.codec.decode_data(CancelRequested, record.type, record.data)
    except DecodeError:
        return "None"
    return str(request.reason)


def _status(events: list[RecordedEvent]) -> Lifecycle | None:
    status: Lifecycle | None = None
    for record in events:
        status = lifecycle_of_type(record.type) or status
    return status
