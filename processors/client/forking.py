"""Repair an instance: fork it from a revision and decide its inputs again with the current code.

A fork ends one *generation* of an instance and begins the next. The new generation's stream,
``<instance stream>~g<n>`` (:func:`~decider.processors.app.streams.generation_stream`), is
written in the same commit as the :class:`~decider.processors.app.messages.ForkMark` that ends
the old one (a ``Cancelled`` event whose reason names the fork, appended with the old
generation's last revision as expected revision). What the new generation records is decided
here, by the current ``decide`` and ``evolve``, from the inputs the old generation received up
to the fork's revision, each handled as a processor handles it (the replay machinery of
:func:`decider.testing.replay_check`: :func:`decider.testing.spec.deliver`):

- a command or timer that the new generation decides for an input exactly as the old one did
  for the same input (an equal event: same type, same message) **reuses** the old one: its
  event says so in its metadata (``"reuses": <old event id>``), the command processor carries
  it out no more, and the timer processor fires it under the old timer's stream (once in all);
  the results the old command (or timer) led to that the old generation received after the
  fork's revision are decided in the new generation too, after the inputs before it;
- any other command or timer is carried out anew, as the processors carry out any;
- later inputs of the instance (routed to the instance's own stream, as always) go to the
  newest generation: the workflow processor finds the mark when it reads the old generation
  (:mod:`decider.processors.workflows.processor`); an input caused by a command or timer of an
  earlier generation that the new one does not reuse reaches no generation (it is skipped,
  with the reason).

:func:`plan_fork` reads and decides, writing nothing (``decider fork --dry-run`` prints its
plan); :func:`commit_fork` writes a plan; :func:`fork` does both (``app.fork``,
``decider fork``). A fork is idempotent: every id it writes is derived (from the new
generation's stream and each input's message id, as a processor derives them), so a fork
asked again of a generation it already forked at the same revision finds it done
(``already``), and one cut short before its commit left nothing. On a store without
transactions the new generation is written first, then the mark: a fork cut short between the
two is finished by the same fork asked again, which writes the rest of the new generation
(the results its own commands and timers led to meanwhile, which reached the old generation,
included) and the mark.

WARNING: on a store without transactions, until a fork cut short between its two writes is
asked again, the new generation's commands and timers are carried out while the instance's
inputs still go to the old generation, whose ``decide`` may act on them.

WARNING: inputs the old generation received after the fork's revision are not handled by the
new one, except the results of reused commands and timers: publish them again, or fork at a
later revision. Commands the old generation recorded after the fork's revision that were not
carried out yet are still carried out (their results reach no generation).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import attrs

from decider import (
    Ignored,
    InitiatedBy,
    Instance,
    Metadata,
    Received,
    Scheduled,
    Workflow,
    WorkflowEvent,
    advance,
    began_version,
    event_id,
    start,
)
from decider.codec import COMMAND_KINDS, TIMER_KINDS, Kind, describe, event_kind, parse_type
from decider.processors.app import decoding, streams
from decider.processors.app.definition import AppDefinition, WorkflowRegistration
from decider.processors.app.errors import OperationError
from decider.processors.app.messages import CANCEL_TYPE, COMMAND_FAILED, ForkMark
from decider.processors.engine.reading import read_stream
from decider.processors.group import partitions
from decider.stores.errors import CorruptEvent, WrongExpectedVersion
from decider.stores.protocol import (
    NO_STREAM,
    EventStore,
    NewEvent,
    RecordedEvent,
    StreamAppend,
    TransactionalStore,
)
from decider.testing import replay_check
from decider.testing.spec import deliver

__all__ = [
    "ForkPlan",
    "PlannedEvent",
    "commit_fork",
    "current_generation",
    "fork",
    "fork_point",
    "plan_fork",
]

_INPUT_EVENTS = (InitiatedBy, Received, Ignored)
_OUTBOX_KINDS = frozenset({*COMMAND_KINDS, *TIMER_KINDS})
_MARK_CAUSE = "decider-fork"
"""The cause the fork mark's id derives from (with the stream it ends)."""
_PLAN_TRIES = 3
"""How many times :func:`fork` plans again when the instance moved on while it planned."""


