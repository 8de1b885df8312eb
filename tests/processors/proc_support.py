"""Small workflows and helpers for the processor tests.

- ``Tally``: sums numbers per instance; its routes and decide misbehave on purpose for some
  inputs (route ``None`` for an empty id, route raising for id ``"boom"``, decide raising for a
  number that would take the
  tally below zero), to exercise poison handling.
- ``Job``: sends ``DoWork`` to a handler; completes on ``WorkDone`` or, compensating, on
  ``decider.CommandFailed`` (publishing ``JobAbandoned``).
- ``Reminder``: schedules ``Reminded`` after some seconds, replies with an acknowledgement,
  completes when reminded.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import attrs

from decider import (
    Command,
    Complete,
    InitiatedBy,
    Metadata,
    Publish,
    Received,
    Reply,
    Schedule,
    Send,
    Workflow,
    WorkflowEvent,
    message,
)
from decider.processors import App, CommandFailed, by_correlation
from decider.stores.protocol import EventStore, Filter, RecordedEvent

# -- Tally ------------------------------------------------------------------------------


@message("ptest.Added")
@attrs.frozen(kw_only=True)
class Added:
    """Add ``amount`` to the tally ``tally_id``."""

    tally_id: str
    amount: int


@message("ptest.Closed")
@attrs.frozen(kw_only=True)
class Closed:
    """Close the tally."""

    tally_id: str


def tally_decide(message: Any, total: int) -> Sequence[Command[Any]]:
    if isinstance(message, Added) and total + message.amount < 0:
        raise ValueError("negative amounts may not take a tally below zero")
    if isinstance(message, Closed):
        return [Complete()]
    return []


def tally_evolve(total: int, event: WorkflowEvent[Any, Any]) -> int:
    match event:
        case InitiatedBy(Added(amount=amount)) | Received(Added(amount=amount)):
            return total + amount
    return total


tally = Workflow("Tally", 0, tally_evolve, tally_decide)


def tally_route(message: Added | Closed, metadata: Metadata) -> str | None:
    if message.tally_id == "boom":
        raise RuntimeError("the route cannot cope")
    return message.tally_id or None


def tally_app(name: str) -> App:
    app = App(name)
    app.workflow(tally, inputs={Added: tally_route, Closed: tally_route})
    return app


# -- Job --------------------------------------------------------------------------------


@message("ptest.JobRequested")
@attrs.frozen(kw_only=True)
class JobRequested:
    job_id: str
    action: str


@message("ptest.DoWork")
@attrs.frozen(kw_only=True)
class DoWork:
    job_id: str
    action: str


@message("ptest.WorkDone")
@attrs.frozen(kw_only=True)
class WorkDone:
    job_id: str


@message("ptest.JobAbandoned")
@attrs.frozen(kw_only=True)
class JobAbandoned:
    job_id: str
    reason: str


@attrs.frozen
class JobState:
    job_id: str = ""
    failed: str | None = None


def job_decide(message: Any, state: JobState) -> Sequence[Command[Any]]:
    match message:
        case JobRequested(job_id=job_id, action=action):
            return [Send(DoWork(job_id=job_id, action=action))]
        case WorkDone():
            return [Complete()]
        case CommandFailed(reason=reason):
            return [Publish(JobAbandoned(job_id=state.job_id, reason=reason)), Complete()]
    raise ValueError(f"unexpected {message!r}")


def job_evolve(state: JobState, event: WorkflowEvent[Any, Any]) -> JobState:
    match event:
        case InitiatedBy(JobRequested(job_id=job_id)):
            return JobState(job_id)
        case Received(CommandFailed(reason=reason)):
            return JobState(state.job_id, reason)
    return state


job = Workflow("Job", JobState(), job_evolve, job_decide)


def job_app(name: str, **handler_options: Any) -> tuple[App, collections.Counter[str]]:
    """The Job app; its handler fails for action ``"fail"`` and counts calls per job id."""
    calls: collections.Counter[str] = collections.Counter()
    app = App(name)
    app.workflow(
        job,
        inputs={
            JobRequested: lambda m, _: m.job_id,
            WorkDone: by_correlation,
            CommandFailed: by_correlation,
        },
    )

    @app.handler(DoWork, **handler_options)
    def do_work(command: DoWork, command_id: str) -> list[object]:
        calls[command.job_id] += 1
        if command.action == "fail":
            raise RuntimeError(f"cannot do {command.job_id}")
        return [WorkDone(job_id=command.job_id)]

    return app, calls


# -- Reminder ---------------------------------------------------------------------------


@message("ptest.RemindMe")
@attrs.frozen(kw_only=True)
class RemindMe:
    reminder_id: str
    seconds: float


@message("ptest.Reminded")
@attrs.frozen(kw_only=True)
class Reminded:
    reminder_id: str


@message("ptest.ReminderSet")
@attrs.frozen(kw_only=True)
class ReminderSet:
    reminder_id: str


def reminder_decide(message: Any, state: int) -> Sequence[Command[Any]]:
    match message:
        case RemindMe(reminder_id=rid, seconds=seconds):
            return [
                Schedule(timedelta(seconds=seconds), Reminded(reminder_id=rid)),
                Reply(ReminderSet(reminder_id=rid)),
            ]
        case Reminded():
            return [Complete()]
    raise ValueError(f"unexpected {message!r}")


reminder = Workflow("Reminder", 0, lambda s, e: s + 1, reminder_decide)


def reminder_app(name: str) -> App:
    app = App(name)
    app.workflow(reminder, inputs={RemindMe: lambda m, _: m.reminder_id, Reminded: by_correlation})
    return app


# -- helpers ----------------------------------------------------------------------------


def events(store: EventStore, prefix: str = "") -> list[RecordedEvent]:
    """Every event of streams starting with ``prefix``, in log order."""
    found: list[RecordedEvent] = []
    after: int | None = None
    flt = Filter(stream_prefixes=(prefix,)) if prefix else Filter()
    while page := store.read_all(after, 1000, flt):
        found.extend(page)
        after = page[-1].position
    return found


def counts(store: EventStore, prefix: str = "") -> collections.Counter[str]:
    """How many events each stream starting with ``prefix`` holds."""
    return collections.Counter(e.stream for e in events(store, prefix))


def types(store: EventStore, stream: str) -> list[str]:
    """The event types of ``stream``, in order."""
    return [e.type for e in store.read_stream(stream)]
