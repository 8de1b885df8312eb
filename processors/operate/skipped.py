"""Skipped inputs: list them, look at one, and re-drive them once the cause is fixed.

A processor that cannot handle a stored event records ``decider.InputSkipped`` in
``decider-skipped-<processor name>`` and goes on; the event itself is untouched. Re-driving
hands the event to its processor again, in a way that takes effect once however often it is
asked:

- an input (any stream but an instance stream or the parked-command ledger) is appended again
  to its own stream, with its type, data and metadata, under an id derived from the skip
  record. The message id is kept, so an instance that handled the message meanwhile does not
  handle it again; a second re-drive appends the same id, which the store ignores;
- a command event (``Sent:``/``Published:``/``Replied:`` in an instance stream, which must not
  be written to) is re-queued by a ``decider.ParkedCommandRetried`` request in the app's
  parked-command ledger, as ``decider retry`` does; the command processor carries it out again
  with a fresh idempotency round;
- a ``decider.ParkedCommandRetried`` request that was skipped is appended again to the ledger,
  with a fresh message id (a new round);
- a ``Scheduled:`` event (skipped by the timer processor) cannot be re-driven: it lives in its
  instance stream; reset the timer processor's checkpoint instead (``decider reset``).

Each re-drive is recorded in the skipped stream as ``decider.InputRedriven`` (derived id), so
the listing shows which skips are still pending. If the re-driven event is skipped again, that
is a new skip record, which can be re-driven in its turn.
"""

from __future__ import annotations

from datetime import datetime

import attrs

from decider import Envelope, Metadata, event_id, message
from decider.codec import COMMAND_KINDS, parse_type
from decider.processors.app import streams
from decider.processors.app.definition import AppDefinition
from decider.processors.app.messages import InputSkipped, ParkedCommandRetried
from decider.processors.app.streams import parked_stream
from decider.processors.engine.reading import read_all
from decider.stores.protocol import (
    ANY,
    EventStore,
    Filter,
    NewEvent,
    RecordedEvent,
    StreamAppend,
    TransactionalStore,
)

SKIPPED_PREFIX = streams.skipped_prefix()
"""What every skipped-inputs stream's name starts with (then the processor's name)."""


@message("decider.InputRedriven")
@attrs.frozen(kw_only=True)
class InputRedriven:
    """A skipped input was handed to its processor again (``skip_id``: the skip record's id)."""

    skip_id: str
    stream: str
    event_id: str


class NotRedrivable(Exception):
    """A skip record that does not exist, or whose event cannot be handed over again."""


@attrs.frozen
class SkippedInput:
    """One skip record, with whether (and as what) it was re-driven since."""

    skip_id: str
    processor: str
    reason: str
    stream: str
    revision: int
    position: int
    event_type: str
    event_id: str
    skipped_at: datetime
    redriven_as: str | None
    redrivable: bool = True
    """Whether :func:`redrive` can hand the event over again (see :func:`can_redrive`)."""
    traceback: str | None = None
    """The traceback (bounded) of the exception that made the input a skip, if one did."""

    def as_json(self) -> dict[str, object]:
        """The record as a JSON object."""
        return {
            "skip_id": self.skip_id,
            "processor": self.processor,
            "reason": self.reason,
            "stream": self.stream,
            "revision": self.revision,
            "position": self.position,
            "event_type": self.event_type,
            "event_id": self.event_id,
            "skipped_at": self.skipped_at.isoformat(),
            "redriven_as": self.redriven_as,
            "redrivable": self.redrivable,
            "traceback": self.traceback,
        }


@attrs.frozen
class Redriven:
    """What a re-drive appended: ``event_id`` in ``stream`` (``how``: ``copy`` or ``retry``)."""

    skip_id: str
    stream: str
    event_id: str
    how: str


def list_skipped(
    store: EventStore,
    app: AppDefinition,
    processor: str | None = None,
    *,
    pending_only: bool = False,
) -> list[SkippedInput]:
    """The skip records of ``app``'s processors (or of one), in the order they were made."""
    prefix = (
        streams.skipped_stream(processor)
        if processor is not None
        else streams.skipped_prefix(app.name)
    )
    records: dict[str, SkippedInput] = {}
    for record in read_all(store, Filter(stream_prefixes=(prefix,))):
        if processor is not None and record.stream != prefix:
            continue
        decoded = app.codec.decode_message(record.type, record.data)
        if isinstance(decoded, InputSkipped):
            records[str(record.id)] = _skipped(app, record, decoded)
        elif isinstance(decoded, InputRedriven) and decoded.skip_id in records:
            records[decoded.skip_id] = attrs.evolve(
                records[decoded.skip_id], redriven_as=decoded.event_id
            )
    found = list(records.values())
    return [s for s in found if s.redriven_as is None] if pending_only else found


def can_redrive(app: AppDefinition, stream: str, event_type: str) -> bool:
    """Whether a skipped event of ``event_type`` in ``stream`` can be re-driven: any input
    outside an instance stream, and a command event in one; not a timer (``Scheduled:``)."""
    kind, _ = parse_type(event_type)
    return app.workflow_of_stream(stream) is None or kind in COMMAND_KINDS


