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

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeGuard

import attrs

from decider import Cancelled, Failed, Lifecycle
from decider.diagram import (
    Diagram,
    Transition,
    end_kinds,
    explore,
    observed,
    path,
    path_classes,
    state_name,
    with_path,
)
from decider.processors.app.definition import AppDefinition
from decider.processors.commands.parking import ParkedCommand
from decider.processors.engine.base import Processor
from decider.processors.group import partitions
from decider.processors.operate import listing, operations, progress, skipped
from decider.processors.operate.listing import InstanceQuery
from decider.processors.operate.queries import InstanceView, list_parked, show, status
from decider.processors.operate.skipped import NotRedrivable, SkippedInput
from decider.stores.leases import LeaseStore
from decider.stores.protocol import CheckpointStore, EventStore

__all__ = [
    "LAG_CAP",
    "InstanceDiagram",
    "InstancePage",
    "InstanceRow",
    "PartitionView",
    "PartitionsView",
    "ProcessView",
    "NotRedrivable",
    "ProcessorRow",
    "SkippedInput",
    "bare_definition",
    "definition",
    "end_reason",
    "instance_id",
    "instance_diagram",
    "is_error",
    "list_instances",
    "list_skipped",
    "observed_diagram",
    "parked_of",
    "partitions_view",
    "processor_rows",
    "processors_of",
]
LAG_CAP = progress.LAG_CAP
"""Pending inputs are counted up to this many per processor and partition (more: ``10000+``)."""


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
    app: AppDefinition,
    *,
    workflow: str | None = None,
    status_value: str | None = None,
    stuck_only: bool = False,
    stuck_after: timedelta | None = None,
    search: str | None = None,
    offset: int = 0,
    limit: int = 50,
    now: datetime | None = None,
) -> InstancePage:
    """The instances matching the filters, most recently active first, one page of them.

    Read by :func:`decider.processors.operate.listing.list_instances` (what ``decider list`` shows).
    ``status_value`` is a :class:`~decider.Lifecycle` value (``running``, ``failed``...);
    ``stuck_after`` overrides every workflow's ``progress_within`` (``None``: each workflow's
    own; a workflow without one has no stuck instances). ``search`` keeps the instances whose
    stream holds it, ignoring case: an instance id or business key (the id the workflow's
    route gives an instance, as in ``<Workflow>-<id>``), or part of one. Raises
    :class:`KeyError` for a workflow the app does not have.
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
    if search:
        wanted = search.casefold()
        rows = [row for row in rows if wanted in row.stream.casefold()]
    rows.sort(key=lambda r: r.last_at or datetime.min.replace(tzinfo=UTC), reverse=True)
    return InstancePage(rows[offset : offset + limit], len(rows), offset, limit)


def instance_id(app: AppDefinition, row: InstanceRow) -> str:
    """The id of an instance within its workflow: its stream without ``<Workflow>-``."""
    return row.stream.removeprefix(app.workflows[row.workflow].stream_prefix)


def end_reason(view: InstanceView) -> str | None:
    """Why an instance failed or was cancelled (the reason its ``Failed`` or ``Cancelled``
    event records), ``None`` for one that did neither."""
    for entry in reversed(view.history):
        if isinstance(entry.event, (Failed, Cancelled)):
            return entry.event.reason
    return None


def parked_of(store: EventStore, app: AppDefinition, stream: str) -> list[ParkedCommand]:
    """The commands of the instance ``stream`` that are parked now."""
    return [c for c in list_parked(store, app) if c.stream == stream]


# -- processors --------------------------------------------------------------------------


@attrs.frozen
class ProcessorRow:
    """A processor of the app: its checkpoint and the work it has left (see
    :mod:`decider.processors.operate.progress`).

    ``partitions``: how many partitions it runs in (0: unpartitioned); ``checkpoint`` its
    checkpoint, in a partitioned run the lowest of its partitions'. ``pending`` counts the
    inputs it has to do now, every partition's against its own checkpoint (``capped``: at
    least that many; ``exact`` false: at most that many, the command processor's count may
    hold commands concluded since its checkpoint); ``waiting``, timers not due yet;
    ``oldest_pending_at`` when the oldest pending input was recorded (a timer: fell due), so
    ``now - oldest_pending_at`` is its lag.
    """

    name: str
    checkpoint: int | None
    pending: int
    capped: bool
    oldest_pending_at: datetime | None
    partitions: int = 0
    waiting: int = 0
    exact: bool = True


def processors_of(app: AppDefinition, store: EventStore) -> list[Processor]:
    """The processors a :class:`~decider.processors.Service` of ``app`` runs, not started."""
    return progress.processors_of(app, store)


def processor_rows(
    store: EventStore, app: AppDefinition, now: datetime | None = None
) -> list[ProcessorRow]:
    """Every processor of ``app``, its checkpoint and pending work (see :class:`ProcessorRow`)."""
    now = now or datetime.now(UTC)
    by_processor: dict[str, list[progress.Progress]] = {}
    for row in progress.progress(store, app, now):
        by_processor.setdefault(row.processor, []).append(row)
    rows = []
    for name, parts in by_processor.items():
        total = progress.summed(parts)
        rows.append(
            ProcessorRow(
                name=name,
                checkpoint=total.checkpoint,
                pending=total.pending,
                capped=total.capped,
                oldest_pending_at=total.oldest_pending_at,
                partitions=0 if parts[0].partition is None else len(parts),
                waiting=total.waiting,
                exact=total.exact,
            )
        )
    return rows


# -- skipped inputs ----------------------------------------------------------------------


def list_skipped(store: EventStore, app: AppDefinition) -> list[SkippedInput]:
    """The skip records of every processor of ``app``, oldest first (as ``decider skipped``
    lists them; re-drive one with :func:`decider.processors.operate.skipped.redrive`)."""
    return skipped.list_skipped(store, app)


# -- diagrams ----------------------------------------------------------------------------


def definition(
    app: AppDefinition,
    workflow: str,
    *,
    seed: int = 0,
    strategies: Mapping[str, Any] | None = None,
) -> Diagram:
    """The definition diagram of one of ``app``'s workflows, from its registered input types.

    ``strategies`` maps an input type, by its class name or its stored type name, to the
    hypothesis strategy its values are drawn from (see :func:`decider.diagram.explore`).
    Raises :class:`KeyError` for a workflow the app does not have, :class:`ValueError` for a
    strategy of a type the workflow does not take.
    """
    registration = app.workflows[workflow]
    by_name: dict[str, type[Any]] = {}
    for type_name, registered in registration.inputs.items():
        by_name[type_name] = by_name[registered.cls.__name__] = registered.cls
    unknown = sorted(set(strategies or {}) - set(by_name))
    if unknown:
        known = ", ".join(sorted({cls.__name__ for cls in by_name.values()}))
        raise ValueError(
            f"workflow {workflow!r} takes no input {', '.join(unknown)} (its inputs: {known})"
        )
    chosen = {by_name[name]: strategy for name, strategy in (strategies or {}).items()}
    return explore(
        registration.workflow,
        [i.cls for i in registration.inputs.values()],
        seed=seed,
        strategies=chosen,
    )


def bare_definition(app: AppDefinition, workflow: str) -> Diagram:
    """A definition diagram with the initial state only (when exploring is not possible)."""
    registration = app.workflows[workflow]
    initial = state_name(registration.workflow.initial_state)
    return Diagram(workflow, initial, (initial,), (), {})


def observed_diagram(
    store: EventStore, app: AppDefinition, workflow: str, limit: int = 2000
) -> Diagram:
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
    app: AppDefinition, view: InstanceView, definition: Diagram, *, error: bool
) -> InstanceDiagram:
    """``view``'s path on ``definition`` (see :func:`decider.diagram.path_classes`)."""
    registration = app.workflows[view.workflow]
    steps = path(registration.workflow, [entry.event for entry in view.history])
    diagram = with_path(definition, steps)
    if steps and view.status not in (Lifecycle.NOT_STARTED, Lifecycle.RUNNING):
        last = steps[-1].target
        kinds = end_kinds({*diagram.terminals.get(last, ()), view.status.value})
        diagram = attrs.evolve(diagram, terminals={**diagram.terminals, last: kinds})
    return InstanceDiagram(diagram, steps, path_classes(diagram, steps, error=error))


