"""Read-only views for operators (and the CLI): instances, their status, parked commands.

Everything here reads the store through the protocol; nothing needs a running service.
``retry_parked`` is the one writer: it appends a request that the command processor acts on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from decider import Lifecycle, Metadata, WorkflowEvent, advance, start
from decider.codec import lifecycle_of_type
from decider.processors.app import decoding, streams
from decider.processors.app.definition import AppDefinition
from decider.processors.app.errors import ConflictsExhausted, InstanceEnded, NotParked
from decider.processors.commands.parking import (
    ParkedCommand,
    parked_in,
    retry_request,
)
from decider.processors.engine.reading import read_all, read_stream
from decider.processors.workflows.state_stored import load_instance
from decider.stores.errors import WrongExpectedVersion
from decider.stores.protocol import EventStore

_RACES = 5


@attrs.frozen
class HistoryEntry:
    """One event of an instance's stream, decoded."""

    revision: int
    position: int
    type: str
    event: WorkflowEvent[Any, Any]
    metadata: Metadata
    recorded_at: datetime
    stored_metadata: bytes = b""
    """The metadata as stored (with any field :class:`~decider.Metadata` does not hold)."""


@attrs.frozen
class InstanceView:
    """An instance as stored: its events, and the state and status they fold to."""

    stream: str
    workflow: str
    history: list[HistoryEntry]
    state: Any
    status: Lifecycle
    forked_to: str | None = None
    """The stream of the generation this one was forked to (``None``: not forked)."""

    @property
    def version(self) -> str | None:
        """The workflow version the instance began under (recorded in ``Began``'s metadata),
        or ``None`` for a workflow without a ``version``."""
        for entry in self.history:
            if entry.metadata.workflow_version is not None:
                return entry.metadata.workflow_version
        return None


@attrs.frozen
class InstanceStatus:
    """One instance stream and its lifecycle status."""

    stream: str
    workflow: str
    status: Lifecycle


def show(store: EventStore, app: AppDefinition, stream: str) -> InstanceView:
    """The history, folded state and status of the instance stream ``stream``.

    Raises :class:`KeyError` if no workflow of ``app`` owns the stream, and
    :class:`~decider.stores.errors.CorruptEvent` (naming the revision) for an event that cannot be
    decoded.
    """
    registration = app.workflow_of_stream(stream)
    if registration is None:
        known = ", ".join(sorted(app.workflows)) or "none"
        raise KeyError(f"{stream!r} is not the stream of a workflow of {app.name!r} ({known})")
    workflow = registration.workflow
    records = read_stream(store, stream)
    history = [
        HistoryEntry(
            revision=record.revision,
            position=record.position,
            type=record.type,
            event=decoding.decode_event(app.codec, record),
            metadata=decoding.decode_metadata(app.codec, record),
            recorded_at=record.recorded_at,
            stored_metadata=record.metadata,
        )
        for record in records
    ]
    mark = decoding.fork_mark(app.codec, records[-1]) if records else None
    if registration.stored == "state":  # the stream is its outbox; the state is a row
        instance = load_instance(store, app, registration, stream)
    else:
        instance = advance(workflow, start(workflow), (entry.event for entry in history))
    forked_to = mark.forked_to if mark is not None else None
    return InstanceView(stream, workflow.name, history, instance.state, instance.status, forked_to)


def status(
    store: EventStore, app: AppDefinition, workflow: str | None = None
) -> list[InstanceStatus]:
    """Every instance of ``app``'s workflows (or of one) with its status, by first appearance.

    Reads only the lifecycle events (``Began`` and the terminal ones: ``Completed``,
    ``Failed``, ``Cancelled``); nothing is decoded, the stored type names the status.
    """
    registrations = [r for name, r in app.workflows.items() if workflow is None or name == workflow]
    if not registrations:
        raise KeyError(f"no workflow {workflow!r} in app {app.name!r}")
    wanted = {r.workflow.name for r in registrations}
    found: dict[str, InstanceStatus] = {}
    filter = decoding.lifecycle_filter(r.workflow.name for r in registrations)
    for record in read_all(store, filter):
        owner = app.workflow_of_stream(record.stream)
        if owner is None or owner.workflow.name not in wanted:
            continue
        state = lifecycle_of_type(record.type)
        if state is None:
            continue
        if found.get(record.stream) is None or state.terminal:
            found[record.stream] = InstanceStatus(record.stream, owner.workflow.name, state)
    return list(found.values())


def list_parked(store: EventStore, app: AppDefinition) -> list[ParkedCommand]:
    """The commands of ``app`` that are parked now (parked, and not retried since)."""
    ledger = read_stream(store, streams.parked_stream(app.name))
    return [command for command, _ in parked_in(app, ledger)]


def retry_parked(
    store: EventStore, app: AppDefinition, command_id: str, *, force: bool = False
) -> str:
    """Re-queue a parked command: the command processor carries it out again.

    Returns the id of the retry request. Raises
    :class:`~decider.processors.app.errors.InstanceEnded` if the workflow instance that sent the
    command has ended (completed, failed or cancelled), unless ``force``: carried out now, the
    command would act (charge a card, say) for an instance that records its result as
    ``Ignored``. :class:`~decider.processors.app.errors.NotParked` if the
    command is not parked now, which includes a command already re-queued (a retry request
    follows its last park), even by a concurrent call: one park is retried at most once. If it
    fails again, it is parked again (and the workflow gets another ``decider.CommandFailed``).
    :class:`~decider.processors.app.errors.ConflictsExhausted` if the ledger kept changing under the
    call.
    """
    stream = streams.parked_stream(app.name)
    for _ in range(_RACES):
        ledger = read_stream(store, stream)
        found = {c.command_id: (c, record) for c, record in parked_in(app, ledger)}
        if command_id not in found:
            raise NotParked(app.name, command_id)
        command, park = found[command_id]
        if not force:
            check_instance_running(store, app, command)
        new = retry_request(app, command, park)
        try:
            # The ledger as read: a request written since (by another call) is seen next turn.
            store.append(stream, [new], ledger[-1].revision)
        except WrongExpectedVersion:
            continue
        return str(new.id)
    raise ConflictsExhausted(stream, _RACES)


def check_instance_running(store: EventStore, app: AppDefinition, command: ParkedCommand) -> None:
    """:class:`~decider.processors.app.errors.InstanceEnded` if ``command`` was sent by a workflow
    instance that has ended since (a command of no instance passes). A command a fork's new
    generation reuses is the new generation's (:mod:`decider.processors.client.forking`)."""
    if app.workflow_of_stream(command.stream) is None:
        return
    records = read_stream(store, command.stream)
    mark = decoding.fork_mark(app.codec, records[-1]) if records else None
    while mark is not None and command.command_id in mark.reused:
        # A fork's new generation reuses the command: its result goes there, whose status counts.
        records = read_stream(store, mark.forked_to)
        mark = decoding.fork_mark(app.codec, records[-1]) if records else None
    ended: Lifecycle | None = None
    for record in records:
        status = lifecycle_of_type(record.type)
        if status is not None and status.terminal:
            ended = status
    if ended is not None:
        raise InstanceEnded(command.command_id, command.command_type, command.stream, ended.value)
