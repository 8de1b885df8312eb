"""The commit engine: how what a processor decided is written to its store.

A processor's policy returns what to commit (:class:`Outcome`: appends, a checkpoint, what to
do once committed); this module owns everything from there on:

- **how** a batch is written, chosen once per store when the processor is built
  (:func:`writer_for`): on a :class:`~decider.stores.protocol.TransactionalStore`, the appends,
  the checkpoints and the lease checks in one transaction (*transactional*), which also
  commits several partitions' work at once (*joint*); else each append on its own, all in
  flight at once on a :class:`~decider.stores.protocol.PipelinedStore` (*pipelined*) or one
  after another (*plain*), then the checkpoints: at least once, made exactly-once in effect by
  derived event ids;
- **under which fence** (:mod:`decider.processors.engine.sharing`): a partition's checkpoint
  name and lease, or several partitions' at once (:meth:`Committing.fence`);
- the one routine that commits **several partitions' work together, else one by one**
  (:meth:`Committing.commit_partitions`), which the workflow, command and timer processors
  call with what they have to commit;
- the one **back-off** on a store that is unavailable (:class:`Backoff`,
  :meth:`Committing.back_off`): a commit is retried as it was (what was decided is kept), and
  the processor's loop (:mod:`decider.processors.engine.base`) resumes from its checkpoint
  with the same back-off;
- the one bounded **reload-and-retry loop** on revision conflicts, with jitter: the batch is
  redone unit by unit (by default input by input), each reloading what conflicted;
- the **skip records**: an input that cannot be handled goes to
  ``decider-skipped-<processor>`` with the reason, and the processor moves on; and the events a
  processor derives (ids derived from their cause).

:class:`Committing` is the base of :class:`~decider.processors.engine.base.Processor`: a policy
overrides :meth:`~Committing.redo_units` and :meth:`~Committing.resync`, and may extend
:meth:`~Committing._write` (the state-stored workflows write rows with their appends). Its
methods log to the engine's logger (``decider.processors.engine.base``).
"""

from __future__ import annotations

import abc
import random
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from decider import Metadata, event_id
from decider.codec import describe
from decider.processors.app import streams
from decider.processors.app.definition import WorkflowRegistration
from decider.processors.app.errors import ConflictsExhausted
from decider.processors.app.messages import InputSkipped
from decider.processors.engine import logs, telemetry
from decider.processors.engine.clock import Signal
from decider.processors.engine.context import Context
from decider.processors.engine.failures import PERMANENT, ErrorLog, traceback_of, user_exception
from decider.processors.engine.sharing import LeaseNotHeld, Share
from decider.processors.group import partitions
from decider.stores import Lease, LeaseLost
from decider.stores.errors import StoreUnavailable, WrongExpectedVersion
from decider.stores.protocol import (
    ANY,
    NO_STREAM,
    CheckpointStore,
    EventStore,
    NewEvent,
    PipelinedStore,
    RecordedEvent,
    StreamAppend,
    TransactionalStore,
)

MAX_CONFLICT_RETRIES = 5
"""How many times one unit of work is redone after revision conflicts before giving up."""


@attrs.define
class Outcome:
    """What handling a batch (or part of one) leads to: the appends and the checkpoint to commit
    together, and what to do once they are committed (update caches and counters)."""

    appends: list[StreamAppend] = attrs.Factory(list)
    position: int | None = None
    on_commit: list[Callable[[], None]] = attrs.Factory(list)
    checkpoints: list[tuple[str, int]] = attrs.Factory(list)
    """Checkpoints (or marks kept beside them) at positions of their own, in the same commit
    (several partitions' work: :meth:`Committing.commit_partitions`)."""


Unit = tuple[RecordedEvent | None, Callable[[], Outcome]]
"""A unit of work to redo after a conflict: the input it is for (if one), and how to redo it."""

Checkpoints = list[tuple[str, int]]


class Backoff:
    """The one back-off after a store failure: waits of 0.1 s, doubling to 5 s; a stop ends a
    wait at once."""

    FIRST = 0.1
    LONGEST = 5.0

    def __init__(self, stop: Signal) -> None:
        self.stop = stop
        self.delay = self.FIRST
        """The next wait, in seconds."""

    def reset(self) -> None:
        """The store answered: the next failure waits :attr:`FIRST` again."""
        self.delay = self.FIRST

    def wait(self) -> bool:
        """Wait :attr:`delay` (and double it for the next time); whether the stop came."""
        delay = self.delay
        self.delay = min(delay * 2, self.LONGEST)
        return self.stop.wait(delay)


