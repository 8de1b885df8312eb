"""The workflow processor's policy: inputs in, decisions recorded in each instance's stream.

For each input (chosen by event type): route it to an instance id, get the instance (from the
LRU cache, else by folding its stream), skip it if the instance already handled its message id,
decide and translate (:func:`decider.handle`), and append the events with the instance's
revision as the expected revision. Two inputs for one instance in a batch chain (the second is
decided on the state after the first, and the stream gets one append of both). Committing, the
conflict loop (each input redone on its reloaded instance) and the skip records belong to the
engine (:mod:`decider.processors.engine.base`).

Decoding, routing (cancel requests included), deduplication and deciding are shared with the
state-stored variant (:mod:`decider.processors.workflows.deciding`). An instance keeps the ids of
its latest :data:`~decider.processors.workflows.cache.RECENT_IDS` inputs in memory (and a snapshot
keeps none): on a store that is an :class:`~decider.stores.protocol.IdLookupStore`, an input that
is not among them is looked up by its decision's first event id, so a redelivered input is
recognised however old it is.

Lifecycles: an instance that ends (completed, failed or cancelled) leaves the cache, and an
input that still comes is recorded as ``Ignored`` (:func:`decider.handle`). The ``Began``
event of a workflow with a ``version`` records it in its metadata (:func:`decider.began_version`).

Generations: an instance that was forked (:mod:`decider.processors.client.forking`) ends with a
:class:`~decider.processors.app.messages.ForkMark`. When a stream read to load or catch up an
instance ends with one, the instance's later inputs go to the generation it names (and on, if
that one was forked too), remembered for the processor's life; an input caused by a command or
timer of an earlier generation that the new one does not reuse is skipped. An instance never
forked costs one dict lookup per input while some instance was found forked, and one truth
test of an empty dict otherwise.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import attrs

from decider import (
    Began,
    InitiatedBy,
    Received,
    Scheduled,
    WorkflowEvent,
    advance,
    began_version,
    event_id,
    start,
)
from decider.codec import Kind, stored_type
from decider.processors.app import decoding, streams
from decider.processors.app.definition import WorkflowRegistration
from decider.processors.app.messages import ForkMark
from decider.processors.engine import telemetry
from decider.processors.engine.base import Context, Outcome, Skip
from decider.processors.engine.failures import UserCodeFailed, call_user, user_failure
from decider.processors.group import partitions
from decider.processors.workflows.cache import (
    DEFAULT_CACHE_SIZE,
    RECENT_IDS,
    CachedInstance,
    HandledIds,
    InstanceCache,
)
from decider.processors.workflows.deciding import DecidingProcessor, Routed, Work, WorkflowInputs
from decider.processors.workflows.fresh_streams import FreshStreams
from decider.processors.workflows.snapshots import Snapshots
from decider.stores.errors import CorruptEvent
from decider.stores.protocol import (
    NO_STREAM,
    IdLookupStore,
    NewEvent,
    PipelinedStore,
    RecordedEvent,
    StreamAppend,
)

_COPIED = (Received, InitiatedBy)
"""The workflow events that carry their input as it is (a tuple: ``isinstance`` of a union
is slower)."""

_PREFETCH_AT_ONCE = 64
"""Stream reads a workflow processor has in flight at once (:meth:`WorkflowProcessor._prefetch`)."""


@attrs.define(kw_only=True)
class _Work(Work):
    """One instance's part of a batch: where it started, where it is now, what to append."""

    base_revision: int
    events: list[NewEvent] = attrs.Factory(list)