def find_skipped(
    store: EventStore, app: AppDefinition, skip_id: str, *, exact: bool = False
) -> SkippedInput:
    """The skip record whose id is (or, if unambiguous and not ``exact``, starts with)
    ``skip_id``.

    Raises :class:`NotRedrivable` if there is none, or several.
    """
    found = [s for s in list_skipped(store, app) if s.skip_id.startswith(skip_id)]
    matches = [s for s in found if s.skip_id == skip_id] if exact or not skip_id else found
    exact_matches = [s for s in matches if s.skip_id == skip_id]
    if exact_matches:
        return exact_matches[0]
    if not matches:
        raise NotRedrivable(f"no skipped input {skip_id!r} in app {app.name!r}")
    if len(matches) > 1:
        raise NotRedrivable(f"{skip_id!r} names {len(matches)} skipped inputs; give more of the id")
    return matches[0]


def skipped_event(store: EventStore, skipped: SkippedInput) -> RecordedEvent | None:
    """The stored event a skip record names (``None`` if it is not where the record says)."""
    found = store.read_stream(skipped.stream, skipped.revision, 1)
    if not found or str(found[0].id) != skipped.event_id:
        return None
    return found[0]


def redrive(store: EventStore, app: AppDefinition, skipped: SkippedInput) -> Redriven:
    """Hand ``skipped``'s event to its processor again (see the module docstring); idempotent.

    Raises :class:`NotRedrivable` for a timer's event, or an event no longer where it was.
    """
    source = skipped_event(store, skipped)
    if source is None:
        raise NotRedrivable(
            f"event {skipped.event_id} is not at {skipped.stream}@{skipped.revision} any more"
        )
    ledger = parked_stream(app.name)
    _, message_type = parse_type(source.type)
    if app.workflow_of_stream(source.stream) is not None:
        if not can_redrive(app, source.stream, source.type):
            raise NotRedrivable(
                f"{source.type} at {source.stream}@{source.revision} is in an instance stream and "
                f"cannot be appended again; reset {skipped.processor}'s checkpoint to before "
                f"position {source.position} instead (decider reset)"
            )
        new = _retry_request(app, ledger, skipped, source, message_type)
        how = "retry"
    else:
        new = _copy(app, ledger, skipped, source)
        how = "copy"
    target = ledger if how == "retry" else source.stream
    marker_stream = streams.skipped_stream(skipped.processor)
    marker = _encode(
        app,
        marker_stream,
        f"{skipped.skip_id}/redriven",
        InputRedriven(skip_id=skipped.skip_id, stream=target, event_id=str(new.id)),
    )
    appends = [StreamAppend(target, [new], ANY), StreamAppend(marker_stream, [marker], ANY)]
    if isinstance(store, TransactionalStore):
        store.append_batch(appends)
    else:  # the event first: a crash before the marker leaves a re-drive to ask for again
        for item in appends:
            store.append(item.stream, item.events, item.expected_revision)
    return Redriven(skipped.skip_id, target, str(new.id), how)


def _copy(
    app: AppDefinition, ledger: str, skipped: SkippedInput, source: RecordedEvent
) -> NewEvent:
    new_id = event_id(source.stream, f"{skipped.skip_id}/redrive", 0)
    metadata = source.metadata
    if source.stream == ledger or not metadata:
        # A request gets a fresh message id (a new round); an input without metadata keeps
        # the id it was handled under, its event id.
        message_id = str(new_id) if source.stream == ledger else str(source.id)
        metadata = app.codec.with_ids(metadata, message_id, str(source.id))
    return NewEvent(new_id, source.type, source.data, metadata)


def _retry_request(
    app: AppDefinition, ledger: str, skipped: SkippedInput, source: RecordedEvent, command_type: str
) -> NewEvent:
    request = ParkedCommandRetried(
        command_id=str(source.id),
        command_type=command_type,
        stream=source.stream,
        revision=source.revision,
    )
    return _encode(app, ledger, f"{skipped.skip_id}/redrive", request, causation=str(source.id))


def _encode(
    app: AppDefinition, stream: str, cause: str, payload: object, causation: str | None = None
) -> NewEvent:
    new_id = event_id(stream, cause, 0)
    metadata = Metadata(message_id=str(new_id), causation_id=causation or cause)
    type_name, data, encoded = app.codec.encode_envelope(Envelope(payload, metadata))
    return NewEvent(new_id, type_name, data, encoded)


def _skipped(app: AppDefinition, record: RecordedEvent, skipped: InputSkipped) -> SkippedInput:
    return SkippedInput(
        skip_id=str(record.id),
        processor=skipped.processor,
        reason=skipped.reason,
        stream=skipped.stream,
        revision=skipped.revision,
        position=skipped.position,
        event_type=skipped.event_type,
        event_id=skipped.event_id,
        skipped_at=record.recorded_at,
        redriven_as=None,
        redrivable=can_redrive(app, skipped.stream, skipped.event_type),
        traceback=skipped.traceback,
    )