@attrs.frozen
class PlannedEvent:
    """One event the new generation records: its revision there, stored type and event.

    ``reuses`` is the id of the old command or timer whose effect it reuses (``None``: not
    reused), ``reuses_revision`` the revision of the event that recorded it in the generation
    forked (``None`` where that is not known: a fork read back); ``anew`` says it is a command
    or timer that will be carried out anew.
    """

    revision: int
    type: str
    event: WorkflowEvent[Any, Any]
    reuses: str | None = None
    anew: bool = False
    reuses_revision: int | None = None

    def __str__(self) -> str:
        if self.reuses is not None:
            where = f"#{self.reuses_revision}" if self.reuses_revision is not None else self.reuses
            return f"#{self.revision} {self.type}  (reuses {where})"
        return f"#{self.revision} {self.type}" + "  (carried out anew)" * self.anew

    def as_json(self) -> dict[str, object]:
        """As a JSON object."""
        return {
            "revision": self.revision,
            "type": self.type,
            "event": repr(self.event),
            "reuses": self.reuses,
            "reuses_revision": self.reuses_revision,
            "anew": self.anew,
        }


@attrs.frozen
class ForkPlan:
    """What a fork of ``source`` at revision ``at`` writes (or, ``already``, wrote before).

    ``events`` are the new generation's events; ``skipped`` the inputs it does not record
    (``decide`` now raises for them, under ``on_error="skip"``), each with the reason.
    ``appends`` is what :func:`commit_fork` writes: the new generation's stream, then the mark
    at the end of ``source``, with ``source``'s last revision as expected revision.
    """

    instance: str
    """The instance's own stream, which its inputs are routed to (generation 1)."""
    source: str
    """The generation forked."""
    generation: str
    """The new generation's stream."""
    number: int
    """The new generation's number (2 for the first fork of an instance)."""
    at: int
    reason: str
    source_revision: int
    """``source``'s last revision when planned."""
    inputs: int
    """How many inputs the new generation decides again (those carried over included)."""
    carried: int
    """How many of them are results of reused commands or timers that ``source`` received
    after ``at``."""
    events: tuple[PlannedEvent, ...]
    skipped: tuple[str, ...] = ()
    already: bool = False
    """The fork was committed before (by an earlier call): nothing is written again."""
    appends: tuple[StreamAppend, ...] = attrs.field(default=(), repr=False, eq=False)

    @property
    def reused(self) -> list[PlannedEvent]:
        """The commands and timers that reuse the old ones' effects."""
        return [event for event in self.events if event.reuses is not None]

    @property
    def anew(self) -> list[PlannedEvent]:
        """The commands and timers that will be carried out anew."""
        return [event for event in self.events if event.anew]

    def lines(self) -> list[str]:
        """The plan in words, one line each (what ``decider fork`` prints)."""
        done = "was forked" if self.already else "forks"
        head = (
            f"{self.source} {done} to {self.generation} at revision {self.at} "
            f"(of {self.source_revision}): {self.reason}"
        )
        lines = [
            head,
            f"  {self.inputs} input(s) decided again ({self.carried} carried over), "
            f"{len(self.events)} event(s), {len(self.reused)} command(s)/timer(s) reused, "
            f"{len(self.anew)} carried out anew",
        ]
        lines.extend(f"  {event}" for event in self.events)
        lines.extend(f"  skipped: {reason}" for reason in self.skipped)
        return lines

    def as_json(self) -> dict[str, object]:
        """As a JSON object."""
        return {
            "instance": self.instance,
            "source": self.source,
            "generation": self.generation,
            "number": self.number,
            "at": self.at,
            "reason": self.reason,
            "source_revision": self.source_revision,
            "inputs": self.inputs,
            "carried": self.carried,
            "already": self.already,
            "events": [event.as_json() for event in self.events],
            "reused": [event.reuses for event in self.reused],
            "anew": [event.type for event in self.anew],
            "skipped": list(self.skipped),
        }


