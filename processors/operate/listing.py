"""Instances listed for operators: by workflow, status, age, and the ones that are stuck.

Reads the instance streams' events through the protocol (nothing is decoded: a status comes
from the lifecycle events' type names), so it works on every store without a running service.
An instance is listed in the order it began; a page ends with a cursor, the log position of its
last instance's first event, from which the next page reads on.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import attrs

from decider import Lifecycle
from decider.codec import lifecycle_of_type
from decider.processors.app import decoding
from decider.processors.app.definition import AppDefinition, WorkflowRegistration
from decider.processors.engine.reading import read_all
from decider.processors.operate.stuck import is_stuck
from decider.stores.protocol import EventStore, Filter

__all__ = [
    "InstancePage",
    "InstanceQuery",
    "InstanceSummary",
    "lifecycle_of_type",
    "list_instances",
]


@attrs.frozen
class InstanceSummary:
    """One instance as its stream shows it: status, when it began and last changed."""

    stream: str
    workflow: str
    instance_id: str
    status: Lifecycle
    started_at: datetime
    updated_at: datetime
    events: int
    first_position: int
    last_position: int
    stuck_after: timedelta | None = None
    """The time without an event after which this instance counts as stuck, if it is stuck."""
    forked_to: str | None = None
    """The stream of the generation this one was forked to (``None``: not forked)."""

    def as_json(self) -> dict[str, object]:
        """The summary as a JSON object (times in ISO 8601, UTC)."""
        return {
            "stream": self.stream,
            "workflow": self.workflow,
            "instance_id": self.instance_id,
            "status": self.status.value,
            "started_at": self.started_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "events": self.events,
            "first_position": self.first_position,
            "last_position": self.last_position,
            "stuck": self.stuck_after is not None,
            "forked_to": self.forked_to,
        }


@attrs.frozen(kw_only=True)
class InstanceQuery:
    """What to list; every condition given must hold.

    ``stuck``: only running instances with no event for longer than ``stuck_for``, or, if that
    is ``None``, than their workflow's ``progress_within`` (a workflow without it has none).
    ``after`` is the cursor of the previous page; ``limit`` ``None`` lists everything.
    """

    workflow: str | None = None
    statuses: frozenset[Lifecycle] = frozenset()
    started_after: datetime | None = None
    started_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    stuck: bool = False
    stuck_for: timedelta | None = None
    limit: int | None = 100
    after: int | None = None


@attrs.frozen
class InstancePage:
    """A page of instances, and the cursor of the next page (``None``: this is the last)."""

    instances: list[InstanceSummary]
    next_after: int | None


@attrs.define
class _Seen:
    stream: str
    registration: WorkflowRegistration
    status: Lifecycle
    started_at: datetime
    updated_at: datetime
    events: int
    first_position: int
    last_position: int
    forked_to: str | None = None


def list_instances(
    store: EventStore, app: AppDefinition, query: InstanceQuery, now: datetime | None = None
) -> InstancePage:
    """The instances of ``app`` that ``query`` selects, in the order they began.

    Raises :class:`KeyError` for a workflow ``app`` does not have. ``now`` (default: the
    current time) is what ``stuck`` measures against.
    """
    now = now or datetime.now(UTC)
    registrations = _registrations(app, query.workflow)
    chosen: list[InstanceSummary] = []
    for seen in _instances(store, app, registrations, query.after):
        summary = _summary(seen, query, now)
        if summary is None:
            continue
        if query.limit is not None and len(chosen) == query.limit:
            return InstancePage(chosen, chosen[-1].first_position)
        chosen.append(summary)
    return InstancePage(chosen, None)


def _registrations(app: AppDefinition, workflow: str | None) -> list[WorkflowRegistration]:
    if workflow is None:
        return list(app.workflows.values())
    if workflow not in app.workflows:
        known = ", ".join(sorted(app.workflows)) or "none"
        raise KeyError(f"no workflow {workflow!r} in app {app.name!r} (workflows: {known})")
    return [app.workflows[workflow]]


def _instances(
    store: EventStore,
    app: AppDefinition,
    registrations: list[WorkflowRegistration],
    after: int | None,
) -> Iterable[_Seen]:
    """Every instance that began after ``after``, with its last state, in the order it began."""
    wanted = {r.workflow.name for r in registrations}
    seen: dict[str, _Seen] = {}
    older: set[str] = set()
    prefixes = tuple(r.stream_prefix for r in registrations)
    for record in read_all(store, Filter(stream_prefixes=prefixes), after):
        entry = seen.get(record.stream)
        if entry is None:
            if record.stream in older:
                continue
            owner = app.workflow_of_stream(record.stream)
            if owner is None or owner.workflow.name not in wanted or record.revision != 0:
                older.add(record.stream)  # began before the cursor, or another workflow's
                continue
            entry = _Seen(
                record.stream,
                owner,
                Lifecycle.RUNNING,
                record.recorded_at,
                record.recorded_at,
                0,
                record.position,
                record.position,
            )
            seen[record.stream] = entry
        entry.events += 1
        entry.updated_at = record.recorded_at
        entry.last_position = record.position
        status = lifecycle_of_type(record.type)
        if status is not None and not entry.status.terminal:  # the first end is the status
            entry.status = status
        if status is not None and decoding.is_fork_mark(record):
            mark = decoding.fork_mark(app.codec, record)
            entry.forked_to = mark.forked_to if mark is not None else None
    return seen.values()  # dicts keep insertion order: the order the instances began


def _summary(seen: _Seen, query: InstanceQuery, now: datetime) -> InstanceSummary | None:
    if query.statuses and seen.status not in query.statuses:
        return None
    checks = (
        (query.started_after, seen.started_at, True),
        (query.started_before, seen.started_at, False),
        (query.updated_after, seen.updated_at, True),
        (query.updated_before, seen.updated_at, False),
    )
    for bound, value, after in checks:
        if bound is not None and (value <= bound if after else value >= bound):
            return None
    limit = query.stuck_for if query.stuck_for is not None else seen.registration.progress_within
    stuck = is_stuck(seen.status, seen.updated_at, limit, now)
    if query.stuck and not stuck:
        return None
    name = seen.registration.workflow.name
    return InstanceSummary(
        stream=seen.stream,
        workflow=name,
        instance_id=seen.stream[len(seen.registration.stream_prefix) :],
        status=seen.status,
        started_at=seen.started_at,
        updated_at=seen.updated_at,
        events=seen.events,
        first_position=seen.first_position,
        last_position=seen.last_position,
        stuck_after=limit if stuck else None,
        forked_to=seen.forked_to,
    )
