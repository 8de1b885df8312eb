"""What the console shows, read from the store: instances, processors, skipped inputs, diagrams.

Built on the operator queries (:mod:`decider.processors.queries`) and the store protocol; it
needs no running service. :func:`redrive_skipped` is the one writer here (besides
:func:`~decider.processors.queries.retry_parked`, which the console calls as it is).

WARNING: the instance list and the observed diagram read every event of the workflows' streams
(one pass over the log, filtered by stream prefix) each time they are shown: fine for the
thousands of instances a console is for, slow for millions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from decider import Lifecycle, event_id
from decider.diagram import (
    Diagram,
    Transition,
    explore,
    observed,
    path,
    path_classes,
    state_name,
    with_path,
)
from decider.processors.app import App
from decider.processors.base import Context, Processor
from decider.processors.clock import Signal, SystemClock
from decider.processors.command_processor import CommandProcessor
from decider.processors.messages import InputSkipped
from decider.processors.queries import InstanceView, ParkedCommand, list_parked, show, status
from decider.processors.streams import skipped_stream
from decider.processors.timer_processor import TimerProcessor
from decider.processors.workflow_processor import WorkflowProcessor
from decider.stores.protocol import ANY, CheckpointStore, EventStore, Filter, NewEvent

_PAGE = 1000
LAG_CAP = 10_000
"""Pending events are counted up to this many per processor (more shows as ``10000+``)."""


@attrs.frozen
class InstanceRow:
    """One instance in the list: status, how many events, when it last moved, stuck or not.

    ``stuck``: running, and with a parked command or no event for longer than the console's
    ``stuck_after``.
    """

    stream: str
    workflow: str
    status: Lifecycle
    events: int
    started_at: datetime | None
    last_at: datetime | None
    parked: int
    stuck: bool


@attrs.frozen
class InstancePage:
    """A page of the instance list: its rows, and how many rows matched in all."""

    rows: list[InstanceRow]
    total: int
    offset: int
    limit: int


def list_instances(
    store: EventStore,
    app: App,
    *,
    workflow: str | None = None,
    status_value: str | None = None,
    stuck_only: bool = False,
    stuck_after: timedelta = timedelta(minutes=5),
    offset: int = 0,
    limit: int = 50,
    now: datetime | None = None,
) -> InstancePage:
    """The instances matching the filters, most recently active first, one page of them.

    ``status_value`` is a :class:`~decider.Lifecycle` value (``running``, ``completed``...).
    Raises :class:`KeyError` for a workflow the app does not have.
    """
    now = now or datetime.now(UTC)
    instances = status(store, app, workflow)
    registrations = [r for n, r in app.workflows.items() if workflow is None or n == workflow]
    activity = _activity(store, tuple(r.stream_prefix for r in registrations))
    parked: dict[str, int] = {}
    for command in list_parked(store, app):
        parked[command.stream] = parked.get(command.stream, 0) + 1
    rows = []
    for instance in instances:
        count, first, last = activity.get(instance.stream, (0, None, None))
        waiting = parked.get(instance.stream, 0)
        stuck = instance.status is Lifecycle.RUNNING and (
            waiting > 0 or (last is not None and now - last > stuck_after)
        )
        rows.append(
            InstanceRow(
                instance.stream,
                instance.workflow,
                instance.status,
                count,
                first,
                last,
                waiting,
                stuck,
            )
        )
    rows = [
        row
        for row in rows
        if (status_value is None or row.status.value == status_value)
        and (not stuck_only or row.stuck)
    ]
    rows.sort(key=lambda r: r.last_at or datetime.min.replace(tzinfo=UTC), reverse=True)
    return InstancePage(rows[offset : offset + limit], len(rows), offset, limit)


def _activity(
    store: EventStore, prefixes: tuple[str, ...]
) -> dict[str, tuple[int, datetime | None, datetime | None]]:
    """Per stream: how many events, the first and the last one's time (nothing decoded)."""
    found: dict[str, tuple[int, datetime | None, datetime | None]] = {}
    for record in _read_all(store, Filter(stream_prefixes=prefixes)):
        count, first, _ = found.get(record.stream, (0, record.recorded_at, None))
        found[record.stream] = (count + 1, first, record.recorded_at)
    return found