def fork(
    app: AppDefinition,
    store: EventStore,
    workflow: Workflow[Any, Any, Any] | str,
    instance_id: str | None = None,
    *,
    at: int,
    reason: str,
    dry_run: bool = False,
) -> ForkPlan:
    """Fork an instance of ``app`` at revision ``at`` of the generation given (by workflow and
    instance id, or by its stream with ``instance_id`` left out) and commit it, unless
    ``dry_run``; the plan, with ``already`` if that generation was forked so before.

    See :meth:`App.fork <decider.processors.client.app.App.fork>`.
    """
    name = workflow if isinstance(workflow, str) else workflow.name
    stream = name if instance_id is None else streams.instance_stream(name, instance_id)
    for attempt in range(_PLAN_TRIES):
        plan = plan_fork(app, store, stream, at=at, reason=reason)
        if dry_run:
            return plan
        try:
            return commit_fork(store, plan)
        except _MovedOn:
            if attempt == _PLAN_TRIES - 1:
                raise OperationError(
                    f"{stream} kept moving on while it was forked ({_PLAN_TRIES} tries); try again"
                ) from None
    raise AssertionError("unreachable")  # pragma: no cover


class _MovedOn(OperationError):
    """The generation forked recorded more events between the plan and its commit."""


def commit_fork(store: EventStore, plan: ForkPlan) -> ForkPlan:
    """Write ``plan`` (nothing if it is ``already`` done): the new generation and the mark that
    ends the old one, in one transaction on a
    :class:`~decider.stores.protocol.TransactionalStore`, else the new generation first.

    Raises :class:`~decider.processors.app.errors.OperationError` if the old generation
    recorded more events since the plan was made (plan again), or if a fork to the same
    generation was begun with other inputs and left unfinished.
    """
    if plan.already:
        return plan
    try:
        if isinstance(store, TransactionalStore):
            store.append_batch(plan.appends)
        else:
            # The new generation first: nothing routes to it before the mark is written, and
            # a second run writes the same ids again (an idempotent append) before the mark.
            for append in plan.appends:
                store.append(append.stream, append.events, append.expected_revision)
    except WrongExpectedVersion as exc:
        if exc.stream == plan.source:
            raise _MovedOn(
                f"{plan.source} recorded more events after revision {plan.source_revision} "
                "while it was forked; plan the fork again"
            ) from exc
        raise OperationError(
            f"{plan.generation} holds other events than this fork of {plan.source} at "
            f"revision {plan.at} would write (a fork begun with other inputs that did not "
            "finish?); fork at the revision it was begun with"
        ) from exc
    return plan


