"""Parking: the ledger of commands set aside, the failure fed back, and retry requests.

A command whose handler failed for good (or ran out of attempts), or that no handler or route
takes, is parked: a ``decider.CommandParked`` record goes to ``decider-parked-<app>``, and a
``decider.CommandFailed`` to the workflow's instance (through ``decider-failed-<Workflow>-<id>``)
if the workflow lists it as an input, so ``decide`` can compensate. A
``decider.ParkedCommandRetried`` in the ledger asks for the command to be carried out again.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Protocol

import attrs

from decider import Envelope, Metadata, event_id
from decider.processors.app import decoding, streams
from decider.processors.app.definition import AppDefinition, WorkflowRegistration
from decider.processors.app.messages import (
    COMMAND_FAILED,
    CommandFailed,
    CommandParked,
    ParkedCommandRetried,
)
from decider.processors.commands.replay import park_cause
from decider.processors.engine import logs
from decider.processors.engine.base import Skip
from decider.processors.engine.failures import traceback_of
from decider.processors.engine.reading import read_stream
from decider.processors.group import partitions
from decider.stores.protocol import ANY, EventStore, NewEvent, RecordedEvent, StreamAppend


class Derive(Protocol):
    """Builds a new event with an id derived from its stream and cause."""

    def __call__(
        self,
        stream: str,
        cause: str,
        message: Any,
        *,
        index: int = 0,
        correlation_id: str | None = None,
        causation_id: str | None = None,
        input_for: WorkflowRegistration | bool = False,
    ) -> NewEvent: ...


class Parking:
    """An app's parked-command ledger, as the command processor writes and reads it."""

    def __init__(
        self, app: AppDefinition, derived: Derive, logger: logging.Logger | None, name: str
    ) -> None:
        self.app = app
        self.ledger = streams.parked_stream(app.name)
        self._derived = derived
        self._log = logs.with_context(logger or logging.getLogger(__name__), processor=name)
        self._name = name
        self.parked = 0

    def park(  # noqa: PLR0917
        self,
        event: RecordedEvent,
        command_type: str,
        correlation_id: str | None,
        reason: str,
        attempts: int,
        round_key: str,
        exception: BaseException | None = None,
    ) -> list[StreamAppend]:
        """The appends that park the command ``event`` holds (and feed its failure back);
        ``exception``: what the handler raised, its traceback logged and kept with the record."""
        command_id = str(event.id)
        self._log.error(
            "%s parks %s %s after %d attempt(s): %s",
            self._name,
            command_type,
            command_id,
            attempts,
            reason,
            extra={
                "command_id": command_id,
                "event_type": command_type,
                "stream": event.stream,
                "position": event.position,
                "attempt": attempts,
            },
            exc_info=exception,
        )
        cause = park_cause(command_id, round_key)
        parked = CommandParked(
            command_id=command_id,
            command_type=command_type,
            stream=event.stream,
            revision=event.revision,
            reason=reason,
            attempts=attempts,
            traceback=traceback_of(exception),
        )
        record = self._derived(
            self.ledger, cause, parked, correlation_id=correlation_id, causation_id=command_id
        )
        appends = [StreamAppend(self.ledger, [record], ANY)]
        registration = self.app.workflow_of_stream(event.stream)
        if registration is not None and COMMAND_FAILED in registration.inputs:
            # Fed back to the instance as an input, so decide can compensate.
            stream = streams.failed_stream(registration.workflow.name, command_id)
            failed = CommandFailed(
                command_id=command_id, command_type=command_type, reason=reason, attempts=attempts
            )
            feedback = self._derived(
                stream,
                cause,
                failed,
                correlation_id=correlation_id,
                causation_id=command_id,
                input_for=registration,
            )
            appends.append(StreamAppend(stream, [feedback], ANY))
        self.parked += 1
        return appends

    def retried(
        self, event: RecordedEvent, store: EventStore
    ) -> tuple[RecordedEvent, Metadata, str]:
        """The command a retry request in the ledger is for: its stored event, its metadata
        and the round key (the request's message id). :class:`Skip` if it is not there."""
        codec = self.app.codec
        request = decoding.decode_message(codec, event)
        metadata = decoding.input_metadata(codec, event)
        if not isinstance(request, ParkedCommandRetried):
            raise Skip(f"{event.type!r} is not a retry request")
        found = store.read_stream(request.stream, request.revision, 1)
        if not found or str(found[0].id) != request.command_id:
            raise Skip(
                f"command {request.command_id} is not at {request.stream}@{request.revision}"
            )
        source = found[0]
        self._log.info(
            "%s retries parked command %s",
            self._name,
            request.command_id,
            extra={"command_id": request.command_id, "event_type": request.command_type},
        )
        return source, decoding.input_metadata(codec, source), metadata.message_id


@attrs.frozen
class ParkedCommand:
    """A command set aside after its retries, until someone retries it."""

    command_id: str
    command_type: str
    stream: str
    revision: int
    reason: str
    attempts: int
    parked_at: datetime
    traceback: str | None = None
    """The traceback (bounded) of the exception the handler raised, if it raised one."""


def parked_in(
    app: AppDefinition, ledger: list[RecordedEvent]
) -> list[tuple[ParkedCommand, RecordedEvent]]:
    """The commands parked now in ``ledger``, each with its last park record."""
    parked: dict[str, tuple[ParkedCommand, RecordedEvent]] = {}
    for record in ledger:
        message = decoding.decode_message(app.codec, record)
        if isinstance(message, CommandParked):
            command = ParkedCommand(
                command_id=message.command_id,
                command_type=message.command_type,
                stream=message.stream,
                revision=message.revision,
                reason=message.reason,
                attempts=message.attempts,
                parked_at=record.recorded_at,
                traceback=message.traceback,
            )
            parked[message.command_id] = (command, record)
        elif isinstance(message, ParkedCommandRetried):
            parked.pop(message.command_id, None)
    return list(parked.values())


def parked_now(
    app: AppDefinition, store: EventStore
) -> dict[str, tuple[ParkedCommand, RecordedEvent]]:
    """The commands of ``app`` parked now, by command id, each with its last park record."""
    ledger = read_stream(store, streams.parked_stream(app.name))
    return {command.command_id: (command, record) for command, record in parked_in(app, ledger)}


def retry_request(app: AppDefinition, command: ParkedCommand, park: RecordedEvent) -> NewEvent:
    """The ledger's request to retry ``command`` after its park record ``park``: one id per
    park (whoever asks), so a command parked again may be retried again."""
    stream = streams.parked_stream(app.name)
    request = ParkedCommandRetried(
        command_id=command.command_id,
        command_type=command.command_type,
        stream=command.stream,
        revision=command.revision,
    )
    new_id = event_id(stream, f"{command.command_id}/retry/{park.id}", 0)
    metadata = Metadata(message_id=str(new_id), causation_id=command.command_id)
    type_name, data, encoded = app.codec.encode_envelope(Envelope(request, metadata))
    # In the partition of the command it retries (the command processor's partition_key).
    key = partitions.stream_key(command.stream)
    return NewEvent(new_id, type_name, data, encoded, partition_key=key)