def parked_of(store: EventStore, app: App, stream: str) -> list[ParkedCommand]:
    """The commands of the instance ``stream`` that are parked now."""
    return [c for c in list_parked(store, app) if c.stream == stream]


# -- processors --------------------------------------------------------------------------


@attrs.frozen
class ProcessorRow:
    """A processor of the app: its stored checkpoint and the work after it.

    ``pending`` counts the events its filter passes after the checkpoint (capped at
    :data:`LAG_CAP`, ``capped`` then); ``oldest_pending_at`` is when the first of them was
    recorded, so ``now - oldest_pending_at`` is its lag in time.
    """

    name: str
    checkpoint: int | None
    pending: int
    capped: bool
    oldest_pending_at: datetime | None


def processors_of(app: App, store: EventStore) -> list[Processor]:
    """The processors a :class:`~decider.processors.Service` of ``app`` runs, not started.

    Built the way the service builds them, for their names and filters only.
    """
    context = Context(
        app=app,
        store=store,
        checkpoints=store,  # type: ignore[arg-type]  # only read through load_checkpoint
        clock=SystemClock(),
        stop=Signal(),
        progress=lambda: None,
    )
    built: list[Processor] = [WorkflowProcessor(context, r, 1) for r in app.workflows.values()]
    return [*built, CommandProcessor(context), TimerProcessor(context)]


def processor_rows(store: EventStore, app: App) -> list[ProcessorRow]:
    """Every processor of ``app``, its checkpoint and pending work (see :class:`ProcessorRow`)."""
    rows = []
    for processor in processors_of(app, store):
        checkpoint = (
            store.load_checkpoint(processor.name) if isinstance(store, CheckpointStore) else None
        )
        pending = store.read_all(checkpoint, LAG_CAP + 1, processor.filter)
        rows.append(
            ProcessorRow(
                name=processor.name,
                checkpoint=checkpoint,
                pending=min(len(pending), LAG_CAP),
                capped=len(pending) > LAG_CAP,
                oldest_pending_at=pending[0].recorded_at if pending else None,
            )
        )
    return rows


# -- skipped inputs ----------------------------------------------------------------------


@attrs.frozen
class SkippedInput:
    """An input a processor skipped, as its skip record tells; ``redrivable``: see
    :func:`redrive_skipped`."""

    record_id: str
    processor: str
    reason: str
    stream: str
    revision: int
    position: int
    event_type: str
    event_id: str
    skipped_at: datetime
    redrivable: bool


def list_skipped(store: EventStore, app: App) -> list[SkippedInput]:
    """The skip records of every processor of ``app``, oldest first."""
    found = []
    for processor in processors_of(app, store):
        redrivable = isinstance(processor, WorkflowProcessor)
        for record in _read_stream(store, skipped_stream(processor.name)):
            message = app.codec.decode_message(record.type, record.data)
            if isinstance(message, InputSkipped):
                found.append(
                    SkippedInput(
                        record_id=str(record.id),
                        processor=message.processor,
                        reason=message.reason,
                        stream=message.stream,
                        revision=message.revision,
                        position=message.position,
                        event_type=message.event_type,
                        event_id=message.event_id,
                        skipped_at=record.recorded_at,
                        redrivable=redrivable,
                    )
                )
    found.sort(key=lambda s: s.skipped_at)
    return found


class NotRedrivable(Exception):
    """A skip record that is unknown, or whose input cannot be fed again."""


