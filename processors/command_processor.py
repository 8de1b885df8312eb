"""The command processor: carries out what workflows sent, published and replied.

It follows the ``Sent:``, ``Published:`` and ``Replied:`` events of the app's instance streams.

- ``Sent`` of a type with a handler: the command goes to the app's pool of workers
  (:mod:`decider.processors.pool`): commands of one instance are carried out in the order they
  were sent, commands of different instances side by side. The handler runs with the command id
  as idempotency key; its result messages go to ``<handler name>-<command id>`` (expected
  ``NO_STREAM``, ids derived from the command id), so carrying a command out twice writes its
  results once. Failures are retried per the handler's
  :class:`~decider.processors.retry.RetryPolicy` (a call past its timeout is a failure); then
  the command is parked (:mod:`decider.processors.parking`).
- ``Sent`` of a routed type: the message is appended to the target stream (derived id).
- ``Published``: to ``topic-<type>-<command id>``; ``Replied``: to ``reply-<causing message id>``.

Routed, published and replied messages are copied byte for byte: nothing is decoded.
A ``decider.ParkedCommandRetried`` in the app's ledger re-runs the parked command.

Outcomes are committed as commands conclude, a few at a time (every :data:`GROUP_COUNT`
conclusions or :data:`GROUP_SECONDS`), and the checkpoint is the low-water mark
(:mod:`decider.processors.watermark`): it never passes a command still in hand. On a
:class:`~decider.stores.protocol.TransactionalStore` the outcomes and the checkpoint are one
transaction; outcomes committed past the mark are remembered (a second checkpoint, the
*concluded mark*), and the replay guard (:mod:`decider.processors.replay`) keeps those commands
from being carried out again after a crash. This module is the policy only: which of those a
stored event leads to.
"""

from __future__ import annotations

import collections
import functools
import time
from collections.abc import Sequence
from typing import Any

import attrs

from decider import Metadata
from decider.codec import describe, parse_type
from decider.processors import decoding, streams
from decider.processors.app import HandlerRegistration
from decider.processors.base import Context, Outcome, Processor, Skip, Unit
from decider.processors.handlers import GaveUp
from decider.processors.messages import RETRIED
from decider.processors.parking import Parking
from decider.processors.pool import CommandPool, Conclusion, HandlerLoad, Job
from decider.processors.replay import ReplayGuard, concluded_mark_name
from decider.processors.watermark import Entry, Watermark
from decider.stores.errors import CorruptEvent
from decider.stores.protocol import (
    ANY,
    NO_STREAM,
    CaughtUp,
    RecordedEvent,
    StreamAppend,
)

GROUP_COUNT = 100
"""Commit concluded commands once this many are waiting..."""

GROUP_SECONDS = 0.005
"""... or once the oldest has waited this long."""

STOP_GRACE = 10.0
"""How long a stop waits for the handler calls in hand (their commands run again later if they
do not return in time: the checkpoint never passed them)."""

_SUBMITTED = object()


