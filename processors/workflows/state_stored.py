"""The state-stored variant: the same workflow, its state in a row, its commands in an outbox.

Registered with ``app.workflow(workflow, inputs=..., stored="state")`` on a store that is a
:class:`~decider.stores.protocol.StateStore` (SQLite, PostgreSQL). For each input the processor
routes it, loads the instance's row (cache, else the store), skips it if the instance already
handled its message id, decides and translates (:func:`decider.handle`) and folds the events
with ``evolve`` (:func:`decider.advance`), exactly as the event-sourced variant does: the
decoding, routing, deduplication and deciding are the same code
(:mod:`decider.processors.workflows.deciding`), cancel requests included (``app.cancel``, ``decider
cancel``: ``decide`` gets the request if the workflow lists ``decider.CancelRequested`` among
its inputs, else the instance is cancelled at once). What it keeps differs:

- the new state (with its lifecycle and the handled message ids, encoded by
  :class:`~decider.StateCodec`) replaces the row, if the row is still at the version it was
  read at (an optimistic check: a conflict reloads the row and redoes the input);
- the outbox: the translated events that are not the input itself (``Began``, ``Sent``,
  ``Published``, ``Replied``, ``Scheduled``, ``Completed``, ...) are appended to the instance
  stream, which the command and timer processors follow as for an event-sourced instance;
- the row, the outbox append and the processor's checkpoint are one transaction.

So an input is either fully recorded (state, outbox and checkpoint) or not at all: a crash
between deciding and committing loses nothing, the input is delivered again and decided again.
The instance stream holds no inputs (``Received``/``InitiatedBy``), so folding it does not give
the state: :func:`load_instance` reads the row (``decider show`` prints it and the outbox). For
the same reason the row keeps the message ids of every input the instance handled (there is
no recorded input to look up); ``Cancelled``, ``Completed`` and ``Failed`` are in the outbox,
so the timer processor drops the timers of an instance that ended, as for an event-sourced one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from decider import (
    InitiatedBy,
    Instance,
    Metadata,
    Received,
    Scheduled,
    StateCodec,
    WorkflowEvent,
    advance,
    began_version,
    event_id,
    start,
)
from decider.errors import DecodeError
from decider.processors.app import streams
from decider.processors.app.definition import AppDefinition, WorkflowRegistration
from decider.processors.app.errors import AppDefinitionError
from decider.processors.engine import telemetry
from decider.processors.engine.base import Context, Outcome, Skip
from decider.processors.engine.failures import call_user
from decider.processors.group import partitions
from decider.processors.workflows.cache import (
    DEFAULT_CACHE_SIZE,
    CachedInstance,
    HandledIds,
    InstanceCache,
)
from decider.processors.workflows.deciding import DecidingProcessor, Routed, Work, WorkflowInputs
from decider.stores.errors import CorruptEvent
from decider.stores.protocol import (
    ANY,
    EventStore,
    NewEvent,
    RecordedEvent,
    StateStore,
    StateWrite,
    StreamAppend,
)


@attrs.define
class StateOutcome(Outcome):
    """An outcome that also writes instances' rows, in the transaction of its appends."""

    states: list[StateWrite] = attrs.Factory(list)


@attrs.define(kw_only=True)
class _Work(Work):
    """One instance's part of a batch: the row's version it was read at, where it is now."""

    base_version: int
    outbox: list[NewEvent] = attrs.Factory(list)


def state_store(store: EventStore, workflow: str) -> StateStore:
    """``store`` as a :class:`~decider.stores.protocol.StateStore`.

    Raises :class:`~decider.processors.app.errors.AppDefinitionError` naming the workflow if the
    store keeps no states.
    """
    if not isinstance(store, StateStore):
        raise AppDefinitionError(
            f"workflow {workflow!r} is registered with stored='state', but {store!r} keeps no "
            "state rows: use SQLite or PostgreSQL, or register it event-sourced"
        )
    return store


def load_instance(
    store: EventStore, app: AppDefinition, registration: WorkflowRegistration, stream: str
) -> Instance[Any]:
    """The state-stored instance of ``stream`` as its row holds it (not started: no row).

    Raises :class:`~decider.stores.errors.CorruptEvent` if the row does not decode.
    """
    row = state_store(store, registration.workflow.name).load_state(stream)
    workflow = registration.workflow
    if row is None:
        return start(workflow)
    try:
        return StateCodec(workflow, app.codec).decode(row.data).instance
    except DecodeError as exc:
        raise CorruptEvent(stream, row.version, f"the state row does not decode: {exc}") from exc


