"""The workflow processor: inputs in, decisions recorded in each instance's stream.

For each input (chosen by event type): route it to an instance id, get the instance (from the
LRU cache, else by folding its stream), skip it if the instance already handled its message id,
decide and translate (:func:`decider.handle`), and append the events with the instance's
revision as the expected revision. A batch's appends and the checkpoint go in one transaction
where the store allows (group commit); two inputs for one instance in a batch chain (the second
is decided on the state after the first, and the stream gets one append of both). If the batch
fails a revision check (another writer), the inputs are redone one by one, each reloading the
changed instance and retrying a bounded number of times with jitter.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import attrs

from decider import (
    InitiatedBy,
    Instance,
    Lifecycle,
    Metadata,
    Received,
    Scheduled,
    WorkflowEvent,
    advance,
    event_id,
    handle,
    start,
)
from decider.processors.app import WorkflowRegistration, failed_stream_workflow
from decider.processors.base import Context, Processor
from decider.processors.cache import CachedInstance, InstanceCache
from decider.processors.errors import ConflictsExhausted
from decider.stores.decoding import decode_event
from decider.stores.errors import CorruptEvent, WrongExpectedVersion
from decider.stores.protocol import NO_STREAM, Filter, NewEvent, RecordedEvent, StreamAppend

COMMAND_FAILED = "decider.CommandFailed"
"""The stored type name of :class:`~decider.processors.messages.CommandFailed`."""

MAX_CONFLICT_RETRIES = 5
"""How many times one input is re-decided after revision conflicts before giving up."""


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


class _Skip(Exception):
    """An input that cannot be handled; the reason goes to the skipped-inputs stream."""


class WorkflowProcessor(Processor):
    """Runs one workflow of an app: routes, folds, decides and appends, in batches."""

    def __init__(
        self, context: Context, registration: WorkflowRegistration, cache_size: int = 20_000
    ) -> None:
        super().__init__(context)
        self.registration = registration
        self.workflow = registration.workflow
        self.name = f"{context.app.name}.workflow.{self.workflow.name}"
        self.filter = Filter(event_types=tuple(sorted(registration.inputs)))
        self.cache = InstanceCache(cache_size)
        self.group_commits = 0
        self.conflicts = 0
        self.handled = 0
        self._random = random.Random()

    # -- batches --------------------------------------------------------------------------

    def process(self, batch: Sequence[RecordedEvent]) -> None:
        """Decide every input of ``batch`` and commit them with the checkpoint at once."""
        work: dict[str, _Work] = {}
        skips: list[StreamAppend] = []
        for event in batch:
            self._decide_into(event, work, skips)
        appends = self._appends(work, skips)
        try:
            self.commit(appends, batch[-1].position)
        except WrongExpectedVersion as exc:
            self.conflicts += 1
            self.log.info("%s: %s; redoing the batch input by input", self.name, exc)
            self._reload(exc.stream)
            for event in batch:
                self._one(event)
            return
        if len(appends) > 1 and self._transactional:
            self.group_commits += 1
        self._remember(work)

    def _one(self, event: RecordedEvent) -> None:
        """Handle one input on its own, reloading and retrying on a revision conflict."""
        for attempt in range(1, MAX_CONFLICT_RETRIES + 1):
            work: dict[str, _Work] = {}
            skips: list[StreamAppend] = []
            self._decide_into(event, work, skips)
            try:
                self.commit(self._appends(work, skips), event.position)
            except WrongExpectedVersion as exc:
                self.conflicts += 1
                self.log.info("%s: %s (attempt %d)", self.name, exc, attempt)
                self._reload(exc.stream)
                # Jitter, so competing writers do not collide again in lockstep.
                self.context.stop.wait(self._random.uniform(0, 0.002 * attempt))
                continue
            self._remember(work)
            return
        raise ConflictsExhausted(event.stream, MAX_CONFLICT_RETRIES)

    def _appends(self, work: dict[str, _Work], skips: list[StreamAppend]) -> list[StreamAppend]:
        appends = [
            StreamAppend(stream, w.events, NO_STREAM if w.base_revision < 0 else w.base_revision)
            for stream, w in work.items()
            if w.events
        ]
        appends.extend(skips)
        return appends

    def _remember(self, work: dict[str, _Work]) -> None:
        for stream, w in work.items():
            if w.instance.status is Lifecycle.COMPLETED:
                # Nothing more is decided for it: an input that still comes is recorded as
                # Ignored after a read of its stream. The cache keeps the instances that work.
                self.cache.discard(stream)
                continue
            w.handled.update(w.added)
            self.cache.put(stream, CachedInstance(w.instance, w.handled))

    # -- one input ------------------------------------------------------------------------

    def _decide_into(
        self, event: RecordedEvent, work: dict[str, _Work], skips: list[StreamAppend]
    ) -> None:
        """Decide ``event`` against its instance's state in ``work``, adding what to append."""
        try:
            self._decide(event, work)
        except _Skip as skip:
            skips.append(self.skip(event, str(skip)))

    def _decide(self, event: RecordedEvent, work: dict[str, _Work]) -> None:
        if event.type == COMMAND_FAILED and failed_stream_workflow(event.stream) != (
            self.workflow.name
        ):
            return  # a failure fed back to another workflow's instance
        codec = self.context.app.codec
        metadata = self._metadata(event)
        try:
            message = codec.decode_message(event.type, event.data)
        except Exception as exc:
            raise _Skip(f"cannot decode the input: {exc}") from exc
        try:
            instance_id = self.registration.inputs[event.type].route(message, metadata)
        except Exception as exc:
            raise _Skip(f"the route raised {exc!r}") from exc
        if not isinstance(instance_id, str) or not instance_id:
            raise _Skip(f"the route returned {instance_id!r}, not an instance id")
        stream = self.workflow.stream(instance_id)
        w = work.get(stream)
        if w is None:
            entry = self._load(stream)
            w = _Work(entry.revision, entry.instance, entry.handled)
            work[stream] = w
        for fresh in (False, True):
            if metadata.message_id in w.handled or metadata.message_id in w.added:
                self.log.debug("%s: %s already handled %s", self.name, stream, metadata.message_id)
                return
            try:
                events = handle(self.workflow, w.instance, message)
                new = self._encode(stream, instance_id, events, event, message, metadata)
                instance = advance(self.workflow, w.instance, events)
                break
            except Exception as exc:
                # A skip is recorded without a revision check, so it must not rest on a stale
                # state: if another writer moved the instance on, decide again on that.
                if fresh or not self._caught_up(stream, w):
                    raise _Skip(f"deciding on the input raised {exc!r}") from exc
        w.instance = instance
        w.added.add(metadata.message_id)
        w.events.extend(new)
        self.handled += 1

    def _metadata(self, event: RecordedEvent) -> Metadata:
        if not event.metadata:
            return Metadata(message_id=str(event.id))
        try:
            doc = json.loads(event.metadata)
            message_id = doc["message_id"]
            correlation_id = doc.get("correlation_id")
        except Exception as exc:
            raise _Skip(f"cannot decode the input's metadata: {exc!r}") from exc
        if not isinstance(message_id, str):
            raise _Skip("the input's metadata has no message_id string")
        return Metadata(message_id=message_id, correlation_id=correlation_id)

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
                type_name, data = f"{kind}:{source.type}", source.data
            else:
                type_name, data = codec.encode_event(wf_event)
            recorded_at = self.context.clock.now() if isinstance(wf_event, Scheduled) else None
            event_metadata = Metadata(
                message_id=str(new_id),
                correlation_id=instance_id,
                causation_id=cause,
                recorded_at=recorded_at,
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
            raise _Skip(f"the instance stream cannot be folded: {exc}") from exc

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

    def _reload(self, stream: str) -> None:
        """After a conflict on ``stream``: catch its cached entry up, or drop it."""
        if not stream.startswith(self.registration.stream_prefix):
            return
        try:
            self._refresh(stream)
        except CorruptEvent:
            self.cache.discard(stream)

    def _refresh(self, stream: str) -> CachedInstance:
        """Bring ``stream``'s entry up to date by reading only the events after it."""
        entry = self.cache.get(stream) or CachedInstance(start(self.workflow), set())
        records = self.context.store.read_stream(stream, entry.instance.version)
        if not records:
            return entry
        codec = self.context.app.codec
        events = [decode_event(codec, record) for record in records]
        handled = set(entry.handled)
        for record in records:
            cause = _causation(record)
            if cause is not None:
                handled.add(cause)
        fresh = CachedInstance(advance(self.workflow, entry.instance, events), handled)
        self.cache.put(stream, fresh)
        return fresh


def _causation(record: RecordedEvent) -> str | None:
    try:
        cause = json.loads(record.metadata).get("causation_id") if record.metadata else None
    except (ValueError, AttributeError):
        return None
    return cause if isinstance(cause, str) else None
