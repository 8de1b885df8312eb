"""One workflow's inputs: decoded, routed, deduplicated and decided.

What the event-sourced processor (:mod:`decider.processors.workflows.processor`) and the
state-stored one (:mod:`decider.processors.workflows.state_stored`) share; they differ only in how
an instance is loaded and what its decision writes (events to its stream, or a row and an outbox).

- **Inputs.** The workflow's registered inputs, and ``decider.CancelRequested`` from the cancel
  streams of its own instances (``decider-cancel-<instance stream>``, written by
  :meth:`App.cancel <decider.processors.client.app.App.cancel>` and ``decider cancel``). A
  cancel request goes to the instance its stream names (no route is asked) and is decided by
  :func:`decider.handle_cancel`: ``decide`` gets it if the workflow lists it among its inputs,
  else the instance is cancelled at once.
- **Deduplication.** An input whose message id the instance already handled is skipped. The
  ids in memory (:class:`~decider.processors.workflows.cache.HandledIds`) decide when they are
  complete; otherwise (a long history, an instance restored from a snapshot) an id that is not among
  them is looked up in the store: the first event an input's decision writes has the id
  ``event_id(instance stream, message id, 0)`` (:func:`decider.event_id`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

import attrs

from decider import (
    CancelRequested,
    Instance,
    Metadata,
    WorkflowEvent,
    handle,
    handle_cancel,
)
from decider.processors.app import decoding, streams
from decider.processors.app.definition import AppDefinition, WorkflowRegistration, by_correlation
from decider.processors.app.messages import CANCEL_TYPE, COMMAND_FAILED, ROUTED, InputRouted
from decider.processors.engine import telemetry
from decider.processors.engine.base import Processor, Skip
from decider.processors.engine.failures import call_user, user_failure
from decider.processors.group import partitions
from decider.processors.workflows.cache import HandledIds
from decider.stores.errors import CorruptEvent
from decider.stores.protocol import Filter, RecordedEvent


@attrs.frozen
class Routed:
    """An input decoded and routed to its instance."""

    event: RecordedEvent
    message: Any
    metadata: Metadata
    instance_id: str
    stream: str
    cancel: bool
    """Whether it is a cancel request (from the instance's cancel stream)."""
    message_id: str
    """The input's message id (its metadata's): what deduplication keys on."""


@attrs.define(kw_only=True)
class Work:
    """One instance's part of a batch, as far as deciding needs it (each processor adds what
    its decisions write)."""

    instance: Instance[Any]
    handled: HandledIds
    """The cache entry's own ids, read-only until the batch commits: copying them would cost
    time on every input."""
    added: set[str] = attrs.Factory(set)
    """The message ids handled in this batch, merged into ``handled`` once committed."""


Lookup = Callable[[str, str], bool]
"""``lookup(instance stream, message id)``: whether the store holds the input's decision."""


class WorkflowInputs:
    """Decodes, routes, deduplicates and decides one workflow's inputs."""

    def __init__(
        self,
        app: AppDefinition,
        registration: WorkflowRegistration,
        name: str,
        log: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        self.app = app
        self.registration = registration
        self.workflow = registration.workflow
        self.name = name
        self.log = log
        self.filter: Filter = decoding.workflow_filter({*registration.inputs, CANCEL_TYPE})
        self._cancel_prefix = streams.cancel_stream(streams.instance_prefix(self.workflow.name))
        self._decides_cancel = CANCEL_TYPE in registration.inputs
        self.looked_up = 0
        self._decoded: dict[UUID, tuple[Any, Metadata]] = {}
        """How many inputs were looked up in the store (the ids in memory could not tell)."""

    def partition_key(self, event: RecordedEvent) -> str:
        """The instance stream ``event`` is routed to (routing is pure). An input that cannot
        be routed belongs to its own stream's partition (and is skipped there).

        A cancel request's stream names its instance, and a :func:`by_correlation
        <decider.processors.app.definition.by_correlation>` route needs only the metadata: neither
        decodes the message. A message decoded here is kept for :meth:`route` until :meth:`forget`,
        so an input of a partition held is decoded once.
        """
        if event.type == CANCEL_TYPE and event.stream.startswith(self._cancel_prefix):
            return streams.instance_stream(
                self.workflow.name, event.stream[len(self._cancel_prefix) :]
            )
        try:
            route = self.registration.inputs[event.type].route
            metadata = decoding.input_metadata(self.app.codec, event)
            if route is by_correlation:
                instance_id = metadata.correlation_id
            else:
                message = decoding.decode_message(self.app.codec, event)
                self._decoded[event.id] = (message, metadata)
                instance_id = route(message, metadata)
            return streams.instance_stream(self.workflow.name, instance_id)  # type: ignore[arg-type]
        except Exception:  # the policy records why, in the partition that gets it
            return event.stream

    def forget(self) -> None:
        """Drop the messages :meth:`partition_key` decoded (at the end of each batch)."""
        self._decoded.clear()

    def route(self, event: RecordedEvent, *, traced: bool = True) -> Routed | None:
        """``event`` decoded and routed; ``None`` if it is not for this workflow's instances.
        ``traced``: whether the input has a span to annotate (see
        :attr:`~decider.processors.engine.base.Processor.traced`).

        Raises :class:`~decider.processors.engine.base.Skip` if it cannot be decoded or routed.
        """
        if event.type == ROUTED:
            return None  # a routing record for another workflow, or whose input is gone
        if event.type == COMMAND_FAILED and streams.failed_stream_workflow(event.stream) != (
            self.workflow.name
        ):
            return None  # a failure fed back to another workflow's instance
        cancel = event.type == CANCEL_TYPE
        if cancel and not event.stream.startswith(self._cancel_prefix):
            return None  # a request for another workflow's instance, or not from a cancel stream
        codec = self.app.codec
        decoded = self._decoded.pop(event.id, None)
        if decoded is not None:
            message, metadata = decoded
        else:
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
            try:
                routed = route(message, metadata)
            except BaseException as exc:
                raise user_failure("the route", exc) from exc
            if not isinstance(routed, str) or not routed:
                raise Skip(f"the route returned {routed!r:.200}, not an instance id")
            instance_id = routed
        stream = streams.instance_stream(self.workflow.name, instance_id)
        if traced:
            telemetry.annotate(
                "route",
                {"decider.workflow": self.workflow.name, "decider.instance_id": instance_id},
            )
        return Routed(event, message, metadata, instance_id, stream, cancel, metadata.message_id)

    def already_handled(self, routed: Routed, work: Work, lookup: Lookup | None = None) -> bool:
        """Whether ``work``'s instance already handled ``routed`` (logged when it did): by the
        ids in memory, else, when they are not complete, by ``lookup`` in the store."""
        message_id = routed.message_id
        if message_id in work.added or message_id in work.handled:
            found = True
        elif work.handled.complete or lookup is None:
            return False
        else:
            self.looked_up += 1
            found = lookup(routed.stream, message_id)
        if found:
            self.log.debug("%s: %s already handled %s", self.name, routed.stream, message_id)
        return found

    def decide(self, instance: Instance[Any], routed: Routed) -> list[WorkflowEvent[Any, Any]]:
        """The events ``routed`` adds to ``instance`` (:func:`decider.handle`, or
        :func:`decider.handle_cancel` for a cancel request); user code's failures are raised
        as :class:`~decider.processors.engine.failures.UserCodeFailed`."""
        message = routed.message
        if not routed.cancel:
            try:
                return handle(self.workflow, instance, message)
            except BaseException as exc:
                raise user_failure("deciding on the input", exc) from exc
        if not isinstance(message, CancelRequested):
            raise Skip(f"a cancel request decoded as {type(message).__name__}")
        workflow, decides = self.workflow, self._decides_cancel
        return call_user(
            "deciding on the cancel request",
            lambda: handle_cancel(workflow, instance, message, decides=decides),
        )


class DecidingProcessor(Processor):
    """What both workflow processors share as processors: an input's partition is the instance
    it is routed to (:meth:`WorkflowInputs.partition_key`), and what was decoded to find it is
    kept for deciding within the batch, then forgotten."""

    inputs: WorkflowInputs

    def partition_key(self, event: RecordedEvent) -> str:
        """The instance stream ``event`` is routed to (routing is pure): its partition's key.
        An input that cannot be routed belongs to its own stream's partition (and is skipped
        there). What it decodes to find that out is kept for deciding, within the batch."""
        return self.inputs.partition_key(event)

    def read_filter(self) -> Filter:
        """In a group whose inputs without a key are routed once (by the input router, on a
        store that keeps partition keys): the inputs of the partitions held, and the router's
        records of them (:class:`~decider.processors.app.messages.InputRouted`), never an
        input of unknown key once routing started on the store (before that, this processor
        reads them itself: see :func:`~decider.processors.workflows.router.start_routing`,
        which every service of a group calls before its processors start). Else the
        engine's."""
        context = self.context
        if context.group is None or not partitions.routes_once(context.store):
            return super().read_filter()
        held = self.share.read_filter(self.filter).partitions
        assert held is not None
        routed = bool(context.store.read_stream(streams.routed_stream(context.app.name), 0, 1))
        types = tuple(sorted({*self.filter.event_types, ROUTED}))
        return attrs.evolve(
            self.filter, event_types=types, partitions=attrs.evolve(held, unknown=not routed)
        )

    def process(self, batch: Sequence[RecordedEvent]) -> None:
        """The engine's, forgetting the batch's inputs decoded to find their partition. A
        routing record of this workflow stands for its input, read from the store (at the
        record's position, with its partition key)."""
        try:
            super().process(self._resolved(batch))
        finally:
            self.inputs.forget()

    def _resolved(self, batch: Sequence[RecordedEvent]) -> Sequence[RecordedEvent]:
        for event in batch:  # a loop, not any() of a generator: no call per event
            if event.type == ROUTED:
                break
        else:
            return batch
        return [self._routed_input(e) if e.type == ROUTED else e for e in batch]

    def _routed_input(self, record: RecordedEvent) -> RecordedEvent:
        """The input ``record`` routed to this workflow, as if stored where the record is;
        the record itself (skipped by :meth:`WorkflowInputs.route`) if it is for another
        workflow or its input cannot be read."""
        try:
            routed = decoding.decode_message(self.context.app.codec, record)
        except CorruptEvent:
            return record
        if not isinstance(routed, InputRouted) or routed.workflow != self.inputs.workflow.name:
            return record
        found = self.context.store.read_stream(routed.stream, routed.revision, 1)
        if not found or str(found[0].id) != routed.event_id:
            self.log.warning(
                "%s: the input %s routed at position %d is not at %s@%d; passed over",
                self.name,
                routed.event_id,
                record.position,
                routed.stream,
                routed.revision,
            )
            return record
        return attrs.evolve(found[0], position=record.position, partition_key=record.partition_key)
