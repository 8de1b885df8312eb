"""What the console shows, read from the store: instances, processors, skipped inputs, diagrams.

Built on the operator queries (:mod:`decider.processors.operate.queries`, ``listing``, ``skipped``)
and the store protocol; it needs no running service and
writes nothing: the console's actions call :func:`~decider.processors.operate.queries.retry_parked`
and
:func:`~decider.processors.operate.skipped.redrive` as the command line does.

WARNING: the instance list and the observed diagram read every event of the workflows' streams
(one pass over the log, filtered by stream prefix) each time they are shown: fine for the
thousands of instances a console is for, slow for millions.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import attrs

from decider import Lifecycle
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
from decider.processors.app.definition import App
from decider.processors.commands.processor import CommandProcessor
from decider.processors.engine.base import Context, Processor
from decider.processors.engine.clock import Signal, SystemClock
from decider.processors.operate import listing, skipped
from decider.processors.operate.listing import InstanceQuery
from decider.processors.operate.queries import (
    InstanceView,
    ParkedCommand,
    list_parked,
    show,
    status,
)
from decider.processors.operate.skipped import NotRedrivable, SkippedInput
from decider.processors.timers.processor import TimerProcessor
from decider.processors.workflows.processor import WorkflowProcessor
from decider.stores.protocol import CheckpointStore, EventStore

__all__ = [
    "LAG_CAP",
    "InstanceDiagram",
    "InstancePage",
    "InstanceRow",
    "NotRedrivable",
    "ProcessorRow",
    "SkippedInput",
    "bare_definition",
    "definition",
    "instance_diagram",
    "is_error",
    "list_instances",
    "list_skipped",
    "observed_diagram",
    "parked_of",
    "processor_rows",
    "processors_of",
]
LAG_CAP = 10_000
"""Pending events are counted up to this many per processor (more shows as ``10000+``)."""


@attrs.frozen
class InstanceRow:
    """One instance in the list: status, how many events, when it last moved, stuck or not.

    ``stuck``: running, and either with no event for longer than its workflow's
    ``progress_within`` (the notion of :mod:`decider.processors.operate.stuck` and ``decider list
    --stuck``; the console's ``stuck_after`` instead where one is given), or with a command
    parked (it cannot go on until someone retries it). ``parked``: its commands parked now.
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
    stuck_after: timedelta | None = None,
    offset: int = 0,
    limit: int = 50,
    now: datetime | None = None,
) -> InstancePage:
    """The instances matching the filters, most recently active first, one page of them.

    Read by :func:`decider.processors.operate.listing.list_instances` (what ``decider list`` shows).
    ``status_value`` is a :class:`~decider.Lifecycle` value (``running``, ``failed``...);
    ``stuck_after`` overrides every workflow's ``progress_within`` (``None``: each workflow's
    own; a workflow without one has no stuck instances). Raises :class:`KeyError` for a
    workflow the app does not have.
    """
    known = {member.value: member for member in Lifecycle}
    if status_value is not None and status_value not in known:
        return InstancePage([], 0, offset, limit)
    query = InstanceQuery(
        workflow=workflow,
        statuses=frozenset([known[status_value]]) if status_value is not None else frozenset(),
        stuck_for=stuck_after,
        limit=None,
    )
    parked: dict[str, int] = {}
    for command in list_parked(store, app):
        parked[command.stream] = parked.get(command.stream, 0) + 1
    rows = [
        InstanceRow(
            stream=instance.stream,
            workflow=instance.workflow,
            status=instance.status,
            events=instance.events,
            started_at=instance.started_at,
            last_at=instance.updated_at,
            parked=parked.get(instance.stream, 0),
            stuck=instance.stuck_after is not None
            or (instance.status is Lifecycle.RUNNING and instance.stream in parked),
        )
        for instance in listing.list_instances(store, app, query, now).instances
    ]
    if stuck_only:
        rows = [row for row in rows if row.stuck]
    rows.sort(key=lambda r: r.last_at or datetime.min.replace(tzinfo=UTC), reverse=True)
    return InstancePage(rows[offset : offset + limit], len(rows), offset, limit)


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


def list_skipped(store: EventStore, app: App) -> list[SkippedInput]:
    """The skip records of every processor of ``app``, oldest first (as ``decider skipped``
    lists them; re-drive one with :func:`decider.processors.operate.skipped.redrive`)."""
    return skipped.list_skipped(store, app)


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
