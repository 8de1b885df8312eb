"""The command processor: carries out what workflows sent, published and replied.

It follows the ``Sent:``, ``Published:`` and ``Replied:`` events of the app's instance streams.

- ``Sent`` of a type with a handler: the handler runs with the command id as idempotency key;
  its result messages go to ``<handler name>-<command id>`` (expected ``NO_STREAM``, ids
  derived from the command id), so carrying a command out twice writes its results once.
  Failures are retried per the handler's :class:`~decider.processors.retry.RetryPolicy`, waiting on
  the
  clock (a stop interrupts the wait); then the command is parked, and ``decider.CommandFailed``
  goes back to the workflow if it lists it as an input.
- ``Sent`` of a routed type: the message is appended to the target stream (derived id).
- ``Published``: to ``topic-<type>-<command id>``; ``Replied``: to ``reply-<causing message id>``.

Routed, published and replied messages are copied byte for byte: nothing is decoded.
A ``decider.ParkedCommandRetried`` in the app's ledger re-runs the parked command.

A command's outcome (its results, or its park record) and the checkpoint past it are one
transaction on a :class:`~decider.stores.protocol.TransactionalStore`. Elsewhere (EventStoreDB) the
outcome is written first, so a crash before the checkpoint makes the next run see the command
again: until that run has caught up, a handler's command whose outcome of this round is stored
is recognised as concluded and not carried out again (a handler is not asked twice, so its
answer cannot flip from results to parked or back).
"""

from __future__ import annotations

import enum
import json
import random
from collections.abc import Sequence
from typing import Any

from returns.result import Failure, Result, Success

from decider import DecodeError, Metadata, event_id
from decider.processors.app import HandlerRegistration, failed_stream, parked_stream, results_stream
from decider.processors.base import Context, Processor
from decider.processors.messages import CommandFailed, CommandParked, ParkedCommandRetried
from decider.processors.retry import HandlerFailure
from decider.processors.workflow_processor import COMMAND_FAILED
from decider.stores.errors import WrongExpectedVersion
from decider.stores.protocol import (
    ANY,
    NO_STREAM,
    CaughtUp,
    Filter,
    NewEvent,
    RecordedEvent,
    StreamAppend,
)

RETRIED = "decider.ParkedCommandRetried"
"""The stored type name of :class:`~decider.processors.messages.ParkedCommandRetried`."""

PARKED = "decider.CommandParked"
"""The stored type name of :class:`~decider.processors.messages.CommandParked`."""


class _Outcome(enum.Enum):
    DONE = "done"
    STOPPED = "stopped"


