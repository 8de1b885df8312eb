"""The committing half of the processor engine: writing an outcome, the conflict loop, skip
records and the events a processor derives.

:class:`Committing` is a base class of :class:`~decider.processors.engine.base.Processor` (which
declares the attributes it uses), kept apart so that each module has one concern: the engine
(:mod:`decider.processors.engine.base`) drains batches and hands them to the policy; this module
commits what the policy returns:

- in one transaction when the store is a :class:`~decider.stores.protocol.TransactionalStore`
  (group commit), else stream by stream and then the checkpoint (at least once, made
  exactly-once in effect by derived event ids);
- the one bounded reload-and-retry loop on revision conflicts, with jitter: the batch is redone
  unit by unit (by default input by input), each reloading what conflicted;
- the skip records: an input that cannot be handled goes to ``decider-skipped-<processor>``
  with the reason, and the processor moves on.

Its methods stay methods (a policy overrides :meth:`~Committing.redo_units`,
:meth:`~Committing.resync`, and may extend ``_write``). They log to the engine's logger
(``decider.processors.engine.base``).
"""

from __future__ import annotations

import abc
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from decider import Envelope, Metadata, event_id
from decider.codec import describe
from decider.processors.app import streams
from decider.processors.app.errors import ConflictsExhausted
from decider.processors.app.messages import InputSkipped
from decider.processors.engine import logs, telemetry
from decider.processors.engine._values import Context, Outcome, Unit
from decider.processors.engine.failures import PERMANENT, ErrorLog
from decider.processors.engine.sharing import LeaseNotHeld
from decider.stores.errors import StoreUnavailable, WrongExpectedVersion
from decider.stores.protocol import (
    ANY,
    NO_STREAM,
    NewEvent,
    PipelinedStore,
    RecordedEvent,
    StreamAppend,
    TransactionalStore,
)

if TYPE_CHECKING:
    from decider.processors.engine.sharing import Share

MAX_CONFLICT_RETRIES = 5
"""How many times one unit of work is redone after revision conflicts before giving up."""