class Writer(abc.ABC):
    """How a batch is written to one store, chosen once per store (:func:`writer_for`)."""

    transactional = False
    """Whether appends, checkpoints and lease checks are one transaction."""
    pipelined = False
    """Whether several appends (or reads) can be in flight at once."""

    @property
    def joint(self) -> bool:
        """Whether several partitions' work commits in one transaction, under all their leases."""
        return self.transactional

    @abc.abstractmethod
    def write(
        self, appends: Sequence[StreamAppend], checkpoints: Checkpoints, leases: list[Lease]
    ) -> None:
        """Write ``appends`` and then ``checkpoints``; under ``leases`` where the store can
        check them (a transactional store: else they fence nothing)."""


class _Transactional(Writer):
    transactional = True

    def __init__(self, store: TransactionalStore, marks: CheckpointStore) -> None:
        self.store, self.marks = store, marks
        self.pipelined = isinstance(store, PipelinedStore)

    def write(
        self, appends: Sequence[StreamAppend], checkpoints: Checkpoints, leases: list[Lease]
    ) -> None:
        if appends or leases:
            self.store.append_batch(appends, checkpoints=checkpoints, leases=leases)
            return
        for name, position in checkpoints:  # nothing to fence: a checkpoint costs less alone
            self.marks.save_checkpoint(name, position)


class _Pipelined(Writer):
    pipelined = True

    def __init__(self, store: EventStore, each: PipelinedStore, marks: CheckpointStore) -> None:
        self.store, self.each, self.marks = store, each, marks

    def write(
        self, appends: Sequence[StreamAppend], checkpoints: Checkpoints, leases: list[Lease]
    ) -> None:
        if len(appends) > 1:
            self.each.append_each(appends)  # one round trip; the checkpoints after all of them
        else:
            for item in appends:
                self.store.append(item.stream, item.events, item.expected_revision)
        for name, position in checkpoints:
            self.marks.save_checkpoint(name, position)


class _Plain(Writer):
    def __init__(self, store: EventStore, marks: CheckpointStore) -> None:
        self.store, self.marks = store, marks

    def write(
        self, appends: Sequence[StreamAppend], checkpoints: Checkpoints, leases: list[Lease]
    ) -> None:
        for item in appends:
            self.store.append(item.stream, item.events, item.expected_revision)
        for name, position in checkpoints:
            self.marks.save_checkpoint(name, position)


def writer_for(store: EventStore, marks: CheckpointStore) -> Writer:
    """How batches are written to ``store`` (checkpoints to ``marks``): transactional (and
    joint) on a :class:`~decider.stores.protocol.TransactionalStore`, else pipelined on a
    :class:`~decider.stores.protocol.PipelinedStore`, else plain. Asked once: ``isinstance``
    with a Protocol costs microseconds, too much per input."""
    if isinstance(store, TransactionalStore):
        return _Transactional(store, marks)
    if isinstance(store, PipelinedStore):
        return _Pipelined(store, store, marks)
    return _Plain(store, marks)