class CommandProcessor(Processor):
    """Carries out the commands of every workflow of an app."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        app = context.app
        self.name = f"{app.name}.commands"
        self.ledger = parked_stream(app.name)
        prefixes = tuple(r.stream_prefix for r in app.workflows.values())
        self.filter = Filter(
            stream_prefixes=(*prefixes, self.ledger),
            event_types=(RETRIED,),
            event_type_prefixes=("Sent:", "Published:", "Replied:"),
        )
        self.carried_out = 0
        self.parked = 0
        self._pending: list[StreamAppend] = []
        self._position: int | None = None
        self._random = random.Random()
        self._replay_end: int | None = None
        self._replay_open = True
        self._parked_ids: set[str] | None = None

    def consume(self) -> None:
        """One subscription's life; what it delivers before catching up may be a replay."""
        self._replay_open, self._replay_end, self._parked_ids = True, None, None
        super().consume()

    def on_caught_up(self, item: CaughtUp) -> None:
        """Note where the history (and so any replay of work done before a crash) ends."""
        super().on_caught_up(item)
        self._replay_open, self._replay_end = False, item.position

    # -- batches --------------------------------------------------------------------------

    def process(self, batch: Sequence[RecordedEvent]) -> None:
        """Carry out the batch's commands; commit their results and the checkpoint together."""
        self._pending, self._position = [], None
        for event in batch:
            if self.context.stop.is_set() and self._position is not None:
                break  # finish what is in hand, leave the rest to the next run
            if self._carry_out(event) is _Outcome.STOPPED:
                break
            self._position = event.position
        self._flush()

    def _flush(self) -> None:
        """Commit what the batch wrote so far, with the position of the last command done."""
        pending, position = self._pending, self._position
        self._pending = []
        if not pending and (position is None or position == self.committed):
            return
        try:
            self.commit(pending, position)
        except WrongExpectedVersion:
            # A result stream that exists with other ids: the command was carried out before
            # and its handler answered differently this time. Keep what is stored.
            if self._transactional:
                # Still one transaction with the checkpoint, so no replay can undo the choice.
                self.commit([item for item in pending if not self._stored(item)], position)
                return
            for item in pending:
                try:
                    self.context.store.append(item.stream, item.events, item.expected_revision)
                except WrongExpectedVersion as exc:
                    self.log.warning("%s keeps what is stored: %s", self.name, exc)
            self.commit([], position)

    def _stored(self, item: StreamAppend) -> bool:
        """Whether ``item`` creates a stream that exists already (and so cannot be written)."""
        if item.expected_revision is not NO_STREAM:
            return False  # derived ids under ANY: a second write of them is idempotent
        if not self.context.store.read_stream(item.stream, 0, 1):
            return False
        self.log.warning("%s keeps what is stored in %s", self.name, item.stream)
        return True

    # -- replay after a crash ---------------------------------------------------------------

    def _concluded(
        self, handler: HandlerRegistration, event: RecordedEvent, round_key: str
    ) -> bool:
        """Whether this round of the command already has a stored outcome (a replay).

        Only a non-transactional store can hold an outcome past the checkpoint, and only
        in what a subscription delivers before it caught up: a later command is new.
        """
        if self._transactional:
            return False
        if not self._replay_open and (
            self._replay_end is None or event.position > self._replay_end
        ):
            return False
        command_id = str(event.id)
        store = self.context.store
        if store.read_stream(results_stream(handler.name, command_id), 0, 1):
            return True
        if self._parked_ids is None:
            self._parked_ids = self._parked_since(self.committed)
        return str(event_id(self.ledger, f"{command_id}/{round_key}", 0)) in self._parked_ids

    def _parked_since(self, position: int | None) -> set[str]:
        """The ids of the park records after ``position``: those a replay may have written.

        A park record comes after the command (or retry request) it concludes in the log,
        and so after any checkpoint that has not passed that command.
        """
        found: set[str] = set()
        flt = Filter(stream_prefixes=(self.ledger,), event_types=(PARKED,))
        while page := self.context.store.read_all(position, 1000, flt):
            found.update(str(e.id) for e in page if e.stream == self.ledger)
            position = page[-1].position
        return found

    # -- one command ----------------------------------------------------------------------

    def _carry_out(self, event: RecordedEvent) -> _Outcome:
        if event.type == RETRIED:
            return self._retry_parked(event)
        registration = self.context.app.workflow_of_stream(event.stream)
        if registration is None:
            return _Outcome.DONE
        try:
            metadata = self._metadata(event)
        except DecodeError as exc:
            self._pending.append(self.skip(event, str(exc)))
            return _Outcome.DONE
        return self._command(event, metadata, round_key="")

    def _command(self, event: RecordedEvent, metadata: Metadata, round_key: str) -> _Outcome:
        app = self.context.app
        kind, _, type_name = event.type.partition(":")
        command_id = str(event.id)
        correlation = metadata.correlation_id
        if kind == "Published":
            self._copy(f"topic-{type_name}-{command_id}", event, metadata, NO_STREAM)
        elif kind == "Replied":
            self._copy(f"reply-{metadata.causation_id or command_id}", event, metadata, ANY)
        elif type_name in app.routes:
            self._copy(app.routes[type_name], event, metadata, ANY)
        elif type_name in app.handlers:
            return self._handle(app.handlers[type_name], event, metadata, round_key)
        else:
            self._park(
                event,
                correlation,
                f"no handler or route is registered for {type_name!r}",
                0,
                round_key,
            )
        self.carried_out += 1
        return _Outcome.DONE

    def _copy(self, stream: str, event: RecordedEvent, metadata: Metadata, expected: Any) -> None:
        """Append the command's message, as stored, to ``stream`` with a derived id."""
        command_id = str(event.id)
        new_id = event_id(stream, command_id, 0)
        out = Metadata(
            message_id=str(new_id),
            correlation_id=metadata.correlation_id,
            causation_id=command_id,
        )
        type_name = event.type.partition(":")[2]
        codec = self.context.app.codec
        new = NewEvent(new_id, type_name, event.data, codec.encode_metadata(out))
        self._pending.append(StreamAppend(stream, [new], expected))

    def _handle(
        self,
        handler: HandlerRegistration,
        event: RecordedEvent,
        metadata: Metadata,
        round_key: str,
    ) -> _Outcome:
        codec = self.context.app.codec
        command_id = str(event.id)
        try:
            command = codec.decode_message(handler.type_name, event.data)
        except DecodeError as exc:
            self._pending.append(self.skip(event, str(exc)))
            return _Outcome.DONE
        if self._concluded(handler, event, round_key):
            self.log.info(
                "%s: %s %s was concluded before a restart; not carried out again",
                self.name,
                handler.type_name,
                command_id,
            )
            return _Outcome.DONE
        policy = handler.retry
        attempt = 0
        while True:
            attempt += 1
            outcome = _invoke(handler, command, command_id)
            if not isinstance(outcome, HandlerFailure):
                try:
                    self._results(handler, command_id, metadata, outcome)
                except Exception as exc:
                    outcome = HandlerFailure(
                        reason=f"the handler's results cannot be stored: {exc!r}", retryable=False
                    )
                else:
                    self.carried_out += 1
                    return _Outcome.DONE
            if not outcome.retryable or attempt >= policy.max_attempts:
                self._park(event, metadata.correlation_id, outcome.reason, attempt, round_key)
                return _Outcome.DONE
            delay = policy.delay(attempt, self._random)
            self.log.warning(
                "%s: %s %s failed (attempt %d of %d), retrying in %.3fs: %s",
                self.name,
                handler.type_name,
                command_id,
                attempt,
                policy.max_attempts,
                delay,
                outcome.reason,
            )
            self._flush()  # what was done before this command should not wait for it
            if self.context.clock.wait(self.context.stop, delay):
                return _Outcome.STOPPED

    def _results(
        self,
        handler: HandlerRegistration,
        command_id: str,
        metadata: Metadata,
        results: Sequence[Any],
    ) -> None:
        if not results:
            return
        stream = results_stream(handler.name, command_id)
        events = [
            self.derived(
                stream, command_id, result, index=index, correlation_id=metadata.correlation_id
            )
            for index, result in enumerate(results)
        ]
        self._pending.append(StreamAppend(stream, events, NO_STREAM))

    def _park(
        self,
        event: RecordedEvent,
        correlation_id: str | None,
        reason: str,
        attempts: int,
        round_key: str,
    ) -> None:
        app = self.context.app
        command_id = str(event.id)
        type_name = event.type.partition(":")[2]
        self.log.error(
            "%s parks %s %s after %d attempt(s): %s",
            self.name,
            type_name,
            command_id,
            attempts,
            reason,
        )
        cause = f"{command_id}/{round_key}"
        parked = CommandParked(
            command_id=command_id,
            command_type=type_name,
            stream=event.stream,
            revision=event.revision,
            reason=reason,
            attempts=attempts,
        )
        record = self.derived(
            self.ledger, cause, parked, correlation_id=correlation_id, causation_id=command_id
        )
        self._pending.append(StreamAppend(self.ledger, [record], ANY))
        registration = app.workflow_of_stream(event.stream)
        if registration is not None and COMMAND_FAILED in registration.inputs:
            # Fed back to the instance as an input, so decide can compensate.
            stream = failed_stream(registration.workflow.name, command_id)
            failed = CommandFailed(
                command_id=command_id, command_type=type_name, reason=reason, attempts=attempts
            )
            feedback = self.derived(
                stream, cause, failed, correlation_id=correlation_id, causation_id=command_id
            )
            self._pending.append(StreamAppend(stream, [feedback], ANY))
        self.parked += 1

    def _retry_parked(self, event: RecordedEvent) -> _Outcome:
        if event.stream != self.ledger:
            return _Outcome.DONE
        codec = self.context.app.codec
        try:
            retried = codec.decode_message(event.type, event.data)
            metadata = self._metadata(event)
        except DecodeError as exc:
            self._pending.append(self.skip(event, str(exc)))
            return _Outcome.DONE
        assert isinstance(retried, ParkedCommandRetried)
        found = self.context.store.read_stream(retried.stream, retried.revision, 1)
        if not found or str(found[0].id) != retried.command_id:
            self._pending.append(
                self.skip(
                    event,
                    f"command {retried.command_id} is not at {retried.stream}@{retried.revision}",
                )
            )
            return _Outcome.DONE
        source = found[0]
        self.log.info("%s retries parked command %s", self.name, retried.command_id)
        try:
            source_metadata = self._metadata(source)
        except DecodeError as exc:
            self._pending.append(self.skip(source, str(exc)))
            return _Outcome.DONE
        return self._command(source, source_metadata, round_key=metadata.message_id)

    def _metadata(self, event: RecordedEvent) -> Metadata:
        if not event.metadata:
            return Metadata(message_id=str(event.id))
        try:
            doc = json.loads(event.metadata)
        except ValueError as exc:
            raise DecodeError("metadata", str(exc)) from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("message_id"), str):
            raise DecodeError("metadata", "'message_id' is missing or not a string")
        correlation, causation = doc.get("correlation_id"), doc.get("causation_id")
        return Metadata(
            message_id=doc["message_id"],
            correlation_id=correlation if isinstance(correlation, str) else None,
            causation_id=causation if isinstance(causation, str) else None,
        )


def _invoke(
    handler: HandlerRegistration, command: Any, command_id: str
) -> Sequence[Any] | HandlerFailure:
    """Run a handler; its results, or why it failed (an exception is a retryable failure)."""
    try:
        result = handler.func(command, command_id)
    except Exception as exc:
        return HandlerFailure(reason=repr(exc), retryable=True)
    if isinstance(result, Result):
        match result:
            case Success(value):
                return _as_results(value)
            case Failure(failure):
                if isinstance(failure, HandlerFailure):
                    return failure
                return HandlerFailure(reason=repr(failure), retryable=True)
    return _as_results(result)


def _as_results(value: Any) -> Sequence[Any] | HandlerFailure:
    if isinstance(value, list | tuple):
        return value
    return HandlerFailure(
        reason=f"the handler returned {type(value).__name__}, not a list of messages",
        retryable=False,
    )