class Committing(abc.ABC):
    """Commits what a processor's policy returns; the base of
    :class:`~decider.processors.engine.base.Processor`, which sets the attributes declared here."""

    name: str
    context: Context
    committed: int | None
    errors: ErrorLog
    conflicts: int
    skipped: int
    share: Share
    _transactional: bool
    _pipelined: bool
    _random: random.Random

    @property
    @abc.abstractmethod
    def engine_log(self) -> logs.ContextAdapter:
        """The engine's logger (``decider.processors.engine.base``), with ``processor=<name>``."""

    @abc.abstractmethod
    def handle(self, batch: Sequence[RecordedEvent]) -> Outcome:
        """Decide what ``batch`` leads to, writing nothing: the policy of a processor."""

    def redo_units(self, batch: Sequence[RecordedEvent], outcome: Outcome) -> list[Unit]:
        """After ``outcome`` of ``batch`` failed to commit: the units to redo, one by one.

        By default each input on its own, decided again (after :meth:`resync`).
        """
        return [(event, lambda event=event: self.handle([event])) for event in batch]  # type: ignore[misc]

    def keep_stored(self, outcome: Outcome) -> Outcome:
        """``outcome`` without the appends that would create a stream that exists already:
        for a policy whose writes must not be redone (a handler is not asked twice)."""
        return Outcome(
            [item for item in outcome.appends if not self._stored(item)],
            outcome.position,
            outcome.on_commit,
        )

    def _stored(self, item: StreamAppend) -> bool:
        if item.expected_revision is not NO_STREAM:
            return False  # derived ids under ANY: a second write of them is idempotent
        if not self.context.store.read_stream(item.stream, 0, 1):
            return False
        self.engine_log.warning(
            "%s keeps what is stored in %s", self.name, item.stream, extra={"stream": item.stream}
        )
        return True

    def resync(self, stream: str) -> None:  # noqa: B027 (a hook: most policies keep no state)
        """After a revision conflict on ``stream``: bring what is known of it up to date."""

    def commit_outcome(self, outcome: Outcome, batch: Sequence[RecordedEvent]) -> None:
        """Commit ``outcome`` of ``batch``; after a conflict or a permanent rejection, redo the
        batch unit by unit (:meth:`redo_units`), each in the conflict loop."""
        try:
            self.commit(outcome)
            return
        except WrongExpectedVersion as exc:
            self.conflicts += 1
            self.engine_log.info(
                "%s: %s; redoing the batch unit by unit",
                self.name,
                exc,
                extra={"stream": exc.stream, "conflict": True},
            )
            self.resync(exc.stream)
        except PERMANENT as exc:
            self.engine_log.warning(
                "%s: the store rejected the batch (%s); redoing it unit by unit",
                self.name,
                describe(exc),
            )
        for source, unit in self.redo_units(batch, outcome):
            self.commit_retrying(source, unit)

    def commit_retrying(self, source: RecordedEvent | None, unit: Callable[[], Outcome]) -> None:
        """Commit what ``unit()`` returns; on a revision conflict resync, wait a random moment
        (jitter) and redo it, at most :data:`MAX_CONFLICT_RETRIES` times.

        A permanent store rejection of what ``source`` led to skips ``source``. Raises
        :class:`~decider.processors.app.errors.ConflictsExhausted` naming the stream that kept
        conflicting.
        """
        conflict: WrongExpectedVersion | None = None
        for attempt in range(1, MAX_CONFLICT_RETRIES + 1):
            outcome = unit()
            try:
                self.commit(outcome)
                return
            except WrongExpectedVersion as exc:
                conflict = exc
                self.conflicts += 1
                self.engine_log.info(
                    "%s: %s (attempt %d)",
                    self.name,
                    exc,
                    attempt,
                    extra={"stream": exc.stream, "conflict": True, "attempt": attempt},
                )
                self.resync(exc.stream)
                # Jitter, so competing writers do not collide again in lockstep.
                self.context.stop.wait(self._random.uniform(0, 0.002 * 2**attempt))
            except PERMANENT as exc:
                if source is None:
                    raise
                reason = f"the store rejected what it led to: {describe(exc)}"
                self.commit(Outcome([self.skip(source, reason)], source.position))
                return
        assert conflict is not None
        raise ConflictsExhausted(conflict.stream, MAX_CONFLICT_RETRIES)

    def commit(self, outcome: Outcome) -> None:
        """Write ``outcome``'s appends and checkpoint: one transaction where possible.

        A transient store failure (:class:`~decider.stores.errors.StoreUnavailable`) is counted,
        logged and the same write retried with back-off (0.1 s doubling to 5 s) until it
        succeeds or the service stops: what was decided (a handler's results) is kept, not
        decided again. Raises :class:`~decider.stores.errors.WrongExpectedVersion` if an
        append's check fails (on a transactional store nothing is written then).
        """
        backoff = 0.1
        while True:
            try:
                with telemetry.commit_span(self.name, len(outcome.appends), outcome.position):
                    self._write(outcome)
                return
            except StoreUnavailable as exc:
                if self.context.stop.is_set():
                    raise
                self.errors.append(exc)
                self.engine_log.warning(
                    "%s: the store is unavailable (%s); retrying the commit in %.1fs",
                    self.name,
                    describe(exc),
                    backoff,
                )
                if self.context.stop.wait(backoff):
                    raise
                backoff = min(backoff * 2, 5.0)

    def _write(self, outcome: Outcome) -> None:
        store = self.context.store
        appends, position = outcome.appends, outcome.position
        joint = self.share.joint_fence()
        if joint:
            # Several partitions' work in one transaction, each checkpoint under its lease.
            checkpoints = [] if position is None else [(name, position) for name, _ in joint]
            checkpoints += outcome.checkpoints
            leases = [lease for _, lease in joint]
            cast(TransactionalStore, store).append_batch(
                appends, checkpoints=checkpoints, leases=leases
            )
            self._written(outcome)
            return
        try:
            name, lease = self.share.commit_fence()
        except LeaseNotHeld:
            if appends:
                raise
            return  # a checkpoint only: the member that holds the lease keeps it
        if (appends or lease is not None) and self._transactional:
            # Checked once, in __init__: isinstance with a Protocol costs microseconds per input.
            batches = cast(TransactionalStore, store)
            checkpoint = None if position is None else (name, position)
            if lease is None:
                batches.append_batch(appends, checkpoint)
            else:
                batches.append_batch(appends, checkpoint, lease=lease)
        else:
            if len(appends) > 1 and self._pipelined:
                assert isinstance(store, PipelinedStore)
                store.append_each(appends)  # one round trip; the checkpoint after all of them
            else:
                for item in appends:
                    store.append(item.stream, item.events, item.expected_revision)
            if position is not None and position != self.committed:
                self.context.checkpoints.save_checkpoint(name, position)
        self._written(outcome)

    def _written(self, outcome: Outcome) -> None:
        if outcome.position is not None:
            self.committed = outcome.position
        for done in outcome.on_commit:
            done()

    def skip(self, event: RecordedEvent, reason: str) -> StreamAppend:
        """Record that ``event`` is skipped (poison), as an append for the batch's commit."""
        shown_type = _printable(event.type, 200)
        shown_reason = _printable(reason, 1000)
        self.engine_log.warning(
            "%s skips %s at %s@%d: %s",
            self.name,
            shown_type,
            _printable(event.stream, 200),
            event.revision,
            shown_reason,
            extra={
                "stream": _printable(event.stream, 200),
                "position": event.position,
                "event_type": shown_type,
                "event_id": str(event.id),
            },
        )
        self.skipped += 1
        stream = streams.skipped_stream(self.name)
        record = InputSkipped(
            processor=self.name,
            reason=shown_reason,
            stream=_printable(event.stream, 1000),
            revision=event.revision,
            position=event.position,
            event_type=shown_type,
            event_id=str(event.id),
        )
        return StreamAppend(stream, [self.derived(stream, str(event.id), record)], ANY)

    def derived(
        self,
        stream: str,
        cause: str,
        message: Any,
        *,
        index: int = 0,
        correlation_id: str | None = None,
        causation_id: str | None = None,
    ) -> NewEvent:
        """A new event for ``message`` whose id derives from ``stream``, ``cause`` and ``index``."""
        codec = self.context.app.codec
        new_id = event_id(stream, cause, index)
        metadata = telemetry.inject(
            Metadata(
                message_id=str(new_id),
                correlation_id=correlation_id,
                causation_id=causation_id if causation_id is not None else cause,
            )
        )
        type_name, data, encoded = codec.encode_envelope(Envelope(message, metadata))
        return NewEvent(new_id, type_name, data, encoded)

    def copied(
        self, stream: str, cause: str, type_name: str, data: bytes, correlation_id: str | None
    ) -> NewEvent:
        """A stored message copied byte for byte to ``stream``, with an id derived from
        ``stream`` and ``cause`` (also its causation id)."""
        new_id = event_id(stream, cause, 0)
        metadata = telemetry.inject(
            Metadata(message_id=str(new_id), correlation_id=correlation_id, causation_id=cause)
        )
        return NewEvent(new_id, type_name, data, self.context.app.codec.encode_metadata(metadata))


def _printable(text: str, limit: int) -> str:
    """``text`` as valid UTF-8 (a lone surrogate escaped), at most ``limit`` characters."""
    safe = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return safe if len(safe) <= limit else safe[: limit - 1] + "…"