def redrive_skipped(store: EventStore, app: App, record_id: str) -> str:
    """Feed a skipped input to its workflow again; returns the id of the copy appended.

    The stored input is copied, type, data and metadata unchanged (so its message id too), to
    the end of the stream it was in, under an id derived from the skip record: re-driving one
    record twice writes one copy. The workflow processor reads the copy as a new input and
    handles it (or skips it again, recording a new skip). Only inputs of workflow processors
    are re-driven; a command is carried out again with ``retry`` once parked, never by copying
    its ``Sent`` event into the instance's history. Raises :class:`NotRedrivable` otherwise.
    """
    skipped = {s.record_id: s for s in list_skipped(store, app)}
    found = skipped.get(record_id)
    if found is None:
        raise NotRedrivable(f"no skipped input has the record id {record_id!r}")
    if not found.redrivable:
        raise NotRedrivable(
            f"{found.processor} is not a workflow processor: its input is a command"
        )
    original = store.read_stream(found.stream, found.revision, 1)
    if not original or str(original[0].id) != found.event_id:
        raise NotRedrivable(f"the skipped event {found.stream}@{found.revision} is not stored")
    source = original[0]
    copy_id = event_id(found.stream, f"{record_id}/redrive", 0)
    store.append(found.stream, [NewEvent(copy_id, source.type, source.data, source.metadata)], ANY)
    return str(copy_id)


# -- diagrams ----------------------------------------------------------------------------


def definition(app: App, workflow: str, *, seed: int = 0) -> Diagram:
    """The definition diagram of one of ``app``'s workflows, from its registered input types.

    Raises :class:`KeyError` for a workflow the app does not have.
    """
    registration = app.workflows[workflow]
    return explore(registration.workflow, [i.cls for i in registration.inputs.values()], seed=seed)


def bare_definition(app: App, workflow: str) -> Diagram:
    """A definition diagram with the initial state only (when exploring is not possible)."""
    registration = app.workflows[workflow]
    initial = state_name(registration.workflow.initial_state)
    return Diagram(workflow, initial, (initial,), (), {})


def observed_diagram(store: EventStore, app: App, workflow: str, limit: int = 2000) -> Diagram:
    """The transitions the (first ``limit``) instances of ``workflow`` took, with counts."""
    registration = app.workflows[workflow]
    histories = (
        [entry.event for entry in show(store, app, i.stream).history]
        for i in status(store, app, workflow)[:limit]
    )
    return observed(registration.workflow, histories)


@attrs.frozen
class InstanceDiagram:
    """One instance on its workflow's definition: the steps it took and each state's class."""

    diagram: Diagram
    steps: list[Transition]
    classes: dict[str, str]


def instance_diagram(
    app: App, view: InstanceView, definition: Diagram, *, error: bool
) -> InstanceDiagram:
    """``view``'s path on ``definition`` (see :func:`decider.diagram.path_classes`)."""
    registration = app.workflows[view.workflow]
    steps = path(registration.workflow, [entry.event for entry in view.history])
    diagram = with_path(definition, steps)
    if steps and view.status not in (Lifecycle.NOT_STARTED, Lifecycle.RUNNING):
        ended = {steps[-1].target: view.status.value, **diagram.terminals}
        diagram = attrs.evolve(diagram, terminals=ended)
    return InstanceDiagram(diagram, steps, path_classes(diagram, steps, error=error))


def is_error(view: InstanceView, parked: Sequence[ParkedCommand]) -> bool:
    """Whether an instance is in trouble: a parked command, or a lifecycle named failed."""
    return bool(parked) or view.status.value == "failed"


def _read_stream(store: EventStore, stream: str) -> Iterator[Any]:
    start = 0
    while page := store.read_stream(stream, start, _PAGE):
        yield from page
        if len(page) < _PAGE:
            return
        start += len(page)


def _read_all(store: EventStore, filter: Filter) -> Iterator[Any]:
    after: int | None = None
    while page := store.read_all(after, _PAGE, filter):
        yield from page
        if len(page) < _PAGE:
            return
        after = page[-1].position