class WorkflowProcessor(DecidingProcessor):
    """Runs one workflow of an app: routes, folds, decides and appends, in batches."""

    def __init__(
        self,
        context: Context,
        registration: WorkflowRegistration,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        super().__init__(context)
        self.registration = registration
        self.workflow = registration.workflow
        self.name = streams.workflow_processor_name(context.app.name, self.workflow.name)
        self.inputs = WorkflowInputs(context.app, registration, self.name, self.log)
        self.filter = self.inputs.filter
        self.cache = InstanceCache(cache_size)
        self._prefetched: dict[str, list[RecordedEvent]] = {}
        self.fresh = FreshStreams()
        self._presumed: dict[str, str] = {}  # the last batch's streams presumed new: input type
        self._instance_prefix = streams.instance_prefix(self.workflow.name)
        self.snapshots = Snapshots(self.workflow, context.app.codec, context.store, self.log)
        store = context.store
        self._ids: IdLookupStore | None = store if isinstance(store, IdLookupStore) else None
        # Without a store to look ids up in, an instance keeps every id it handled.
        self._recent_ids = None if self._ids is None else RECENT_IDS
        self.group_commits = 0
        self.handled = 0
        self._forks: dict[str, tuple[ForkMark, frozenset[str]]] = {}
        """Each forked instance's stream (generation 1): the mark that ended its newest
        generation read so far, and the ids it made void."""

    # -- in a group -----------------------------------------------------------------------

    def on_leases_changed(self) -> None:
        """Forget every cached instance: a partition held before may have moved on elsewhere."""
        self.cache = InstanceCache(self.cache.size)

    # -- the policy ---------------------------------------------------------------------------

    def handle(self, batch: Sequence[RecordedEvent]) -> Outcome:
        """Decide every input of ``batch``: the instances' appends, then the skip records."""
        work: dict[str, _Work] = {}
        skips = Outcome(position=batch[-1].position)
        self._prefetch(batch)
        decide = functools.partial(self._decide, work=work)
        try:
            for event in batch:
                self.step(event, skips, decide)
        finally:
            self._prefetched.clear()
        appends = [
            StreamAppend(stream, w.events, NO_STREAM if w.base_revision < 0 else w.base_revision)
            for stream, w in work.items()
            if w.events
        ]
        appends.extend(skips.appends)
        grouped = len(appends) > 1 and self._transactional
        return Outcome(appends, skips.position, [lambda: self._remember(work, grouped=grouped)])

    def _prefetch(self, batch: Sequence[RecordedEvent]) -> None:
        """On a :class:`~decider.stores.protocol.PipelinedStore` (EventStoreDB), read the
        streams of the batch's instances that are not cached all at once: one round trip, not
        one per new instance; a stream whose input type keeps beginning new instances is
        presumed new and not read at all (:mod:`decider.processors.workflows.fresh_streams`),
        here or, on every store, in :meth:`_load`. Only :meth:`_load` takes what is read,
        within this batch."""
        self._presumed = {}
        if not self._pipelined:
            return
        prefix = self._instance_prefix
        wanted: dict[str, str] = {}  # stream: the type of its first input in the batch
        for event in batch:
            stream = self.partition_key(event)
            if stream not in wanted and stream.startswith(prefix) and stream not in self.cache:
                wanted[stream] = event.type
        if len(wanted) < 2:
            return
        fresh = self.fresh
        to_read = []
        for stream, input_type in wanted.items():
            if fresh.presumes(input_type):
                self._presumed[stream] = input_type
                self._prefetched[stream] = []
            else:
                to_read.append(stream)
        fresh.presumed += len(self._presumed)
        store = self.context.store
        assert isinstance(store, PipelinedStore)
        for first in range(0, len(to_read), _PREFETCH_AT_ONCE):
            part = to_read[first : first + _PREFETCH_AT_ONCE]
            read = store.read_each([(stream, 0) for stream in part])
            for stream, records in zip(part, read, strict=True):
                fresh.read(wanted[stream], found=bool(records))
                self._prefetched[stream] = records

    def resync(self, stream: str) -> None:
        """After a conflict on ``stream``: catch its cached entry up, or drop it. A stream
        that was presumed new existed: its input type is read again before it is presumed."""
        input_type = self._presumed.pop(stream, None)
        if input_type is not None:
            self.fresh.wrong(input_type)
        if streams.workflow_of(stream) != self.workflow.name:
            return
        try:
            self._refresh(stream)
        except CorruptEvent:
            self.cache.discard(stream)

    def _remember(self, work: dict[str, _Work], *, grouped: bool) -> None:
        self.group_commits += grouped
        snapshots = self.snapshots if self.snapshots.enabled else None
        for stream, w in work.items():
            if snapshots is not None:
                snapshots.committed(stream, w.base_revision + 1, w.instance)
            if w.instance.status.terminal:
                # Nothing more is decided for it: an input that still comes is recorded as
                # Ignored after a read of its stream. The cache keeps the instances that work.
                self.cache.discard(stream)
                continue
            w.handled.update(w.added)
            self.cache.put(stream, CachedInstance(w.instance, w.handled))

    # -- one input ------------------------------------------------------------------------

    def _decide(self, event: RecordedEvent, work: dict[str, _Work]) -> None:
        """Decide ``event`` against its instance's state in ``work``, adding what to append."""
        traced = self.traced
        routed = self.inputs.route(event, traced=traced)
        if routed is None:
            return
        if self._forks:
            routed = self._to_generation(routed, routed.stream)
        stream = routed.stream
        w = work.get(stream)
        if w is None:
            entry = self._load(stream, routed.event.type)
            if self._forks and entry.instance.status.terminal:
                moved = self._to_generation(routed, streams.generation_of(stream)[0])
                if moved.stream != stream:  # found forked just now: decide in the generation
                    self._decide(event, work)
                    return
            w = _Work(base_revision=entry.revision, instance=entry.instance, handled=entry.handled)
            work[stream] = w
        if traced:
            telemetry.annotate("load", {"decider.revision": w.base_revision})
        for fresh in (False, True):
            if self.inputs.already_handled(routed, w, self._lookup):
                return
            try:
                events = self.inputs.decide(w.instance, routed)
                # User code in a try of its own each: no call_user frame per input.
                try:
                    new = self._encode(routed, events)
                except BaseException as exc:
                    raise user_failure("encoding what decide returned", exc) from exc
                try:
                    instance = advance(self.workflow, w.instance, events)
                except BaseException as exc:
                    raise user_failure("evolving", exc) from exc
                break
            except UserCodeFailed:
                # A skip is recorded without a revision check, so it must not rest on a stale
                # state: if another writer moved the instance on, decide again on that.
                if fresh or not self._caught_up(stream, w):
                    raise
        if traced:
            telemetry.annotate("decide", {"decider.events": len(new)})
        if not new:
            return  # nothing to record (a cancel request for an instance not begun)
        w.instance = instance
        w.added.add(routed.message_id)
        w.events.extend(new)
        self.handled += 1

    def _to_generation(self, routed: Routed, instance: str) -> Routed:
        """``routed`` sent on to the newest generation of its instance (whose own stream is
        ``instance``), if it was forked; :class:`~decider.processors.engine.base.Skip` if a
        command or timer of an earlier generation that the new one does not reuse caused it."""
        found = self._forks.get(instance)
        if found is None or found[0].forked_to == routed.stream:
            return routed
        mark, void = found
        cause = routed.metadata.causation_id
        if cause is not None and cause in void:
            raise Skip(
                f"caused by {cause}, a command or timer of a generation of {mark.instance} "
                f"that was forked ({mark.reason}): the newest generation, {mark.forked_to}, "
                "does not reuse it"
            )
        return attrs.evolve(routed, stream=mark.forked_to)

    def _lookup(self, stream: str, message_id: str) -> bool:
        """Whether ``stream`` holds the decision on input ``message_id`` (its first event)."""
        assert self._ids is not None  # only asked when the ids in memory are incomplete
        first = event_id(stream, message_id, 0)
        return first in self._ids.stored_ids(stream, [first])

    def _encode(self, routed: Routed, events: list[WorkflowEvent[Any, Any]]) -> list[NewEvent]:
        codec = self.context.app.codec
        stream, instance_id, metadata = routed.stream, routed.instance_id, routed.metadata
        source, message = routed.event, routed.message
        # The stored input can be copied as it is when it decoded without an upcaster.
        reuse = codec.registry.name_of(type(message)) == source.type
        cause = metadata.message_id
        parent, state = (
            telemetry.trace_fields() if telemetry.current_context() else telemetry.NO_TRACE
        )
        key = partitions.stream_key(stream)  # the instance's partition: its commands, timers
        # Each event's metadata differs only by its id (but on Scheduled and Began): the rest
        # is written once per input.
        after_id = codec.metadata_after_id(
            correlation_id=instance_id, causation_id=cause, traceparent=parent, tracestate=state
        )
        new: list[NewEvent] = []
        for index, wf_event in enumerate(events):
            new_id = event_id(stream, cause, index)
            if reuse and isinstance(wf_event, _COPIED) and wf_event.message is message:
                kind = Kind.RECEIVED if isinstance(wf_event, Received) else Kind.INITIATED_BY
                type_name, data = stored_type(kind, source.type), source.data
            else:
                type_name, data = codec.encode_event(wf_event)
            if isinstance(wf_event, Scheduled) or type(wf_event) is Began:
                event_metadata = codec.metadata_bytes(
                    str(new_id),
                    correlation_id=instance_id,
                    causation_id=cause,
                    recorded_at=(
                        self.context.clock.now() if isinstance(wf_event, Scheduled) else None
                    ),
                    # Recorded on Began only (asked there, not on every event).
                    workflow_version=(
                        began_version(self.workflow, wf_event) if type(wf_event) is Began else None
                    ),
                    traceparent=parent,
                    tracestate=state,
                )
            else:
                event_metadata = codec.metadata_of_event_id(new_id, after_id)
            new.append(NewEvent(new_id, type_name, data, event_metadata, partition_key=key))
        return new

    # -- instances ------------------------------------------------------------------------

    def _load(self, stream: str, input_type: str) -> CachedInstance:
        """The instance of ``stream``: the cached entry, else folded from the stream (what
        :meth:`_prefetch` read of it, if it did), else presumed new if inputs of
        ``input_type`` keep beginning new instances (not read: see
        :mod:`decider.processors.workflows.fresh_streams`)."""
        entry = self.cache.get(stream)
        if entry is not None:
            return entry
        prefetched = self._prefetched.pop(stream, None)
        learn = prefetched is None and stream.startswith(self._instance_prefix)
        if learn and self.fresh.presumes(input_type):
            self._presumed[stream] = input_type
            self.fresh.presumed += 1
            prefetched, learn = [], False
        try:
            entry = self._refresh(stream, prefetched)
        except CorruptEvent as exc:
            raise Skip(f"the instance stream cannot be folded: {exc}") from exc
        if learn:
            self.fresh.read(input_type, found=entry.instance.version > 0)
        return entry

    def _forked(self, record: RecordedEvent) -> None:
        """Remember the fork ``record`` marks (the newest generation of its instance)."""
        mark = decoding.fork_mark(self.context.app.codec, record)
        assert mark is not None
        self._forks[mark.instance] = (mark, frozenset(mark.void))

    def _caught_up(self, stream: str, w: _Work) -> bool:
        """Bring ``w`` up to the stored stream, if it has nothing of this batch to append and
        the stream moved on since it was loaded; whether it changed."""
        if w.events:
            return False
        try:
            entry = self._refresh(stream)
        except CorruptEvent:
            return False
        if entry.revision == w.base_revision:
            return False
        w.base_revision, w.instance, w.handled = entry.revision, entry.instance, entry.handled
        return True

    def _refresh(
        self, stream: str, prefetched: list[RecordedEvent] | None = None
    ) -> CachedInstance:
        """Bring ``stream``'s entry up to date by reading only the events after it (taking
        them from ``prefetched``, the whole stream read at the batch's start, if given)."""
        entry = self.cache.get(stream)
        if entry is None:
            restored = self.snapshots.restore(stream)
            entry = CachedInstance(
                start(self.workflow) if restored is None else restored,
                # A snapshot keeps no ids: those of the inputs before it are looked up.
                HandledIds(limit=self._recent_ids, complete=restored is None),
            )
        version = entry.instance.version
        if prefetched is None:
            records = self.context.store.read_stream(stream, version)
        else:
            records = [record for record in prefetched if record.revision >= version]
        if not records:
            return entry
        codec = self.context.app.codec
        if decoding.is_fork_mark(records[-1]):
            self._forked(records[-1])
        events = [decoding.decode_event(codec, record) for record in records]
        handled = entry.handled.copy()
        handled.update(
            cause
            for cause in (decoding.causation_of(codec, record) for record in records)
            if cause is not None
        )
        instance = call_user("evolving", advance, self.workflow, entry.instance, events)
        fresh = CachedInstance(instance, handled)
        self.cache.put(stream, fresh)
        return fresh