class Committing(abc.ABC):
    """Commits what a processor's policy returns; the base of
    :class:`~decider.processors.engine.base.Processor`, which sets :attr:`name`, :attr:`errors`
    and :attr:`share`."""

    name: str
    errors: ErrorLog
    share: Share

    def __init__(self, context: Context) -> None:
        self.context = context
        self.committed: int | None = None
        """The checkpoint last committed (in a group: the lowest of the partitions held)."""
        self.conflicts = 0
        self.skipped = 0
        self.writer = writer_for(context.store, context.checkpoints)
        """How this processor's batches are written to its store (chosen once)."""
        self._transactional = self.writer.transactional
        self._pipelined = self.writer.pipelined
        self._random = random.Random()

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
            outcome.checkpoints,
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
                self.commit(Outcome([self.skip(source, reason, exc)], source.position))
                return
        assert conflict is not None
        raise ConflictsExhausted(conflict.stream, MAX_CONFLICT_RETRIES)

    def commit(self, outcome: Outcome) -> None:
        """Write ``outcome``'s appends and checkpoints under the fence in hand (:meth:`fence`):
        one transaction where the store allows.

        A transient store failure (:class:`~decider.stores.errors.StoreUnavailable`) is counted,
        logged and the same write retried with the back-off (:meth:`back_off`) until it
        succeeds or the service stops: what was decided (a handler's results) is kept, not
        decided again. Raises :class:`~decider.stores.errors.WrongExpectedVersion` if an
        append's check fails (on a transactional store nothing is written then).
        """
        backoff = Backoff(self.context.stop)
        while True:
            try:
                with telemetry.commit_span(self.name, len(outcome.appends), outcome.position):
                    self._write(outcome)
                return
            except StoreUnavailable as exc:
                if self.context.stop.is_set() or self.back_off(exc, backoff, "the commit"):
                    raise

    def back_off(self, exc: BaseException, backoff: Backoff, retrying: str) -> bool:
        """After a transient store failure: count ``exc``, log it as a warning, and wait
        (``backoff``) before ``retrying``; whether the service stopped meanwhile."""
        self.errors.append(exc)
        self.engine_log.warning(
            "%s: the store is unavailable (%s); retrying %s in %.1fs",
            self.name,
            describe(exc),
            retrying,
            backoff.delay,
            extra={"position": self.committed},
        )
        return backoff.wait()

    def fence(
        self, outcome: Outcome, *, writes: bool | None = None
    ) -> tuple[Checkpoints, list[Lease]] | None:
        """The checkpoints and leases ``outcome`` commits with under the fence in hand
        (:mod:`decider.processors.engine.sharing`); ``writes``: whether it writes more than
        checkpoints (by default: whether it has appends).

        Under a joint fence (several partitions at once): every partition's checkpoint at
        ``outcome.position``, and under every lease. Else the partition's checkpoint (without a
        group, the processor's own) under its lease (none without a group), if it moved or
        goes with writes. ``outcome.checkpoints`` come with either. ``None``: nothing to
        write, a checkpoint only outside a partition's fence (the member that holds the lease
        keeps it). Raises :class:`~decider.processors.engine.sharing.LeaseNotHeld` for writes
        outside a fence in a group.
        """
        position = outcome.position
        joint = self.share.joint_fence()
        if joint:
            checkpoints = [] if position is None else [(name, position) for name, _ in joint]
            return [*checkpoints, *outcome.checkpoints], [lease for _, lease in joint]
        if writes is None:
            writes = bool(outcome.appends)
        try:
            name, lease = self.share.commit_fence()
        except LeaseNotHeld:
            if writes:
                raise
            return None
        leases = [] if lease is None else [lease]
        checkpoints = list(outcome.checkpoints)
        if position is not None and (writes or leases or position != self.committed):
            checkpoints.insert(0, (name, position))
        return checkpoints, leases

    def _write(self, outcome: Outcome) -> None:
        """Write ``outcome`` as this store does (:attr:`writer`), then :meth:`_written`."""
        fence = self.fence(outcome)
        if fence is None:
            return
        checkpoints, leases = fence
        self.writer.write(outcome.appends, checkpoints, leases)
        self._written(outcome)

    def save_mark(self, name: str, position: int) -> None:
        """Store a mark kept beside the checkpoint (``name``) under the fence in hand: in a
        group, a process that lost the partition cannot write it either (on a transactional
        store)."""
        _, lease = self.share.commit_fence()
        self.writer.write([], [(name, position)], [] if lease is None else [lease])

    def commit_partitions(
        self,
        keys: Sequence[int],
        together: Callable[[], Outcome],
        alone: Callable[[int], None],
    ) -> list[int]:
        """Commit the work of the partitions ``keys`` (:mod:`decider.processors.engine.sharing`:
        in a group, those held; else :data:`~decider.processors.engine.sharing.ALL`); the keys
        whose work was committed.

        Several partitions' work goes in one transaction where the store can
        (:attr:`Writer.joint`): what ``together()`` returns, under every partition's lease,
        with every partition's checkpoint at its ``position`` (and its ``checkpoints``). If that
        fails, nothing was written: a lease was lost (that partition is dropped), a revision
        check failed (:meth:`resync`) or the store rejected it for good. Then, and on any other
        store, each partition's work is committed on its own: ``alone(key)``, under its fence
        (it commits in the conflict loop, :meth:`commit_outcome`). A partition whose lease a
        commit finds lost is dropped (:meth:`~decider.processors.engine.sharing.Share.lease_gone`)
        with its work in hand (:meth:`partition_dropped`), never committed.
        """
        if len(keys) > 1 and self.writer.joint:
            try:
                with self.share.fenced_together(keys):
                    self.commit(together())
            except (LeaseLost, LeaseNotHeld) as exc:
                self.share.lease_gone(exc)
            except WrongExpectedVersion as exc:
                self.conflicts += 1
                self.resync(exc.stream)
            except PERMANENT:
                pass  # each partition on its own finds what the store rejects
            else:
                return list(keys)
        done: list[int] = []
        owned = self.share.owned
        for key in keys:
            if owned is not None and key not in owned:
                self.partition_dropped(key)  # its lease was lost committing them together
                continue
            try:
                with self.share.fenced(key):
                    alone(key)
            except (LeaseLost, LeaseNotHeld) as exc:
                self.partition_dropped(key)
                self.share.lease_gone(exc)
                continue
            done.append(key)
        return done

    def partition_dropped(self, key: int) -> None:  # noqa: B027 (a hook: most keep no state)
        """``key``'s partition is not held any more: forget its work in hand."""

    def _written(self, outcome: Outcome) -> None:
        if outcome.position is not None:
            self.committed = outcome.position
        for done in outcome.on_commit:
            done()

    def skip(
        self, event: RecordedEvent, reason: str, cause: BaseException | None = None
    ) -> StreamAppend:
        """Record that ``event`` is skipped (poison), as an append for the batch's commit;
        ``cause``: the exception that made it one, its traceback logged and kept (bounded)."""
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
            exc_info=None if cause is None else user_exception(cause),
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
            traceback=traceback_of(cause),
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
        input_for: WorkflowRegistration | bool = False,
    ) -> NewEvent:
        """A new event for ``message`` whose id derives from ``stream``, ``cause`` and ``index``.

        ``input_for``: the message is an input of that workflow (``True``: of whichever one
        takes its type), stored with the partition key of the instance its route gives
        (:func:`~decider.processors.group.partitions.input_key`)."""
        app = self.context.app
        new_id = event_id(stream, cause, index)
        message_id = str(new_id)
        codec = app.codec
        parent, state = (
            telemetry.trace_fields() if telemetry.current_context() else telemetry.NO_TRACE
        )
        type_name, data = codec.encode_message(message)
        metadata = codec.metadata_bytes(
            message_id,
            correlation_id=correlation_id,
            causation_id=causation_id if causation_id is not None else cause,
            traceparent=parent,
            tracestate=state,
        )
        key = None
        if input_for is not False:
            key = partitions.routed_key(
                app,
                type_name,
                lambda: message,
                correlation_id,
                lambda: Metadata(
                    message_id=message_id,
                    correlation_id=correlation_id,
                    causation_id=causation_id if causation_id is not None else cause,
                ),
                workflow=None if input_for is True else input_for,
            )
        return NewEvent(new_id, type_name, data, metadata, partition_key=key)

    def copied(
        self, stream: str, cause: str, type_name: str, data: bytes, correlation_id: str | None
    ) -> NewEvent:
        """A stored message copied byte for byte to ``stream``, with an id derived from
        ``stream`` and ``cause`` (also its causation id)."""
        new_id = event_id(stream, cause, 0)
        parent, state = (
            telemetry.trace_fields() if telemetry.current_context() else telemetry.NO_TRACE
        )
        metadata = self.context.app.codec.metadata_bytes(
            str(new_id),
            correlation_id=correlation_id,
            causation_id=cause,
            traceparent=parent,
            tracestate=state,
        )
        return NewEvent(new_id, type_name, data, metadata)

    def copied_input(
        self, stream: str, cause: str, type_name: str, data: bytes, correlation_id: str | None
    ) -> NewEvent:
        """:meth:`copied`, for a message that is an input of the app's workflows: stored with
        the partition key of the instance its route gives (the message is decoded only if the
        route needs it)."""
        new = self.copied(stream, cause, type_name, data, correlation_id)
        app = self.context.app
        metadata = Metadata(
            message_id=str(new.id), correlation_id=correlation_id, causation_id=cause
        )
        key = partitions.input_key(
            app, type_name, lambda: app.codec.decode_message(type_name, data), metadata
        )
        return attrs.evolve(new, partition_key=key)


def _printable(text: str, limit: int) -> str:
    """``text`` as valid UTF-8 (a lone surrogate escaped), at most ``limit`` characters."""
    safe = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return safe if len(safe) <= limit else safe[: limit - 1] + "…"
