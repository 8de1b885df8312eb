"""The command processor: carries out what workflows sent, published and replied.

It follows the ``Sent:``, ``Published:`` and ``Replied:`` events of the app's instance streams.

- ``Sent`` of a type with a handler: the handler runs with the command id as idempotency key
  (:mod:`decider.processors.handlers`); its result messages go to
  ``<handler name>-<command id>`` (expected ``NO_STREAM``, ids derived from the command id), so
  carrying a command out twice writes its results once. Failures are retried per the handler's
  :class:`~decider.processors.retry.RetryPolicy`; then the command is parked
  (:mod:`decider.processors.parking`).
- ``Sent`` of a routed type: the message is appended to the target stream (derived id).
- ``Published``: to ``topic-<type>-<command id>``; ``Replied``: to ``reply-<causing message id>``.

Routed, published and replied messages are copied byte for byte: nothing is decoded.
A ``decider.ParkedCommandRetried`` in the app's ledger re-runs the parked command.

A command's outcome (its results, or its park record) and the checkpoint past it are one
transaction on a :class:`~decider.stores.protocol.TransactionalStore`; elsewhere the replay
guard (:mod:`decider.processors.replay`) keeps a command from being carried out twice. This
module is the policy only: which of those a stored event leads to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from decider import Metadata
from decider.codec import parse_type
from decider.processors import decoding, streams
from decider.processors.app import HandlerRegistration
from decider.processors.base import Context, Outcome, Processor, Skip, Unit
from decider.processors.handlers import Carried, GaveUp, HandlerRunner
from decider.processors.messages import RETRIED
from decider.processors.parking import Parking
from decider.processors.replay import ReplayGuard
from decider.stores.errors import CorruptEvent, StoreUnavailable
from decider.stores.protocol import (
    ANY,
    NO_STREAM,
    CaughtUp,
    RecordedEvent,
    StreamAppend,
)

_STOPPED = object()


class CommandProcessor(Processor):
    """Carries out the commands of every workflow of an app (the dispatch policy)."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        app = context.app
        self.name = streams.command_processor_name(app.name)
        self.parking = Parking(app, self.derived, context.logger, self.name)
        self.ledger = self.parking.ledger
        self.filter = decoding.command_filter(app.workflows, self.ledger, RETRIED)
        self.runner = HandlerRunner(context, self.name)
        self.replay = ReplayGuard(context.store, self.ledger, transactional=self._transactional)
        self.carried_out = 0
        self._draft = Outcome()

    @property
    def parked(self) -> int:
        """How many commands were parked."""
        return self.parking.parked

    def consume(self) -> None:
        """One subscription's life; what it delivers before catching up may be a replay."""
        self.replay.restart()
        super().consume()

    def on_caught_up(self, item: CaughtUp) -> None:
        """Note where the history (and so any replay of work done before a crash) ends."""
        super().on_caught_up(item)
        self.replay.caught_up(item.position)

    # -- the policy -------------------------------------------------------------------------

    def handle(self, batch: Sequence[RecordedEvent]) -> Outcome:
        """Carry out the batch's commands, up to a stop; what is left to commit."""
        self._draft = Outcome()
        for event in batch:
            if self.context.stop.is_set() and self._draft.position is not None:
                break  # finish what is in hand, leave the rest to the next run
            try:
                ran = self.step(event, self._draft, self._carry_out)
            except StoreUnavailable:
                self._flush()  # keep what handlers did before the store failed: not run again
                raise
            if ran is _STOPPED:
                break
            self._draft.position = event.position
        draft, self._draft = self._draft, Outcome(position=self._draft.position)
        return draft

    def process(self, batch: Sequence[RecordedEvent]) -> None:
        """Handle ``batch`` and commit its outcome unless it changed nothing."""
        outcome = self.handle(batch)
        if outcome.appends or outcome.position not in (None, self.committed):
            self.settle(outcome)

    def redo_units(self, batch: Sequence[RecordedEvent], outcome: Outcome) -> list[Unit]:
        """A result stream that exists with other ids: the command was carried out before and
        its handler answered differently this time. Keep what is stored, write the rest."""
        return [(None, lambda: self.keep_stored(outcome))]

    def settle(self, outcome: Outcome) -> None:
        """Commit ``outcome`` (keeping what is stored on a conflict)."""
        self.commit_outcome(outcome, [])

    def _flush(self) -> None:
        """Commit what the batch did so far, so it does not wait for a command's retries."""
        draft, self._draft = self._draft, Outcome(position=self._draft.position)
        if draft.appends or draft.position not in (None, self.committed):
            self.settle(draft)

    # -- one command ----------------------------------------------------------------------

    def _carry_out(self, event: RecordedEvent) -> object:
        if event.type == RETRIED:
            if event.stream != self.ledger:
                return None
            source, metadata, round_key = self.parking.retried(event, self.context.store)
            return self._command(source, metadata, round_key)
        if self.context.app.workflow_of_stream(event.stream) is None:
            return None
        try:
            metadata = decoding.input_metadata(self.context.app.codec, event)
        except CorruptEvent as exc:
            raise Skip(exc.reason) from exc
        return self._command(event, metadata, round_key="")

    def _command(self, event: RecordedEvent, metadata: Metadata, round_key: str) -> object:
        app = self.context.app
        kind, type_name = parse_type(event.type)
        command_id = str(event.id)
        if kind == "Published":
            self._copy(streams.topic_stream(type_name, command_id), event, metadata, NO_STREAM)
        elif kind == "Replied":
            stream = streams.reply_stream(metadata.causation_id or command_id)
            self._copy(stream, event, metadata, ANY)
        elif kind != "Sent":
            raise Skip(f"{event.type!r} is not a command")
        elif type_name in app.routes:
            self._copy(app.routes[type_name], event, metadata, ANY)
        elif type_name in app.handlers:
            return self._handle(app.handlers[type_name], event, metadata, round_key)
        else:
            reason = f"no handler or route is registered for {type_name!r}"
            self._park(event, type_name, metadata, reason, 0, round_key)
        self.carried_out += 1
        return None

    def _copy(self, stream: str, event: RecordedEvent, metadata: Metadata, expected: Any) -> None:
        """Append the command's message, as stored, to ``stream`` with a derived id."""
        message_type = parse_type(event.type)[1]
        new = self.copied(stream, str(event.id), message_type, event.data, metadata.correlation_id)
        self._draft.appends.append(StreamAppend(stream, [new], expected))

    def _handle(
        self,
        handler: HandlerRegistration,
        event: RecordedEvent,
        metadata: Metadata,
        round_key: str,
    ) -> object:
        command_id = str(event.id)
        try:
            command = decoding.decode_message(self.context.app.codec, event, handler.type_name)
        except CorruptEvent as exc:
            raise Skip(exc.reason) from exc
        if self.replay.concluded(handler.name, event, round_key, self.committed):
            self.log.info(
                "%s: %s %s was concluded before a restart; not carried out again",
                self.name,
                handler.type_name,
                command_id,
                extra={
                    "command_id": command_id,
                    "event_type": handler.type_name,
                    "stream": event.stream,
                    "position": event.position,
                },
            )
            return None

        def to_appends(results: Sequence[Any]) -> list[StreamAppend]:
            if not results:
                return []
            stream = streams.results_stream(handler.name, command_id)
            events = [
                self.derived(
                    stream, command_id, result, index=i, correlation_id=metadata.correlation_id
                )
                for i, result in enumerate(results)
            ]
            return [StreamAppend(stream, events, NO_STREAM)]

        ran = self.runner.run(handler, command, command_id, to_appends, self._flush)
        match ran:
            case Carried(appends):
                self._draft.appends.extend(appends)
                self.carried_out += 1
            case GaveUp(reason, attempts):
                self._park(event, handler.type_name, metadata, reason, attempts, round_key)
            case _:
                return _STOPPED
        return None

    def _park(  # noqa: PLR0917
        self,
        event: RecordedEvent,
        command_type: str,
        metadata: Metadata,
        reason: str,
        attempts: int,
        round_key: str,
    ) -> None:
        self._draft.appends.extend(
            self.parking.park(
                event, command_type, metadata.correlation_id, reason, attempts, round_key
            )
        )
