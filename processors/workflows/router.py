"""The input router: inputs stored without a partition key, routed once for the whole group.

An input published through the app (:meth:`App.publish
<decider.processors.client.app.App.publish>`, ``publish_many``, ``request``, handler results,
fired timers) is stored with the partition key of the instance its route gives, so in a group
only the process holding that partition reads it. An input appended by another writer has no
key: its partition is known only once it is routed. In a group on a store that keeps partition
keys (:func:`~decider.processors.group.partitions.routes_once`), one process routes every such
input: the one holding partition :data:`~decider.processors.group.partitions.ROUTER_PARTITION`.
For each workflow that takes the input it appends a small record
(:class:`~decider.processors.app.messages.InputRouted`: the workflow, the input's stream,
revision and id) to ``decider-routed-<app>``, stored with the key of the instance the input is
routed to; the workflow processors read those records with their partitions' inputs, and
never an input of unknown key, so no other process reads it.

Guarantees: the router commits its records and its checkpoint in one transaction under
partition 0's lease (fencing, as every processor); a record's id derives from the input's id
and the workflow, so a record written twice (a replay after a crash or a takeover) is stored
once; the workflow processor handles a message id once per instance in any case. Records come
in the order of the inputs in the log.

Routing starts once per store (:func:`start_routing`, called by every service of a group
before its processors start): the routed stream's first event records the position after which
the router routes; the workflow processors handled every input of unknown key up to it
themselves, and leave such inputs to the router only once it is recorded.

WARNING: an input that takes this path reaches its instance after the router has read it, so
relative to an input of the same instance published through the app (which goes straight to its
partition) it may be handled later than their order in the log says.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from decider import Envelope, Metadata, event_id
from decider.processors.app import decoding, streams
from decider.processors.app.definition import AppDefinition
from decider.processors.app.messages import (
    CANCEL_TYPE,
    COMMAND_FAILED,
    InputRouted,
    RoutingStarted,
)
from decider.processors.engine.base import Context, Outcome, Processor
from decider.processors.group import partitions
from decider.processors.workflows.deciding import WorkflowInputs
from decider.stores.errors import CorruptEvent, WrongExpectedVersion
from decider.stores.protocol import (
    ANY,
    NO_STREAM,
    CheckpointStore,
    EventStore,
    Filter,
    NewEvent,
    Partitions,
    RecordedEvent,
    StreamAppend,
)


class InputRouter(Processor):
    """Routes the inputs stored without a partition key (see the module docstring): a
    processor of partition 0's work that reads only events of unknown key."""

    sole_partition = partitions.ROUTER_PARTITION

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        app = context.app
        self.name = streams.router_name(app.name)
        self.stream = streams.routed_stream(app.name)
        self.inputs = [
            WorkflowInputs(
                app,
                registration,
                streams.workflow_processor_name(app.name, registration.workflow.name),
                self.log,
            )
            for registration in app.workflows.values()
        ]
        types = {t for inputs in self.inputs for t in inputs.filter.event_types}
        self.filter = Filter(event_types=tuple(sorted(types)))
        self.routed = 0
        """How many routing records this process wrote (one per input and workflow)."""

    def read_filter(self) -> Filter:
        """The workflows' input types, of unknown partition key only."""
        count = self.context.app.partitions
        return Filter(
            event_types=self.filter.event_types,
            partitions=Partitions(count=count, held=frozenset(), unknown=True),
        )

    def starting(self) -> None:
        """With no checkpoint of its own yet, start after the position the routed stream's
        first event records (:func:`start_routing`)."""
        if self.committed is None:
            context = self.context
            self.committed = start_routing(context.store, context.app, context.checkpoints)
            self.share.committed_to(partitions.ROUTER_PARTITION, self.committed)

    def handle(self, batch: Sequence[RecordedEvent]) -> Outcome:
        """One routing record per input and workflow that takes it, in one append."""
        records: list[NewEvent] = []
        outcome = Outcome(position=batch[-1].position)
        for event in batch:
            self.step(event, outcome, lambda e: records.extend(self._route(e)))
        if records:
            outcome.appends.insert(0, StreamAppend(self.stream, records, ANY))
            self.routed += len(records)
        return outcome

    def _route(self, event: RecordedEvent) -> list[NewEvent]:
        found = []
        for inputs in self.inputs:
            if not _takes(inputs, event):
                continue
            instance = inputs.partition_key(event)  # an unroutable input: its own stream's
            inputs.forget()
            record = InputRouted(
                workflow=inputs.workflow.name,
                stream=event.stream,
                revision=event.revision,
                event_id=str(event.id),
            )
            new = self.derived(self.stream, f"{event.id}/{inputs.workflow.name}", record)
            found.append(attrs.evolve(new, partition_key=partitions.stream_key(instance)))
        return found


def start_routing(store: EventStore, app: AppDefinition, checkpoints: CheckpointStore) -> int:
    """Make sure the app's inputs of unknown key are routed once from some position on, and
    return it: the position the routed stream's first event
    (:class:`~decider.processors.app.messages.RoutingStarted`) records, appended with
    ``NO_STREAM`` by the first process to start (so every process agrees on it).

    Called by every service of a group before its processors start. The first one takes the
    lowest of the workflow processors' checkpoints (the start of the log if one has none): no
    processor of this version has run yet, so every input of unknown key up to there was
    handled by the workflow processors themselves, and the router routes every one after it.
    """
    stream = streams.routed_stream(app.name)
    for _ in range(3):
        found = routing_start(store, app)
        if found is not None:
            return found
        marks = []
        for registration in app.workflows.values():
            name = streams.workflow_processor_name(app.name, registration.workflow.name)
            for number in range(app.partitions):
                mark = checkpoints.load_checkpoint(partitions.checkpoint_name(name, number))
                marks.append(mark if mark is not None else checkpoints.load_checkpoint(name))
        known = [mark for mark in marks if mark is not None]
        floor = min(known) if known and len(known) == len(marks) else 0  # 0: before every event
        new_id = event_id(stream, "start", 0)
        type_name, data, metadata = app.codec.encode_envelope(
            Envelope(RoutingStarted(position=floor), Metadata(message_id=str(new_id)))
        )
        try:
            store.append(stream, [NewEvent(new_id, type_name, data, metadata)], NO_STREAM)
        except WrongExpectedVersion:
            continue  # another process started it first: read its position
    raise RuntimeError(f"could not start routing the inputs of {app.name!r}")  # pragma: no cover


def routing_start(store: EventStore, app: AppDefinition) -> int | None:
    """The position after which the app's inputs of unknown key are routed once (the router
    started), or ``None`` if no router started on this store yet."""
    first = store.read_stream(streams.routed_stream(app.name), 0, 1)
    if not first:
        return None
    started = decoding.decode_message(app.codec, first[0])
    if not isinstance(started, RoutingStarted):
        raise CorruptEvent(first[0].stream, first[0].revision, "not a RoutingStarted record")
    return started.position


def _takes(inputs: WorkflowInputs, event: RecordedEvent) -> bool:
    """Whether ``inputs``' workflow takes ``event`` (a cancel request or a command failure
    only from its own instances' streams)."""
    if event.type not in inputs.filter.event_types:
        return False
    if event.type == CANCEL_TYPE:
        prefix = streams.cancel_stream(streams.instance_prefix(inputs.workflow.name))
        return event.stream.startswith(prefix)
    if event.type == COMMAND_FAILED:
        return streams.failed_stream_workflow(event.stream) == inputs.workflow.name
    return True
