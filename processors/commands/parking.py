"""Parking: the ledger of commands set aside, the failure fed back, and retry requests.

A command whose handler failed for good (or ran out of attempts), or that no handler or route
takes, is parked: a ``decider.CommandParked`` record goes to ``decider-parked-<app>``, and a
``decider.CommandFailed`` to the workflow's instance (through ``decider-failed-<Workflow>-<id>``)
if the workflow lists it as an input, so ``decide`` can compensate. A
``decider.ParkedCommandRetried`` in the ledger asks for the command to be carried out again.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from decider import Metadata
from decider.processors.app import decoding, streams
from decider.processors.app.definition import App
from decider.processors.app.messages import (
    COMMAND_FAILED,
    CommandFailed,
    CommandParked,
    ParkedCommandRetried,
)
from decider.processors.commands.replay import park_cause
from decider.processors.engine import logs
from decider.processors.engine.base import Skip
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
    ) -> NewEvent: ...


class Parking:
    """An app's parked-command ledger, as the command processor writes and reads it."""

    def __init__(self, app: App, derived: Derive, logger: logging.Logger | None, name: str) -> None:
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
    ) -> list[StreamAppend]:
        """The appends that park the command ``event`` holds (and feed its failure back)."""
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
        )
        cause = park_cause(command_id, round_key)
        parked = CommandParked(
            command_id=command_id,
            command_type=command_type,
            stream=event.stream,
            revision=event.revision,
            reason=reason,
            attempts=attempts,
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
                stream, cause, failed, correlation_id=correlation_id, causation_id=command_id
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