def is_error(view: InstanceView, parked: Sequence[ParkedCommand]) -> bool:
    """Whether an instance is in trouble: a parked command, or a lifecycle named failed."""
    return bool(parked) or view.status.value == "failed"


# -- partitions and processes ------------------------------------------------------------


@attrs.frozen
class PartitionView:
    """One partition: its lease (``owner`` ``None``: free) and each processor's work in it."""

    number: int
    owner: str | None
    epoch: int
    expires_at: datetime | None
    work: list[progress.Progress]


@attrs.frozen
class ProcessView:
    """A process of the app's group: its member lease's expiry (renewed with each heartbeat
    of the group) and the partitions it holds."""

    owner: str
    expires_at: datetime
    held: list[int]


@attrs.frozen
class PartitionsView:
    """What the Partitions page shows. ``partitioned`` false: the app never ran partitioned on
    this store (``partitions`` then holds one entry, number -1, for its unpartitioned work).
    ``heartbeat_at``: the last heartbeat of a running ``decider run`` service (``None``: none
    running, or it stopped gracefully)."""

    partitioned: bool
    partitions: list[PartitionView]
    processes: list[ProcessView]
    heartbeat_at: datetime | None


def partitions_view(store: EventStore, app: AppDefinition, now: datetime) -> PartitionsView:
    """Every partition's lease and work, the processes of the group, the service heartbeat."""
    work: dict[int, list[progress.Progress]] = {}
    for row in progress.progress(store, app, now):
        work.setdefault(-1 if row.partition is None else row.partition, []).append(row)
    leases = {lease.partition: lease for lease in store.leases()} if _leases(store) else {}
    members = partitions.member_prefix(app.name)
    parts = []
    held: dict[str, list[int]] = {}
    for number in sorted(work):
        lease = leases.get(partitions.lease_name(app.name, number))
        live = lease is not None and lease.owner is not None and lease.expires_at > now
        if lease is not None and lease.owner is not None and live:
            held.setdefault(lease.owner, []).append(number)
        parts.append(
            PartitionView(
                number,
                None if lease is None else lease.owner,
                0 if lease is None else lease.epoch,
                None if lease is None else lease.expires_at,
                work[number],
            )
        )
    processes = [
        ProcessView(name.removeprefix(members), lease.expires_at, held.get(lease.owner or "", []))
        for name, lease in sorted(leases.items())
        if name.startswith(members) and lease.owner is not None
    ]
    beat = store.load_checkpoint(operations.heartbeat_name(app)) if _checkpoints(store) else None
    heartbeat_at = datetime.fromtimestamp(beat / 1000, UTC) if beat else None
    return PartitionsView(progress.is_partitioned(store, app), parts, processes, heartbeat_at)


def _leases(store: EventStore) -> TypeGuard[LeaseStore]:
    return isinstance(store, LeaseStore)


def _checkpoints(store: EventStore) -> TypeGuard[CheckpointStore]:
    return isinstance(store, CheckpointStore)
