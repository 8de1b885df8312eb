"""What an operator writes: publish an input, reset a processor's checkpoint, and the heartbeat.

A cancel request is the client's (:mod:`decider.processors.client.cancelling`); ``request_cancel``,
``CancelRequest`` and ``OperationError`` are exported here too.

Each is one idempotent append (or one checkpoint write) through the protocol. A reset is refused
while a ``decider run`` service of the app is alive: such a service writes a heartbeat (the
time, in milliseconds since the epoch, under the checkpoint name ``<app>.service-heartbeat``)
every :data:`HEARTBEAT_EVERY` seconds and clears it when it stops gracefully; a heartbeat younger
than :data:`HEARTBEAT_TTL` seconds means a service holds the checkpoints.
"""

from __future__ import annotations

import time
from datetime import datetime

import attrs

from decider import (
    DecodeError,
    UnknownMessageType,
    new_id,
)
from decider.processors.app import decoding, streams
from decider.processors.app.definition import AppDefinition
from decider.processors.app.errors import OperationError
from decider.processors.app.messages import CANCEL_TYPE, PartitionCount
from decider.processors.app.streams import cancel_stream
from decider.processors.client import publishing
from decider.processors.client.cancelling import CancelRequest, request_cancel
from decider.processors.engine.reading import read_all
from decider.stores.protocol import CheckpointStore, EventStore

HEARTBEAT_EVERY = 2.0
"""Seconds between two heartbeats of a running ``decider run``."""

HEARTBEAT_TTL = 10.0
"""Seconds after its last heartbeat that a service still counts as holding its app.
WARNING: compared with this machine's clock: clocks of the machines must agree within it."""

__all__ = [
    "CANCEL_TYPE",
    "HEARTBEAT_EVERY",
    "HEARTBEAT_TTL",
    "CancelRequest",
    "CheckpointMoved",
    "OperationError",
    "Published",
    "beat",
    "cancel_stream",
    "check_no_service",
    "clear_heartbeat",
    "default_input_stream",
    "heartbeat_name",
    "input_types",
    "position_before",
    "processor_names",
    "planned_reset",
    "publish_json",
    "recorded_partitions",
    "request_cancel",
    "Reset",
    "reset_checkpoint",
    "resolve_processor",
    "service_alive",
]


@attrs.frozen
class Published:
    """An input appended by :func:`publish_json`."""

    message_id: str
    type: str
    stream: str

    def as_json(self) -> dict[str, object]:
        """As a JSON object."""
        return {"message_id": self.message_id, "type": self.type, "stream": self.stream}


def default_input_stream(app: AppDefinition) -> str:
    """The stream ``decider publish`` appends to when none is given: ``inputs-<app name>``
    (:func:`~decider.processors.app.streams.input_stream`)."""
    return streams.input_stream(app.name)


def input_types(app: AppDefinition) -> set[str]:
    """The stored type names some workflow of ``app`` takes as input."""
    return {name for r in app.workflows.values() for name in r.inputs}


def publish_json(
    store: EventStore,
    app: AppDefinition,
    type_name: str,
    document: str | bytes,
    *,
    stream: str | None = None,
    message_id: str | None = None,
    correlation_id: str | None = None,
) -> Published:
    """Decode ``document`` as a ``type_name`` message with the app's codec and publish it.

    The same ``message_id`` published twice to one stream is stored once. Raises
    :class:`OperationError` for a type no workflow of ``app`` takes, JSON that does not decode
    to the type, or a stream that belongs to an instance or to the processors.
    """
    if type_name not in input_types(app):
        known = ", ".join(sorted(input_types(app))) or "none"
        raise OperationError(
            f"no workflow of app {app.name!r} takes {type_name!r} (inputs: {known})"
        )
    target = stream or default_input_stream(app)
    if app.workflow_of_stream(target) is not None or streams.is_system_stream(target):
        raise OperationError(
            f"stream {target!r} belongs to a workflow instance or to the processors; "
            "publish to another stream"
        )
    data = document.encode() if isinstance(document, str) else document
    try:
        message = app.codec.decode_message(type_name, data)
    except (DecodeError, UnknownMessageType) as exc:
        raise OperationError(f"cannot decode the message: {exc}") from exc
    published = publishing.publish(
        app, store, message, target, message_id or new_id("msg"), correlation_id=correlation_id
    )
    return Published(published, type_name, target)


# -- checkpoints --------------------------------------------------------------------------


def processor_names(app: AppDefinition) -> list[str]:
    """The checkpoint names of ``app``'s processors, as a service names them."""
    return streams.processor_names(app.name, app.workflows)


def resolve_processor(app: AppDefinition, given: str) -> str:
    """The processor ``given`` names: its full name, or the part after ``<app name>.``."""
    names = processor_names(app)
    for name in names:
        if given in (name, streams.short_processor_name(app.name, name)):
            return name
    raise OperationError(
        f"no processor {given!r} in app {app.name!r} (processors: {', '.join(names)})"
    )


def heartbeat_name(app: AppDefinition) -> str:
    """The checkpoint name under which a running service of ``app`` writes its heartbeat."""
    return streams.heartbeat_name(app.name)


def beat(store: CheckpointStore, app: AppDefinition, now: float | None = None) -> int:
    """Write a heartbeat of ``app``'s service; returns the value written."""
    value = int((time.time() if now is None else now) * 1000)
    store.save_checkpoint(heartbeat_name(app), value)
    return value


def clear_heartbeat(store: CheckpointStore, app: AppDefinition, last: int) -> None:
    """Clear the heartbeat at a graceful stop, unless another service has written one since."""
    if store.load_checkpoint(heartbeat_name(app)) == last:
        store.save_checkpoint(heartbeat_name(app), 0)


