"""Repair in bulk: fork every instance a query selects, each where ``replay-check`` finds that
the current code parts from its history.

:func:`fork_many` (``decider fork --workflow NAME --where failed --since TIME``) lists the
instances with :func:`~decider.processors.operate.listing.list_instances`, finds in each the
input of the first difference replay-check finds
(:func:`~decider.processors.client.forking.fork_point`), and forks it there with
:func:`~decider.processors.client.forking.fork`: the new generation decides that input, and
every one before it, with the current code. An instance is left as it is, with the reason,
when it replays the same (nothing to repair), was forked already (its newest generation is an
instance of its own, selected or not by the same query), or cannot be forked (the fork's
error, e.g. a workflow that keeps its state in a row).

Each fork is one :func:`~decider.processors.client.forking.fork`, idempotent as that is: a bulk
fork cut short and run again forks the rest and finds the ones it forked (forked already).
WARNING: the instances are forked one by one, not in one transaction: a bulk fork that stops
half-way leaves the ones before forked.
"""

from __future__ import annotations

from datetime import datetime

import attrs

from decider import Lifecycle
from decider.processors.app.definition import AppDefinition
from decider.processors.app.errors import OperationError
from decider.processors.client.forking import ForkPlan, fork, fork_point
from decider.processors.operate.listing import InstanceQuery, InstanceSummary, list_instances
from decider.stores.errors import CorruptEvent
from decider.stores.protocol import EventStore

__all__ = ["BulkFork", "InstanceFork", "fork_many"]


@attrs.frozen
class InstanceFork:
    """What a bulk fork did with one instance it selected: forked it (or, in a dry run, would
    fork it) by ``plan``, or left it, for the reason ``why_not``.

    ``at`` is the revision it was forked at (the input of the first difference), ``None`` where
    none was found.
    """

    stream: str
    status: Lifecycle
    at: int | None = None
    plan: ForkPlan | None = None
    why_not: str | None = None

    @property
    def forked(self) -> bool:
        """Whether it was forked (in a dry run: would be)."""
        return self.plan is not None

    def line(self, dry_run: bool = False) -> str:
        """One line: where it was forked and what it reuses, or why it was not."""
        head = f"{self.stream} ({self.status.value})"
        plan = self.plan
        if plan is None:
            return f"{head}: not forked: {self.why_not}"
        verb = "would fork" if dry_run else "forked"
        return (
            f"{head}: {verb} to {plan.generation} at revision {plan.at}: "
            f"{len(plan.reused)} command(s)/timer(s) reused, {len(plan.anew)} carried out anew, "
            f"{plan.inputs} input(s) decided again"
        )

    def as_json(self) -> dict[str, object]:
        """As a JSON object (``plan``: the fork plan's own JSON, or ``null``)."""
        plan = self.plan
        return {
            "stream": self.stream,
            "status": self.status.value,
            "forked": self.forked,
            "at": self.at,
            "generation": plan.generation if plan is not None else None,
            "reused": len(plan.reused) if plan is not None else 0,
            "anew": len(plan.anew) if plan is not None else 0,
            "why_not": self.why_not,
            "plan": plan.as_json() if plan is not None else None,
        }


@attrs.frozen
class BulkFork:
    """The report of :func:`fork_many`: one :class:`InstanceFork` per instance selected, in
    the order they began."""

    instances: tuple[InstanceFork, ...]
    reason: str
    dry_run: bool

    @property
    def forked(self) -> list[InstanceFork]:
        """The instances forked (in a dry run: that would be)."""
        return [i for i in self.instances if i.forked]

    @property
    def left(self) -> list[InstanceFork]:
        """The instances not forked, each with the reason."""
        return [i for i in self.instances if not i.forked]

    def summary(self) -> str:
        """How many were selected, forked and left, in words."""
        verb = "would be forked" if self.dry_run else "forked"
        return (
            f"{len(self.instances)} instance(s) selected: {len(self.forked)} {verb}, "
            f"{len(self.left)} not"
        )

    def lines(self) -> list[str]:
        """The report in words (what ``decider fork --workflow ...`` prints): a line per
        instance (in a dry run, with the events each new generation would record), then the
        summary."""
        lines = ["dry run: nothing is written"] if self.dry_run else []
        for instance in self.instances:
            lines.append(instance.line(self.dry_run))
            if self.dry_run and instance.plan is not None:
                lines.extend(f"  {line}" for line in instance.plan.lines()[2:])
        lines.append(self.summary())
        return lines

    def as_json(self) -> dict[str, object]:
        """As a JSON object."""
        return {
            "dry_run": self.dry_run,
            "reason": self.reason,
            "selected": len(self.instances),
            "forked": len(self.forked),
            "not_forked": len(self.left),
            "instances": [i.as_json() for i in self.instances],
        }


def fork_many(
    store: EventStore,
    app: AppDefinition,
    query: InstanceQuery,
    *,
    reason: str,
    dry_run: bool = False,
    now: datetime | None = None,
) -> BulkFork:
    """Fork every instance of ``app`` that ``query`` selects (as
    :func:`~decider.processors.operate.listing.list_instances` selects them: its ``limit``
    caps how many, ``None`` for all) at the input before the first difference the current code
    makes to its history, for ``reason``; with ``dry_run``, plan each fork and write nothing.

    Returns the report: for each instance its fork plan, or why it was left (it replays the
    same, was forked already, or the fork's error). Raises :class:`KeyError` for a workflow
    ``app`` does not have, and :class:`~decider.processors.app.errors.OperationError` for an
    empty ``reason``.
    """
    why = reason.strip()
    if not why:
        raise OperationError("a fork needs a reason")
    selected = list_instances(store, app, query, now).instances
    done = tuple(_fork_one(store, app, summary, why, dry_run) for summary in selected)
    return BulkFork(done, why, dry_run)


def _fork_one(
    store: EventStore, app: AppDefinition, summary: InstanceSummary, reason: str, dry_run: bool
) -> InstanceFork:
    stream, status = summary.stream, summary.status
    if summary.forked_to is not None:
        return InstanceFork(stream, status, why_not=f"forked already, to {summary.forked_to}")
    registration = app.workflows[summary.workflow]
    if registration.stored != "events":
        return InstanceFork(
            stream,
            status,
            why_not=f"{summary.workflow} keeps its state in a row (stored="
            f"{registration.stored!r}): only event-sourced instances can be forked",
        )
    try:
        at = fork_point(app, store, stream)
    except CorruptEvent as exc:
        return InstanceFork(stream, status, why_not=f"its history cannot be read: {exc}")
    except OperationError as exc:
        return InstanceFork(stream, status, why_not=str(exc))
    if at is None:
        return InstanceFork(stream, status, why_not="it replays the same: no difference found")
    try:
        plan = fork(app, store, stream, at=at, reason=reason, dry_run=dry_run)
    except OperationError as exc:
        return InstanceFork(stream, status, at, why_not=str(exc))
    if plan.already:
        return InstanceFork(stream, status, at, why_not=f"forked already, to {plan.generation}")
    return InstanceFork(stream, status, at, plan)