def plan_fork(
    app: AppDefinition,
    store: EventStore,
    stream: str,
    *,
    at: int,
    reason: str,
) -> ForkPlan:
    """What forking the generation ``stream`` at revision ``at`` writes; reads only.

    The new generation decides, with the current code, every input ``stream`` recorded up to
    revision ``at`` (``InitiatedBy``, ``Received`` or ``Ignored`` there), then the results of
    the commands and timers it reuses that ``stream`` received later. Raises
    :class:`~decider.processors.app.errors.OperationError` for a stream of no event-sourced
    workflow of ``app``, one with no events, a revision before the first input or after the
    last event, a generation already forked at another revision, an event that cannot be
    decoded, or an ``evolve`` that now raises on what the new generation records.
    """
    registration = app.workflow_of_stream(stream)
    if registration is None:
        raise OperationError(f"{stream!r} is not the stream of a workflow of {app.name!r}")
    if registration.stored != "events":
        raise OperationError(
            f"{registration.workflow.name} keeps its state in a row "
            f"(stored={registration.stored!r}): only event-sourced instances can be forked"
        )
    if not reason.strip():
        raise OperationError("a fork needs a reason")
    records = read_stream(store, stream)
    if not records:
        raise OperationError(f"instance {stream!r} has no events")
    try:
        done = decoding.fork_mark(app.codec, records[-1])
    except CorruptEvent as exc:
        raise OperationError(f"{stream} ends with a fork that cannot be read: {exc}") from exc
    if done is not None:
        if done.at != at:
            raise OperationError(
                f"{stream} was forked to {done.forked_to} at revision {done.at}; "
                f"to fork it again, fork {done.forked_to}"
            )
        # The plan it was made by: the same inputs, the same derived ids (by this code).
        try:
            redone = _plan(app, store, registration, stream, records[:-1], at=done.at, why=done.why)
        except CorruptEvent as exc:
            raise OperationError(f"{stream} cannot be forked: {exc}") from exc
        return attrs.evolve(redone, already=True, appends=())
    try:
        return _plan(
            app, store, registration, stream, records, at=at, why=reason.strip(), resume=True
        )
    except CorruptEvent as exc:
        raise OperationError(f"{stream} cannot be forked: {exc}") from exc


def _plan(
    app: AppDefinition,
    store: EventStore,
    registration: WorkflowRegistration,
    stream: str,
    records: list[RecordedEvent],
    *,
    at: int,
    why: str,
    resume: bool = False,
) -> ForkPlan:
    """The plan of a fork of ``stream``, whose events (up to the fork, if it was) are
    ``records``, at revision ``at``; with ``resume``, the rest of a fork whose new generation
    was written and its mark not (:func:`_begun`)."""
    last = records[-1].revision
    instance, number = streams.generation_of(stream)
    codec = app.codec
    if not 1 <= at <= last:
        raise OperationError(
            f"revision {at} is not a revision of {stream} after its first event "
            f"(revisions 1 to {last})"
        )
    history = _History(app, registration, records)
    if not any(r.revision <= at for r in history.inputs):
        raise OperationError(f"{stream} records no input up to revision {at}")
    generation = streams.generation_stream(instance, number + 1)
    begun = read_stream(store, generation) if resume else []
    builder = _Builder(app, registration, instance, generation, history, begun=bool(begun))
    for record in history.inputs:
        if record.revision <= at:
            builder.decide(history.input_of(record))
    carried = builder.carry_results(store)
    earlier_void = _earlier_void(store, app, instance, number)
    reused = builder.reused_roots()
    void = sorted((earlier_void | history.outbox_roots()) - reused)
    mark = ForkMark(
        reason=f"forked to {generation} at revision {at}: {why}",
        instance=instance,
        forked_to=generation,
        at=at,
        why=why,
        reused=sorted(reused),
        void=void,
    )
    mark_id = event_id(stream, _MARK_CAUSE, 0)
    mark_metadata = Metadata(
        message_id=str(mark_id),
        correlation_id=instance[len(registration.stream_prefix) :],
        causation_id=_MARK_CAUSE,
    )
    mark_event = NewEvent(
        mark_id,
        Kind.CANCELLED.value,
        codec.encode_data(mark),
        codec.encode_metadata(mark_metadata),
        partition_key=builder.key,
    )
    appends = [StreamAppend(stream, [mark_event], last)]
    rest = _begun(begun, builder.new, source=stream, generation=generation, at=at)
    if rest:
        expected = begun[-1].revision if begun else NO_STREAM
        appends.insert(0, StreamAppend(generation, rest, expected))
    return ForkPlan(
        instance=instance,
        source=stream,
        generation=generation,
        number=number + 1,
        at=at,
        reason=why,
        source_revision=last,
        inputs=builder.inputs,
        carried=carried,
        events=tuple(builder.planned),
        skipped=tuple(builder.skipped),
        appends=tuple(appends),
    )