def service_alive(
    store: CheckpointStore, app: AppDefinition, now: float | None = None
) -> float | None:
    """Seconds since a live service's last heartbeat (``None``: no service holds ``app``)."""
    value = store.load_checkpoint(heartbeat_name(app))
    if not value:
        return None
    age = (time.time() if now is None else now) - value / 1000
    return age if age < HEARTBEAT_TTL else None


def position_before(store: EventStore, moment: datetime) -> int:
    """The position of the last event recorded before ``moment`` (0: there is none)."""
    found = 0
    for record in read_all(store):
        if record.recorded_at >= moment:
            break
        found = record.position
    return found


@attrs.frozen
class CheckpointMoved:
    """One checkpoint a reset wrote: its name, the position it held (``None``: none) and the
    one it holds now."""

    name: str
    previous: int | None
    position: int

    def as_json(self) -> dict[str, object]:
        """As a JSON object."""
        return {"checkpoint": self.name, "previous": self.previous, "position": self.position}


@attrs.frozen
class Reset:
    """What :func:`reset_checkpoint` did to a processor's checkpoints.

    ``partitions``: the partition count the app ran with on the store (``None``: it never ran
    partitioned there, and the processor has one checkpoint); ``partition``: the one partition
    asked for (``None``: all); ``moved``: every checkpoint written, with what it held before
    (empty: every checkpoint already held ``position``, nothing changed).
    """

    processor: str
    position: int
    partitions: int | None
    partition: int | None
    moved: list[CheckpointMoved]

    def as_json(self) -> dict[str, object]:
        """As a JSON object."""
        return {
            "processor": self.processor,
            "position": self.position,
            "partitions": self.partitions,
            "partition": self.partition,
            "moved": [moved.as_json() for moved in self.moved],
        }


def recorded_partitions(store: EventStore, app: AppDefinition) -> int | None:
    """The partition count recorded in ``store`` for ``app`` (``None``: it never ran
    partitioned there)."""
    records = store.read_stream(streams.partition_count_stream(app.name), 0, 1)
    if not records:
        return None
    count = decoding.decode_message(app.codec, records[0])
    return count.partitions if isinstance(count, PartitionCount) else None


def check_no_service(store: EventStore, app: AppDefinition) -> None:
    """:class:`OperationError` if ``store`` keeps no checkpoints or a service of ``app`` is
    alive (see the module docstring): what :func:`reset_checkpoint` refuses, checked before an
    operator is asked to confirm."""
    if not isinstance(store, CheckpointStore):
        raise OperationError(f"{type(store).__name__} stores no checkpoints")
    age = service_alive(store, app)
    if age is not None:
        raise OperationError(
            f"a service of app {app.name!r} is running (heartbeat {age:.1f}s ago); stop it first"
        )


def planned_reset(
    store: EventStore,
    app: AppDefinition,
    processor: str,
    position: int,
    partition: int | None = None,
) -> Reset:
    """What :func:`reset_checkpoint` would write (``moved``), writing nothing.

    A processor of an app that ran partitioned on ``store`` has a checkpoint per partition
    (``<processor>.p<N>``) beside its own, and resumes each partition from the later of the
    two: a reset moves its own checkpoint and every partition's (or with ``partition`` that
    partition's, keeping where the others resume). Raises :class:`OperationError` for a store
    without checkpoints, a negative position, or a partition the app did not run with.
    """
    if not isinstance(store, CheckpointStore):
        raise OperationError(f"{type(store).__name__} stores no checkpoints")
    if position < 0:
        raise OperationError(f"a position is >= 0, got {position}")
    count = recorded_partitions(store, app)
    if partition is not None and (count is None or not 0 <= partition < count):
        ran = (
            "never ran partitioned"
            if count is None
            else f"ran in {count} partitions (0-{count - 1})"
        )
        raise OperationError(f"no partition {partition}: app {app.name!r} {ran} on this store")
    own = store.load_checkpoint(processor)
    targets: dict[str, int] = {}
    if count is None:
        targets[processor] = position
    else:
        names = [streams.partition_checkpoint_name(processor, n) for n in range(count)]
        chosen = set(names) if partition is None else {names[partition]}
        lowered = own if own is not None and own > position else None
        if partition is None or lowered is not None:
            targets[processor] = position
        for name in names:
            if name in chosen:
                targets[name] = position
            elif lowered is not None:
                # Its own checkpoint resumed it (the later of the two): keep it there.
                stored = store.load_checkpoint(name)
                targets[name] = lowered if stored is None else max(stored, lowered)
    moved = []
    for name, target in targets.items():
        previous = own if name == processor else store.load_checkpoint(name)
        if previous != target:
            moved.append(CheckpointMoved(name, previous, target))
    return Reset(processor, position, count, partition, moved)


def reset_checkpoint(
    store: EventStore,
    app: AppDefinition,
    processor: str,
    position: int,
    *,
    partition: int | None = None,
) -> Reset:
    """Set ``processor``'s checkpoints to ``position`` (see :func:`planned_reset`); returns
    what it wrote and what each checkpoint held before (``moved`` empty: nothing changed).

    Raises :class:`OperationError` while a service of ``app`` is alive (see the module
    docstring), for a store without checkpoints, a negative position or an unknown partition.
    The processor then handles again (or skips) what lies after ``position`` the next time it
    starts.
    """
    check_no_service(store, app)
    plan = planned_reset(store, app, processor, position, partition)
    assert isinstance(store, CheckpointStore)
    for moved in plan.moved:
        store.save_checkpoint(moved.name, moved.position)
    return plan
