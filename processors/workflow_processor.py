"""The workflow processor's policy: inputs in, decisions recorded in each instance's stream.

For each input (chosen by event type): route it to an instance id, get the instance (from the
LRU cache, else by folding its stream), skip it if the instance already handled its message id,
decide and translate (:func:`decider.handle`), and append the events with the instance's
revision as the expected revision. Two inputs for one instance in a batch chain (the second is
decided on the state after the first, and the stream gets one append of both). Committing, the
conflict loop (each input redone on its reloaded instance) and the skip records belong to the
engine (:mod:`decider.processors.base`).

Lifecycles: an instance that ends (completed, failed or cancelled) leaves the cache, and an
input that still comes is recorded as ``Ignored`` (:func:`decider.handle`). Every workflow
processor also reads ``decider.CancelRequested``, but only from the cancel streams of its own
instances (``decider-cancel-<instance stream>``, written by :meth:`App.cancel
<decider.processors.app.App.cancel>` and ``decider cancel``): the request goes to the instance
the stream names, through :func:`decider.handle_cancel` (``decide`` gets it if the workflow
lists it among its inputs, else the instance is cancelled at once). The ``Began`` event of a
workflow with a ``version`` records it in its metadata (:func:`decider.began_version`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from decider import (
    REGISTRY,
    CancelRequested,
    InitiatedBy,
    Instance,
    Metadata,
    Received,
    Scheduled,
    WorkflowEvent,
    advance,
    began_version,
    event_id,
    handle,
    handle_cancel,
    start,
)
from decider.codec import stored_type
from decider.processors import decoding, streams, telemetry
from decider.processors.app import WorkflowRegistration
from decider.processors.base import Context, Outcome, Processor, Skip
from decider.processors.cache import CachedInstance, InstanceCache
from decider.processors.failures import UserCodeFailed, call_user
from decider.processors.messages import COMMAND_FAILED
from decider.processors.snapshots import Snapshots
from decider.stores.errors import CorruptEvent
from decider.stores.protocol import NO_STREAM, NewEvent, RecordedEvent, StreamAppend

CANCEL_TYPE = REGISTRY.name_of(CancelRequested)
"""The stored type name of :class:`decider.CancelRequested`, which every workflow processor
reads (from its instances' cancel streams only)."""


@attrs.define
class _Work:
    """One instance's part of a batch: where it started, where it is now, what to append."""

    base_revision: int
    instance: Instance[Any]
    handled: set[str]
    """The cache entry's own set, read-only until the batch commits: copying it would cost
    time in proportion to the instance's history on every input."""
    events: list[NewEvent] = attrs.Factory(list)
    added: set[str] = attrs.Factory(set)
    """The message ids handled in this batch, merged into ``handled`` once committed."""


class WorkflowProcessor(Processor):
    """Runs one workflow of an app: routes, folds, decides and appends, in batches."""

    partitioned = True

    def __init__(
        self, context: Context, registration: WorkflowRegistration, cache_size: int = 20_000
    ) -> None:
        super().__init__(context)
        self.registration = registration
        self.workflow = registration.workflow
        self.name = streams.workflow_processor_name(context.app.name, self.workflow.name)
        self.filter = decoding.workflow_filter({*registration.inputs, CANCEL_TYPE})
        self._cancel_prefix = streams.cancel_stream(streams.instance_prefix(self.workflow.name))
        self._decides_cancel = CANCEL_TYPE in registration.inputs
        self.cache = InstanceCache(cache_size)
        self.snapshots = Snapshots(self.workflow, context.app.codec, context.store, self.log)
        self.group_commits = 0
        self.handled = 0

    # -- in a group -----------------------------------------------------------------------

    def partition_key(self, event: RecordedEvent) -> str:
        """The instance stream ``event`` is routed to (routing is pure): its partition's key.
        An input that cannot be routed belongs to its own stream's partition (and is skipped
        there)."""
        try:
            message = decoding.decode_message(self.context.app.codec, event)
            metadata = decoding.input_metadata(self.context.app.codec, event)
            instance_id = self.registration.inputs[event.type].route(message, metadata)
            return streams.instance_stream(self.workflow.name, instance_id)  # type: ignore[arg-type]
        except Exception:  # the policy records why, in the partition that gets it
            return event.stream

    def on_leases_changed(self) -> None:
        """Forget every cached instance: a partition held before may have moved on elsewhere."""
        self.cache = InstanceCache(self.cache.size)

    # -- the policy ---------------------------------------------------------------------------

    def handle(self, batch: Sequence[RecordedEvent]) -> Outcome:
        """Decide every input of ``batch``: the instances' appends, then the skip records."""
        work: dict[str, _Work] = {}
        skips = Outcome(position=batch[-1].position)
        for event in batch:
            self.step(event, skips, lambda e: self._decide(e, work))
        appends = [
            StreamAppend(stream, w.events, NO_STREAM if w.base_revision < 0 else w.base_revision)
            for stream, w in work.items()
            if w.events
        ]
        appends.extend(skips.appends)
        grouped = len(appends) > 1 and self._transactional
        return Outcome(appends, skips.position, [lambda: self._remember(work, grouped=grouped)])

    def resync(self, stream: str) -> None:
        """After a conflict on ``stream``: catch its cached entry up, or drop it."""
        if streams.workflow_of(stream) != self.workflow.name:
            return
        try:
            self._refresh(stream)
        except CorruptEvent:
            self.cache.discard(stream)

    def _remember(self, work: dict[str, _Work], *, grouped: bool) -> None:
        self.group_commits += grouped
        for stream, w in work.items():
            self.snapshots.committed(stream, w.base_revision + 1, w.instance, w.handled, w.added)
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
        if event.type == COMMAND_FAILED and streams.failed_stream_workflow(event.stream) != (
            self.workflow.name
        ):
            return  # a failure fed back to another workflow's instance
        cancel = event.type == CANCEL_TYPE
        if cancel and not event.stream.startswith(self._cancel_prefix):
            return  # a request for another workflow's instance, or not from a cancel stream
        codec = self.context.app.codec
        try:
            metadata = decoding.input_metadata(codec, event)
        except CorruptEvent as exc:
            raise Skip(f"cannot decode the input's metadata: {exc.reason}") from exc
        try:
            message = decoding.decode_message(codec, event)
        except CorruptEvent as exc:
            raise Skip(f"cannot decode the input: {exc.reason}") from exc
        if cancel:
            # The cancel stream names the instance: no route is asked.
            instance_id = event.stream[len(self._cancel_prefix) :]
        else:
            route = self.registration.inputs[event.type].route
            routed = call_user("the route", route, message, metadata)
            if not isinstance(routed, str) or not routed:
                raise Skip(f"the route returned {routed!r:.200}, not an instance id")
            instance_id = routed
        stream = streams.instance_stream(self.workflow.name, instance_id)
        telemetry.annotate(
            "route", {"decider.workflow": self.workflow.name, "decider.instance_id": instance_id}
        )
        w = work.get(stream)
        if w is None:
            entry = self._load(stream)
            w = _Work(entry.revision, entry.instance, entry.handled)
            work[stream] = w
        telemetry.annotate("load", {"decider.revision": w.base_revision})
        for fresh in (False, True):
            if metadata.message_id in w.handled or metadata.message_id in w.added:
                self.log.debug("%s: %s already handled %s", self.name, stream, metadata.message_id)
                return
            try:
                events = self._handle(w.instance, message, cancel=cancel)
                new = call_user(
                    "encoding what decide returned",
                    self._encode,
                    stream,
                    instance_id,
                    events,
                    event,
                    message,
                    metadata,
                )
                instance = call_user("evolving", advance, self.workflow, w.instance, events)
                break
            except UserCodeFailed:
                # A skip is recorded without a revision check, so it must not rest on a stale
                # state: if another writer moved the instance on, decide again on that.
                if fresh or not self._caught_up(stream, w):
                    raise
        telemetry.annotate("decide", {"decider.events": len(new)})
        w.instance = instance
        w.added.add(metadata.message_id)
        w.events.extend(new)
        self.handled += 1

    def _handle(self, instance: Instance[Any], message: Any, *, cancel: bool) -> list[Any]:
        """The events ``message`` adds to ``instance`` (a cancel request's, if ``cancel``)."""
        if not cancel:
            return call_user("deciding on the input", handle, self.workflow, instance, message)
        if not isinstance(message, CancelRequested):
            raise Skip(f"a cancel request decoded as {type(message).__name__}")
        workflow, decides = self.workflow, self._decides_cancel
        return call_user(
            "deciding on the cancel request",
            lambda: handle_cancel(workflow, instance, message, decides=decides),
        )

    def _encode(  # noqa: PLR0917
        self,
        stream: str,
        instance_id: str,
        events: list[WorkflowEvent[Any, Any]],
        source: RecordedEvent,
        message: object,
        metadata: Metadata,
    ) -> list[NewEvent]:
        codec = self.context.app.codec
        # The stored input can be copied as it is when it decoded without an upcaster.
        reuse = codec.registry.name_of(type(message)) == source.type
        cause = metadata.message_id
        new: list[NewEvent] = []
        for index, wf_event in enumerate(events):
            new_id = event_id(stream, cause, index)
            if (
                reuse
                and isinstance(wf_event, Received | InitiatedBy)
                and wf_event.message is message
            ):
                kind = "Received" if isinstance(wf_event, Received) else "InitiatedBy"
                type_name, data = stored_type(kind, source.type), source.data
            else:
                type_name, data = codec.encode_event(wf_event)
            recorded_at = self.context.clock.now() if isinstance(wf_event, Scheduled) else None
            event_metadata = telemetry.inject(
                Metadata(
                    message_id=str(new_id),
                    correlation_id=instance_id,
                    causation_id=cause,
                    recorded_at=recorded_at,
                    workflow_version=began_version(self.workflow, wf_event),
                )
            )
            new.append(NewEvent(new_id, type_name, data, codec.encode_metadata(event_metadata)))
        return new

    # -- instances ------------------------------------------------------------------------

    def _load(self, stream: str) -> CachedInstance:
        """The instance of ``stream``: the cached entry, else folded from the stream."""
        entry = self.cache.get(stream)
        if entry is not None:
            return entry
        try:
            return self._refresh(stream)
        except CorruptEvent as exc:
            raise Skip(f"the instance stream cannot be folded: {exc}") from exc

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

    def _refresh(self, stream: str) -> CachedInstance:
        """Bring ``stream``'s entry up to date by reading only the events after it."""
        entry = (
            self.cache.get(stream)
            or self.snapshots.restore(stream)
            or CachedInstance(start(self.workflow), set())
        )
        records = self.context.store.read_stream(stream, entry.instance.version)
        if not records:
            return entry
        codec = self.context.app.codec
        events = [decoding.decode_event(codec, record) for record in records]
        handled = set(entry.handled)
        for record in records:
            cause = decoding.causation_of(codec, record)
            if cause is not None:
                handled.add(cause)
        instance = call_user("evolving", advance, self.workflow, entry.instance, events)
        fresh = CachedInstance(instance, handled)
        self.cache.put(stream, fresh)
        return fresh