def _begun(
    begun: list[RecordedEvent], new: list[NewEvent], *, source: str, generation: str, at: int
) -> list[NewEvent]:
    """What of ``new`` (the new generation's events) is still to be written, given what a
    fork cut short wrote of it (``begun``: on a store without transactions the new generation
    is written first, then the mark). The same fork planned again decides the same inputs into
    the same derived ids, then the results that came meanwhile: ``begun`` must be where ``new``
    starts."""
    if [event.id for event in begun] != [event.id for event in new[: len(begun)]]:
        raise OperationError(
            f"{generation} holds other events than this fork of {source} at revision {at} "
            "would write (a fork begun with other inputs that did not finish?); fork at the "
            "revision it was begun with"
        )
    return new[len(begun) :]


def fork_point(app: AppDefinition, store: EventStore, stream: str) -> int | None:
    """The revision to fork the generation ``stream`` at so that the current code decides
    again from the first input it would decide otherwise (the input of the first difference
    :func:`decider.testing.replay_check` finds, as ``decider replay-check`` does); ``None``
    where the current code records what ``stream`` holds (or it has no events). Reads only.

    Raises :class:`~decider.processors.app.errors.OperationError` for a stream of no workflow
    of ``app``.
    """
    registration = app.workflow_of_stream(stream)
    if registration is None:
        raise OperationError(f"{stream!r} is not the stream of a workflow of {app.name!r}")
    records = [r for r in read_stream(store, stream) if not decoding.is_fork_mark(r)]
    history = [decoding.decode_event(app.codec, record) for record in records]
    report = replay_check(
        registration.workflow, history, decides_cancel=CANCEL_TYPE in registration.inputs
    )
    if report.difference is None:
        return None
    return max(1, report.difference.input_revision)


def current_generation(app: AppDefinition, store: EventStore, stream: str) -> str:
    """The stream of the newest generation of the instance whose stream (or a generation's) is
    ``stream``: ``stream`` itself unless it was forked. Reads the end of each generation.

    >>> from decider.processors import App
    >>> from decider.stores.memory import MemoryEventStore
    >>> current_generation(App("shop"), MemoryEventStore(), "Order-o-1")
    'Order-o-1'
    """
    seen = {stream}
    while True:
        records = read_stream(store, stream)
        mark = decoding.fork_mark(app.codec, records[-1]) if records else None
        if mark is None or mark.forked_to in seen:
            return stream
        stream = mark.forked_to
        seen.add(stream)


def _earlier_void(store: EventStore, app: AppDefinition, instance: str, number: int) -> set[str]:
    """The ids the previous generation's fork made void (nothing before generation 2)."""
    if number < 2:
        return set()
    previous = streams.generation_stream(instance, number - 1)
    records = read_stream(store, previous)
    mark = decoding.fork_mark(app.codec, records[-1]) if records else None
    return set(mark.void) if mark is not None else set()


@attrs.frozen
class _Input:
    """An input as the old generation recorded it, or as a command's results stream holds it."""

    message: Any
    message_id: str
    revision: int | None
    """Its revision in the old generation (``None``: it never reached it)."""