class CommandProcessor(Processor):
    """Carries out the commands of every workflow of an app (the dispatch policy)."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        app = context.app
        self.name = streams.command_processor_name(app.name)
        self.parking = Parking(app, self.derived, context.logger, self.name)
        self.ledger = self.parking.ledger
        self.filter = decoding.command_filter(app.workflows, self.ledger, RETRIED)
        self.replay = ReplayGuard(context.store, self.ledger, transactional=self._transactional)
        self.pool = CommandPool(self.name, app.pool_size, context.clock, context.logger)
        self.marks = Watermark()
        self.max_open = max(256, 8 * app.pool_size)
        """How many commands may be in hand before the processor stops reading ahead."""
        self.stop_grace = STOP_GRACE
        self.carried_out = 0
        self.parked_by_handler: collections.Counter[str] = collections.Counter()
        self._concluded_mark: int | None = None
        self._uncommitted: dict[int, list[StreamAppend]] = {}
        """Outcomes whose commit failed (the store was down), by position: the next
        subscription life commits them instead of carrying the commands out again."""

    @property
    def parked(self) -> int:
        """How many commands were parked."""
        return self.parking.parked

    @property
    def in_flight(self) -> int:
        """How many handler calls are running now."""
        return self.pool.calls_in_flight()

    @property
    def backing_off(self) -> int:
        """How many commands wait to be retried now."""
        return sum(load.backing_off for load in self.pool.load())

    def load(self) -> list[HandlerLoad]:
        """Each handler's commands in hand now (in flight, backing off, queued) and how many
        this processor parked; every registered handler is listed."""
        found = {load.handler: load for load in self.pool.load()}
        return [
            attrs.evolve(
                found.get(h.name, HandlerLoad(h.name, 0, 0, 0)),
                parked=self.parked_by_handler[h.name],
            )
            for h in sorted(self.context.app.handlers.values(), key=lambda h: h.name)
        ]

    # -- the thread -------------------------------------------------------------------------

    def run(self) -> None:
        """The engine's thread, with the pool's threads (and event loop) around it."""
        needs_loop = any(h.is_async for h in self.context.app.handlers.values())
        self.pool.start(needs_loop)
        try:
            super().run()
        finally:
            self.pool.close()

    def consume(self) -> None:
        """One subscription's life; what it delivers before catching up may be a replay.

        When it ends, the calls in hand get up to :attr:`stop_grace` seconds to conclude (on a
        stop), what concluded is committed, and the rest is left to the next life.
        """
        self.marks.reset()
        self.pool.reset()
        if self._transactional:
            self._concluded_mark = self.context.checkpoints.load_checkpoint(
                concluded_mark_name(self.name)
            )
        self.replay.restart(self._concluded_mark)
        try:
            super().consume()
        finally:
            self._wind_down()

    def _wind_down(self) -> None:
        if self.context.stop.is_set():
            self.pool.pause()
            deadline = time.monotonic() + self.stop_grace
            if not self.pool.wait_calls(deadline, self._flush_if_due):
                self.log.warning(
                    "%s: %d handler call(s) still running after %.1fs; their commands will be "
                    "carried out again on the next start",
                    self.name,
                    self.pool.calls_in_flight(),
                    self.stop_grace,
                )
        try:
            self.flush()
        except Exception as exc:  # the next life redoes it from the checkpoint
            self.log.warning("%s: could not commit on the way out: %s", self.name, describe(exc))
        finally:
            self.pool.reset()
            self.marks.reset()

    def on_caught_up(self, item: CaughtUp) -> None:
        """Note where the history (and so any replay of work done before a crash) ends."""
        super().on_caught_up(item)
        self.replay.caught_up(item.position)

    def poll_timeout(self) -> float | None:
        """While commands are in hand, wake every few ms to commit those that concluded."""
        return None if self.marks.idle() else GROUP_SECONDS

    def tick(self) -> None:
        """Commit what concluded, if enough did or it waited long enough."""
        self._flush_if_due()

    # -- the policy -------------------------------------------------------------------------

    def handle(self, batch: Sequence[RecordedEvent]) -> Outcome:
        """Dispatch the batch's commands (up to a stop); what concluded so far, to commit."""
        self.dispatch(batch)
        taken = self.marks.take()
        return Outcome(taken.appends, taken.mark)

    def process(self, batch: Sequence[RecordedEvent]) -> None:
        """Dispatch ``batch``; commit what concluded if all of it did (quick handlers: one
        transaction for the batch), or if it is due."""
        self.dispatch(batch)
        if self.marks.open == 0:
            self.flush()
        else:
            self._flush_if_due()

    def dispatch(self, batch: Sequence[RecordedEvent]) -> None:
        """Give each input an entry and start it: copies and parks conclude at once, handled
        commands go to the pool. Waits (committing what concluded) while too many are in
        hand."""
        for event in batch:
            while self.marks.open >= self.max_open and not self.context.stop.is_set():
                self.marks.wait(GROUP_SECONDS)
                self._flush_if_due()
            if self.context.stop.is_set():
                return  # the rest is left to the next run
            entry = self.marks.add(event.position)
            kept = self._uncommitted.pop(event.position, None)
            if kept is not None:
                self.marks.conclude(entry, kept)
                continue
            draft = Outcome()
            started = self.step(
                event, draft, functools.partial(self._carry_out, entry=entry, draft=draft)
            )
            if started is not _SUBMITTED:
                self.marks.conclude(entry, draft.appends)

    def redo_units(self, batch: Sequence[RecordedEvent], outcome: Outcome) -> list[Unit]:
        """A result stream that exists with other ids: the command was carried out before and
        its handler answered differently this time. Keep what is stored, write the rest."""
        return [(None, lambda: self.keep_stored(outcome))]

    def settle(self, outcome: Outcome) -> None:
        """Commit ``outcome`` (keeping what is stored on a conflict)."""
        self.commit_outcome(outcome, [])

    def flush(self) -> None:
        """Commit what concluded since the last flush, with the checkpoint at the mark."""
        taken = self.marks.take()
        moved = taken.mark is not None and taken.mark != self.committed
        if not taken.appends and not moved:
            return
        try:
            self.settle(Outcome(taken.appends, taken.mark if moved else None))
        except BaseException:
            self._uncommitted.update(taken.outcomes)
            raise
        if (
            taken.beyond is not None
            and self._transactional
            and (self._concluded_mark is None or taken.beyond > self._concluded_mark)
        ):
            # After the commit, so it never claims more than is stored (a crash in between
            # costs at most a second call of a handler, whose results are then kept as stored).
            self.context.checkpoints.save_checkpoint(concluded_mark_name(self.name), taken.beyond)
            self._concluded_mark = taken.beyond
        self.context.progress()

    def _flush_if_due(self) -> None:
        if self.marks.due(GROUP_COUNT, GROUP_SECONDS):
            self.flush()

    # -- one command ----------------------------------------------------------------------

    def _carry_out(self, event: RecordedEvent, entry: Entry, draft: Outcome) -> object:
        if event.type == RETRIED:
            if event.stream != self.ledger:
                return None
            source, metadata, round_key = self.parking.retried(event, self.context.store)
            return self._command(source, metadata, round_key, entry, draft)
        if self.context.app.workflow_of_stream(event.stream) is None:
            return None
        try:
            metadata = decoding.input_metadata(self.context.app.codec, event)
        except CorruptEvent as exc:
            raise Skip(exc.reason) from exc
        return self._command(event, metadata, "", entry, draft)

    def _command(
        self,
        event: RecordedEvent,
        metadata: Metadata,
        round_key: str,
        entry: Entry,
        draft: Outcome,
    ) -> object:
        app = self.context.app
        kind, type_name = parse_type(event.type)
        command_id = str(event.id)
        if kind == "Published":
            stream = streams.topic_stream(type_name, command_id)
            draft.appends.append(self._copy(stream, event, metadata, NO_STREAM))
        elif kind == "Replied":
            stream = streams.reply_stream(metadata.causation_id or command_id)
            draft.appends.append(self._copy(stream, event, metadata, ANY))
        elif kind != "Sent":
            raise Skip(f"{event.type!r} is not a command")
        elif type_name in app.routes:
            draft.appends.append(self._copy(app.routes[type_name], event, metadata, ANY))
        elif type_name in app.handlers:
            return self._submit(app.handlers[type_name], event, metadata, round_key, entry)
        else:
            reason = f"no handler or route is registered for {type_name!r}"
            draft.appends.extend(self._park(event, type_name, metadata, reason, 0, round_key))
        self.carried_out += 1
        return None

    def _copy(
        self, stream: str, event: RecordedEvent, metadata: Metadata, expected: Any
    ) -> StreamAppend:
        """The append of the command's message, as stored, to ``stream`` with a derived id."""
        message_type = parse_type(event.type)[1]
        new = self.copied(stream, str(event.id), message_type, event.data, metadata.correlation_id)
        return StreamAppend(stream, [new], expected)

    def _submit(
        self,
        handler: HandlerRegistration,
        event: RecordedEvent,
        metadata: Metadata,
        round_key: str,
        entry: Entry,
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

        def conclude(conclusion: Conclusion) -> None:
            self.marks.conclude(
                entry, self._concluded(handler, event, metadata, round_key, conclusion)
            )

        self.pool.submit(Job(event.stream, handler, command, command_id, conclude))
        return _SUBMITTED

    def _concluded(
        self,
        handler: HandlerRegistration,
        event: RecordedEvent,
        metadata: Metadata,
        round_key: str,
        conclusion: Conclusion,
    ) -> list[StreamAppend]:
        """What a command's conclusion leads to: its results' appends, or its park records."""
        if isinstance(conclusion, GaveUp):
            reason, attempts = conclusion.reason, conclusion.attempts
        else:
            try:
                appends = self._results(handler, str(event.id), metadata, conclusion)
            except Exception as exc:
                reason = f"the handler's results cannot be stored: {describe(exc)}"
                attempts = 1
            else:
                self.carried_out += 1
                return appends
        self.parked_by_handler[handler.name] += 1
        return self._park(event, handler.type_name, metadata, reason, attempts, round_key)

    def _results(
        self, handler: HandlerRegistration, command_id: str, metadata: Metadata, results: Any
    ) -> list[StreamAppend]:
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

    def _park(  # noqa: PLR0917
        self,
        event: RecordedEvent,
        command_type: str,
        metadata: Metadata,
        reason: str,
        attempts: int,
        round_key: str,
    ) -> list[StreamAppend]:
        return self.parking.park(
            event, command_type, metadata.correlation_id, reason, attempts, round_key
        )
