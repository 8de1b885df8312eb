"""Request and reply: publish an input, then wait for the workflow's ``Reply`` to it.

A request is an ordinary input: it goes to a stream (by default ``inputs-<app name>``) with a
fresh message id, and the workflows route it like any other, so it starts an instance or is
delivered to a running one (update-with-start). The command processor copies every ``Reply``
the input leads to into ``reply-<message id>``. The caller subscribes to the store's log from
the request's own position (so nothing written after it can be missed, and nothing is polled),
and takes the first event of that reply stream. It also watches the instance streams the
request's routes name, and their workflow processors' skipped-input streams: an instance that
records the request as ``Ignored`` (it had ended), or that fails or is cancelled by it without a
reply, or a processor that skips it (``decide`` raised, under ``on_error="skip"``), ends the
wait at once (:class:`~decider.processors.app.errors.RequestNotAnswered`).

Works on every store, also when the service runs in another process: the wait is the store's
subscription, woken by another process's appends too (SQLite's doorbell, PostgreSQL's
``NOTIFY``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import attrs

from decider import REGISTRY, Envelope, Metadata, event_id, new_id
from decider.codec import Kind, event_kind
from decider.processors.app import decoding, streams
from decider.processors.app.definition import AppDefinition
from decider.processors.app.errors import RequestNotAnswered, RequestTimeout
from decider.processors.app.messages import InputSkipped
from decider.processors.group import partitions
from decider.stores.errors import CorruptEvent
from decider.stores.protocol import (
    ANY,
    CaughtUp,
    EventStore,
    Filter,
    NewEvent,
    RecordedEvent,
    Subscription,
)

SKIPPED = REGISTRY.name_of(InputSkipped)
"""The stored type of a skip record, which ends the wait for the skipped request."""

DEFAULT_TIMEOUT = 10.0
"""Seconds :func:`request` waits for a reply unless told otherwise."""

_UNANSWERED = frozenset({Kind.IGNORED, Kind.FAILED, Kind.CANCELLED})
"""Kinds of instance event that, caused by the request with no ``Replied`` before, mean that no
reply will come."""


@attrs.define
class _Pending:
    """A published request and the subscription its reply will come through."""

    message_type: str
    message_id: str
    event_id: str
    reply_stream: str
    instances: tuple[str, ...]
    skipped: dict[str, str]
    """The skipped-input streams of the workflow processors it goes to, with the instance."""
    subscription: Subscription


def _publish(
    app: AppDefinition,
    store: EventStore,
    message: object,
    stream: str | None,
    message_id: str | None,
) -> _Pending:
    """Append ``message`` and open the subscription that waits for its reply."""
    message_id = message_id or new_id("msg")
    reply = streams.reply_stream(message_id)
    target = streams.check_stream(stream or streams.input_stream(app.name))
    metadata = Metadata(message_id=message_id)
    type_name, data, encoded = app.codec.encode_envelope(Envelope(message, metadata))
    if not any(type_name in r.inputs for r in app.workflows.values()):
        raise ValueError(
            f"no workflow of app {app.name!r} takes {type_name!r}: nothing would reply to it"
        )
    routed = _instances(app, type_name, message, metadata)
    instances = tuple(routed.values())
    skipped = {
        streams.skipped_stream(streams.workflow_processor_name(app.name, name)): instance
        for name, instance in routed.items()
    }
    key = partitions.input_key(app, type_name, lambda: message, metadata)
    event = NewEvent(event_id(target, message_id, 0), type_name, data, encoded, partition_key=key)
    # The reply comes after the request in the log, whoever writes it and whenever: from the
    # request's own position on, nothing can be missed (a repeated request finds its stored
    # position, so a reply written before this call is found too).
    position = store.append(target, [event], ANY).position
    watched = Filter(stream_prefixes=(reply, *instances, *skipped))
    subscription = store.subscribe(position, watched)
    return _Pending(type_name, message_id, str(event.id), reply, instances, skipped, subscription)


def _instances(
    app: AppDefinition, type_name: str, message: object, metadata: Metadata
) -> dict[str, str]:
    """The instance streams the routes of ``app``'s workflows send ``message`` to, by workflow."""
    found = {}
    for name, registration in app.workflows.items():
        entry = registration.inputs.get(type_name)
        if entry is None:
            continue
        try:
            instance_id = entry.route(message, metadata)
            found[name] = streams.instance_stream(name, instance_id)  # type: ignore[arg-type]
        except Exception:  # the processor skips it, with the reason
            continue
    return found


def _wait(app: AppDefinition, pending: _Pending, timeout: float) -> Any:
    """The first reply of ``pending``; raises RequestTimeout or RequestNotAnswered."""
    codec = app.codec
    started = time.monotonic()
    deadline = started + timeout
    replied: set[str] = set()  # instances that recorded a Replied: its copy is on its way
    subscription = pending.subscription
    try:
        while (remaining := deadline - time.monotonic()) > 0:
            item = subscription.poll(remaining)
            if item is None:
                break  # timed out, or the subscription was stopped
            if isinstance(item, CaughtUp):
                continue
            if item.stream == pending.reply_stream:
                return decoding.decode_message(codec, item)
            if item.stream in pending.skipped:
                skip = _skip_of(app, item)
                if skip is not None and skip.event_id == pending.event_id:
                    instance = pending.skipped[item.stream]
                    raise RequestNotAnswered(
                        pending.message_type,
                        pending.message_id,
                        instance,
                        f"the input was skipped: {skip.reason}",
                    )
                continue
            if item.stream not in pending.instances:
                continue  # a stream whose name only starts like one watched
            if decoding.causation_of(codec, item) != pending.message_id:
                continue
            kind = event_kind(item.type)
            if kind == Kind.REPLIED:
                replied.add(item.stream)
            elif kind in _UNANSWERED and item.stream not in replied:
                try:
                    reason = str(getattr(decoding.decode_event(codec, item), "reason", kind))
                except CorruptEvent as exc:
                    reason = f"{kind} ({exc.reason})"
                raise RequestNotAnswered(
                    pending.message_type, pending.message_id, item.stream, reason
                )
    finally:
        subscription.stop()
    raise RequestTimeout(
        pending.message_type, pending.message_id, pending.instances, time.monotonic() - started
    )


def _skip_of(app: AppDefinition, record: RecordedEvent) -> InputSkipped | None:
    """The skip record ``record`` holds (``None``: another kind of event, or unreadable)."""
    if record.type != SKIPPED:
        return None
    try:
        skip = decoding.decode_message(app.codec, record)
    except CorruptEvent:
        return None
    return skip if isinstance(skip, InputSkipped) else None


def request(
    app: AppDefinition,
    store: EventStore,
    message: object,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    stream: str | None = None,
    message_id: str | None = None,
) -> Any:
    """Publish ``message`` and return the first message the workflow replies to it.

    See :meth:`App.request <decider.processors.client.app.App.request>`.
    """
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    return _wait(app, _publish(app, store, message, stream, message_id), timeout)


async def request_async(
    app: AppDefinition,
    store: EventStore,
    message: object,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    stream: str | None = None,
    message_id: str | None = None,
) -> Any:
    """:func:`request` for asyncio: the append and the wait run on a worker thread, so the
    event loop goes on; cancelling the awaiting task stops the wait (the request stays
    published)."""
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    pending = await asyncio.to_thread(_publish, app, store, message, stream, message_id)
    try:
        return await asyncio.to_thread(_wait, app, pending, timeout)
    finally:
        pending.subscription.stop()  # a cancelled await leaves the thread waiting: wake it