class _History:
    """The old generation decoded: its inputs, and what it recorded for each."""

    def __init__(
        self, app: AppDefinition, registration: WorkflowRegistration, records: list[RecordedEvent]
    ) -> None:
        codec = app.codec
        self.codec = codec
        self.inputs: list[RecordedEvent] = []
        self._events: dict[int, WorkflowEvent[Any, Any]] = {}
        self._outbox: dict[str, list[tuple[WorkflowEvent[Any, Any], RecordedEvent]]] = {}
        """For each input's message id: the commands and timers recorded for it, in order."""
        self._by_message: dict[str, RecordedEvent] = {}
        self._records = records
        cause: str | None = None
        for record in records:
            if decoding.is_fork_mark(record):
                continue
            event = decoding.decode_event(codec, record)
            self._events[record.revision] = event
            if isinstance(event, _INPUT_EVENTS):
                cause = codec.causation_of(record.metadata) or str(record.id)
                self.inputs.append(record)
                self._by_message.setdefault(cause, record)
            elif event_kind(record.type) in _OUTBOX_KINDS and cause is not None:
                self._outbox.setdefault(cause, []).append((event, record))

    def input_of(self, record: RecordedEvent) -> _Input:
        """The input ``record`` (an ``InitiatedBy``, ``Received`` or ``Ignored``) holds."""
        event = self._events[record.revision]
        assert isinstance(event, _INPUT_EVENTS)
        message_id = self.codec.causation_of(record.metadata) or str(record.id)
        return _Input(event.message, message_id, record.revision)

    def received(self, message_id: str) -> RecordedEvent | None:
        """The event that recorded the input ``message_id``, if the old generation got it."""
        return self._by_message.get(message_id)

    def outbox_for(self, message_id: str) -> list[tuple[WorkflowEvent[Any, Any], RecordedEvent]]:
        """The commands and timers the old generation recorded for the input ``message_id``."""
        return self._outbox.get(message_id, [])

    def root(self, record: RecordedEvent) -> str:
        """The id an outbox event's results are caused by: the one it reuses, else its own."""
        return self.codec.reused_of(record.metadata) or str(record.id)

    def outbox_roots(self) -> set[str]:
        """The ids every command and timer of the old generation is known by."""
        return {self.root(r) for entries in self._outbox.values() for _, r in entries}