class StateStoredProcessor(DecidingProcessor):
    """Runs one state-stored workflow of an app: routes, decides, writes row and outbox."""

    def __init__(
        self,
        context: Context,
        registration: WorkflowRegistration,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        super().__init__(context)
        self.registration = registration
        self.workflow = registration.workflow
        self.store = state_store(context.store, self.workflow.name)
        self.states = StateCodec(self.workflow, context.app.codec)
        self.name = streams.workflow_processor_name(context.app.name, self.workflow.name)
        self.inputs = WorkflowInputs(context.app, registration, self.name, self.log)
        self.filter = self.inputs.filter
        self.cache = InstanceCache(cache_size)
        self.handled = 0

    # -- the policy ---------------------------------------------------------------------------

    def handle(self, batch: Sequence[RecordedEvent]) -> Outcome:
        """Decide every input of ``batch``: the rows, the outbox appends, the skip records."""
        work: dict[str, _Work] = {}
        skips = Outcome(position=batch[-1].position)
        for event in batch:
            self.step(event, skips, lambda e: self._decide(e, work))
        writes = [
            StateWrite(
                stream,
                w.base_version,
                w.instance.version,
                self.states.encode(w.instance, [*w.handled, *w.added]),
            )
            for stream, w in work.items()
            if w.added
        ]
        appends = [StreamAppend(s, w.outbox, ANY) for s, w in work.items() if w.outbox]
        appends.extend(skips.appends)
        return StateOutcome(appends, skips.position, [lambda: self._remember(work)], states=writes)

    def resync(self, key: str) -> None:
        """After a version conflict on ``key``: forget its cached row (it is read again)."""
        self.cache.discard(key)

    def _write(self, outcome: Outcome) -> None:
        if not isinstance(outcome, StateOutcome) or not outcome.states:
            super()._write(outcome)
            return
        # The leases are checked in the transaction (fencing): a process that lost one while
        # paused commits nothing.
        fence = self.fence(outcome, writes=True)
        assert fence is not None  # a commit with writes has a fence, or raises
        checkpoints, leases = fence
        self.store.commit_states(
            outcome.states, outcome.appends, checkpoints=checkpoints, leases=leases
        )
        self._written(outcome)

    def _remember(self, work: dict[str, _Work]) -> None:
        for stream, w in work.items():
            w.handled.update(w.added)
            self.cache.put(stream, CachedInstance(w.instance, w.handled))

    # -- one input ----------------------------------------------------------------------------

    def _decide(self, event: RecordedEvent, work: dict[str, _Work]) -> None:
        routed = self.inputs.route(event, traced=self.traced)
        if routed is None:
            return
        stream = routed.stream
        w = work.get(stream)
        if w is None:
            entry = self._load(stream)
            w = _Work(
                base_version=entry.instance.version, instance=entry.instance, handled=entry.handled
            )
            work[stream] = w
        # The row holds every handled id: the ids in memory are complete, nothing is looked up.
        if self.inputs.already_handled(routed, w):
            return
        events = self.inputs.decide(w.instance, routed)
        if not events:
            return  # nothing to record (a cancel request for an instance not begun)
        outbox = call_user("encoding what decide returned", self._outbox, routed, events)
        instance = call_user("evolving", advance, self.workflow, w.instance, events)
        # A state that cannot be stored skips this input here, not the batch at commit time.
        call_user("encoding the state", self.states.encode, instance)
        w.instance = instance
        w.added.add(routed.message_id)
        w.outbox.extend(outbox)
        self.handled += 1

    def _outbox(self, routed: Routed, events: list[WorkflowEvent[Any, Any]]) -> list[NewEvent]:
        """The events of an input's decision that go to the outbox: all but the input."""
        codec = self.context.app.codec
        stream, cause = routed.stream, routed.message_id
        key = partitions.stream_key(stream)  # the instance's partition: its commands, timers
        new: list[NewEvent] = []
        for index, wf_event in enumerate(events):
            if isinstance(wf_event, Received | InitiatedBy):
                continue
            new_id = event_id(stream, cause, index)
            type_name, data = codec.encode_event(wf_event)
            recorded_at = self.context.clock.now() if isinstance(wf_event, Scheduled) else None
            event_metadata = telemetry.inject(
                Metadata(
                    message_id=str(new_id),
                    correlation_id=routed.instance_id,
                    causation_id=cause,
                    recorded_at=recorded_at,
                    workflow_version=began_version(self.workflow, wf_event),
                )
            )
            encoded = codec.encode_metadata(event_metadata)
            new.append(NewEvent(new_id, type_name, data, encoded, partition_key=key))
        return new

    def _load(self, stream: str) -> CachedInstance:
        """The instance of ``stream``: the cached entry, else its row, else a new one."""
        entry = self.cache.get(stream)
        if entry is not None:
            return entry
        row = self.store.load_state(stream)
        if row is None:
            return CachedInstance(start(self.workflow), HandledIds())
        try:
            restored = self.states.decode(row.data)
        except DecodeError as exc:
            # The row is the only copy of the state: skipping the input keeps it for a fix.
            raise Skip(f"the state row of {stream} does not decode: {exc}") from exc
        if restored.instance.version != row.version:
            raise Skip(f"the state row of {stream} holds version {restored.instance.version}")
        return CachedInstance(restored.instance, HandledIds(restored.handled))