class _Builder:
    """Decides the new generation's inputs one by one, as a processor would, and encodes what
    it records."""

    def __init__(
        self,
        app: AppDefinition,
        registration: WorkflowRegistration,
        instance_stream: str,
        generation: str,
        history: _History,
        *,
        begun: bool = False,
    ) -> None:
        self.app = app
        self.registration = registration
        self.workflow = registration.workflow
        self.generation = generation
        self.instance_id = instance_stream[len(registration.stream_prefix) :]
        self.key = partitions.stream_key(instance_stream)
        """The partition key of every event the fork writes: the instance's, as a processor
        keys the work of each of its generations."""
        self.history = history
        self.decides_cancel = CANCEL_TYPE in registration.inputs
        self.state: Instance[Any] = start(self.workflow)
        self.handled: set[str] = set()
        self.new: list[NewEvent] = []
        self.planned: list[PlannedEvent] = []
        self.skipped: list[str] = []
        self.inputs = 0
        self._reused: dict[str, str] = {}
        """Each reused root id: the type of the event that reuses it."""
        self._begun = begun
        """Whether a fork cut short wrote this generation (its mark not): its own commands
        and timers may have been carried out since, their results reaching the old one."""
        self._own: dict[str, str] = {}
        """Each command or timer carried out anew: its id, the type of its event."""
        self._carried_from: set[str] = set()

    def reused_roots(self) -> set[str]:
        """The ids of the old commands and timers the new generation reuses."""
        return set(self._reused)

    def decide(self, given: _Input) -> None:
        """Decide ``given`` on the new generation's state; record what it leads to."""
        if given.message_id in self.handled:
            return  # handled once per instance, as the processor does
        try:
            events = deliver(self.workflow, self.state, given.message, self.decides_cancel)
        except Exception as exc:
            self.skipped.append(
                f"input {given.message_id} ({type(given.message).__name__}): "
                f"decide raised {describe(exc)}"
            )
            return
        self.handled.add(given.message_id)
        if not events:
            return
        self.inputs += 1
        try:
            self.state = advance(self.workflow, self.state, events)
        except Exception as exc:
            raise OperationError(
                f"evolve raises on what the new generation records for input "
                f"{given.message_id}: {describe(exc)}"
            ) from exc
        old = list(self.history.outbox_for(given.message_id))
        for index, event in enumerate(events):
            self._record(given, index, event, old)

    def _record(
        self,
        given: _Input,
        index: int,
        event: WorkflowEvent[Any, Any],
        old: list[tuple[WorkflowEvent[Any, Any], RecordedEvent]],
    ) -> None:
        codec = self.app.codec
        type_name, data = codec.encode_event(event)
        new_id = event_id(self.generation, given.message_id, index)
        outbox = event_kind(type_name) in _OUTBOX_KINDS
        match = next((i for i, (e, _) in enumerate(old) if e == event), None) if outbox else None
        reuses: str | None = None
        reuses_revision: int | None = None
        recorded_at: datetime | None = None
        if match is not None:
            _, record = old.pop(match)
            reuses, reuses_revision = self.history.root(record), record.revision
            self._reused[reuses] = type_name
            if isinstance(event, Scheduled):
                # Due when the old one was: the old recorded time, as the timer reads it.
                old_metadata = decoding.input_metadata(codec, record)
                recorded_at = old_metadata.recorded_at or record.recorded_at
        elif isinstance(event, Scheduled):
            recorded_at = datetime.now(UTC)
        if outbox and reuses is None:
            self._own[str(new_id)] = type_name
        metadata = codec.encode_metadata(
            Metadata(
                message_id=str(new_id),
                correlation_id=self.instance_id,
                causation_id=given.message_id,
                recorded_at=recorded_at,
                workflow_version=began_version(self.workflow, event),
            )
        )
        if reuses is not None:
            metadata = codec.with_reuse(metadata, reuses)
        revision = len(self.new)
        self.new.append(NewEvent(new_id, type_name, data, metadata, partition_key=self.key))
        self.planned.append(
            PlannedEvent(
                revision, type_name, event, reuses, outbox and reuses is None, reuses_revision
            )
        )

    def carry_results(self, store: EventStore) -> int:
        """Decide the results of the reused commands and timers that the new generation has
        not handled (the old one received them after the fork's revision, or not yet), in the
        order they were stored; how many. Their decisions may reuse more: until none is left.
        Where a fork cut short wrote the generation, the results of its own commands and timers
        too (carried out since; routed to the old generation, which was not marked yet)."""
        carried = 0
        while True:
            roots = {**self._reused, **self._own} if self._begun else self._reused
            pending = [root for root in roots if root not in self._carried_from]
            if not pending:
                return carried
            found: list[tuple[int, _Input]] = []
            for root in pending:
                self._carried_from.add(root)
                for record in self._results(store, root, roots[root]):
                    found.extend(self._result_input(record))
            for _, given in sorted(found, key=lambda item: item[0]):
                before = self.inputs
                self.decide(given)
                carried += self.inputs - before

    def _results(self, store: EventStore, root: str, type_name: str) -> Iterable[RecordedEvent]:
        """What the command or timer ``root`` (of an event of ``type_name``) led to."""
        kind = event_kind(type_name)
        if kind in TIMER_KINDS:
            yield from read_stream(store, streams.timer_stream(root))
        elif kind == Kind.SENT:
            command_type = parse_type(type_name)[1]
            handler = self.app.handlers.get(command_type)
            if handler is not None:
                yield from read_stream(store, streams.results_stream(handler.name, root))
            if COMMAND_FAILED in self.registration.inputs:
                yield from read_stream(store, streams.failed_stream(self.workflow.name, root))

    def _result_input(self, record: RecordedEvent) -> list[tuple[int, _Input]]:
        """``record`` as an input of the new generation, if the workflow takes its type."""
        if record.type not in self.registration.inputs:
            return []
        codec = self.app.codec
        try:
            metadata = decoding.input_metadata(codec, record)
            message = decoding.decode_message(codec, record)
        except CorruptEvent:
            return []  # the processor skips it too
        received = self.history.received(metadata.message_id)
        revision = received.revision if received is not None else None
        return [(record.position, _Input(message, metadata.message_id, revision))]
