"""The test workflows, and the apps the tests run in-process and in ``decider run`` processes.

- ``Tally``: sums numbers per instance; its routes and decide misbehave on purpose for some
  inputs (route ``None`` for an empty id, route raising for id ``"boom"``, decide raising for a
  number that would take the tally below zero), to exercise poison handling.
- ``Job``: sends ``DoWork`` to a handler that fails for action ``"fail"``; completes on
  ``WorkDone`` or, compensating, on ``decider.CommandFailed`` (publishing ``JobAbandoned``).
- ``Reminder``: schedules ``Reminded`` after some seconds, replies with an acknowledgement,
  completes when reminded.
- ``fines_app`` and ``chores_app``: the apps the service tests run in ``decider run``
  processes (``tests.support.apps:fines_app``), whose handlers record their effects in the side
  table of :mod:`tests.support.effects`: the traffic-fine sample, and ``Job`` (3 attempts, then
  parked) with ``Reminder``.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
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
from decider.processors import App, CommandFailed, RetryPolicy, by_correlation
from samples.traffic_fine.app import (
    generate_manual_identification_code,
    generate_system_number,
)
from samples.traffic_fine.messages import (
    GenerateTrafficFineManualIdentificationCode,
    GenerateTrafficFineSystemNumber,
    IssueTrafficFine,
    PoliceReportPublished,
    TrafficFineManualIdentificationCodeGenerated,
    TrafficFineSystemNumberGenerated,
)
from samples.traffic_fine.workflow import workflow as traffic_fine
from tests.support.effects import record_effect

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
    """Complete on ``Closed``; refuse an amount that would take the total below zero."""
    if isinstance(message, Added) and total + message.amount < 0:
        raise ValueError("negative amounts may not take a tally below zero")
    if isinstance(message, Closed):
        return [Complete()]
    return []


def tally_evolve(total: int, event: WorkflowEvent[Any, Any]) -> int:
    """The sum of the amounts added."""
    match event:
        case InitiatedBy(Added(amount=amount)) | Received(Added(amount=amount)):
            return total + amount
    return total


tally = Workflow("Tally", 0, tally_evolve, tally_decide)


def tally_route(message: Added | Closed, metadata: Metadata) -> str | None:
    """The tally id; ``None`` for an empty one; raises for ``"boom"``."""
    if message.tally_id == "boom":
        raise RuntimeError("the route cannot cope")
    return message.tally_id or None


def tally_app(name: str) -> App:
    """An app with the ``Tally`` workflow."""
    app = App(name)
    app.workflow(tally, inputs={Added: tally_route, Closed: tally_route})
    return app


# -- Job --------------------------------------------------------------------------------


@message("ptest.JobRequested")
@attrs.frozen(kw_only=True)
class JobRequested:
    """Start job ``job_id``; action ``"fail"`` makes its handler fail."""

    job_id: str
    action: str


@message("ptest.DoWork")
@attrs.frozen(kw_only=True)
class DoWork:
    """The command the ``Job`` workflow sends."""

    job_id: str
    action: str


@message("ptest.WorkDone")
@attrs.frozen(kw_only=True)
class WorkDone:
    """The handler's result for ``DoWork``."""

    job_id: str


@message("ptest.JobAbandoned")
@attrs.frozen(kw_only=True)
class JobAbandoned:
    """Published by the ``Job`` workflow when its command failed for good."""

    job_id: str
    reason: str


@attrs.frozen
class JobState:
    """The job's id and, once its command failed, why."""

    job_id: str = ""
    failed: str | None = None


def job_decide(message: Any, state: JobState) -> Sequence[Command[Any]]:
    """Send ``DoWork``; complete on ``WorkDone``; publish ``JobAbandoned`` on failure."""
    match message:
        case JobRequested(job_id=job_id, action=action):
            return [Send(DoWork(job_id=job_id, action=action))]
        case WorkDone():
            return [Complete()]
        case CommandFailed(reason=reason):
            return [Publish(JobAbandoned(job_id=state.job_id, reason=reason)), Complete()]
    raise ValueError(f"unexpected {message!r}")


def job_evolve(state: JobState, event: WorkflowEvent[Any, Any]) -> JobState:
    """Remember the job id and the failure."""
    match event:
        case InitiatedBy(JobRequested(job_id=job_id)):
            return JobState(job_id)
        case Received(CommandFailed(reason=reason)):
            return JobState(state.job_id, reason)
    return state


job = Workflow("Job", JobState(), job_evolve, job_decide)


def _job_id(request: JobRequested, _: Metadata) -> str:
    return request.job_id


def add_job(
    app: App, effect: Callable[[str, str], None] | None = None, **handler_options: Any
) -> collections.Counter[str]:
    """Add ``Job`` and its handler to ``app``; the handler's calls, counted per job id.

    The handler calls ``effect(command_id, "job")`` first, where given, and fails for action
    ``"fail"``.
    """
    calls: collections.Counter[str] = collections.Counter()
    app.workflow(
        job,
        inputs={JobRequested: _job_id, WorkDone: by_correlation, CommandFailed: by_correlation},
    )

    @app.handler(DoWork, **handler_options)
    def do_work(command: DoWork, command_id: str) -> list[object]:
        calls[command.job_id] += 1
        if effect is not None:
            effect(command_id, "job")
        if command.action == "fail":
            raise RuntimeError(f"cannot do {command.job_id}")
        return [WorkDone(job_id=command.job_id)]

    return calls


def job_app(name: str, **handler_options: Any) -> tuple[App, collections.Counter[str]]:
    """An app with ``Job`` (see :func:`add_job`), and its handler's calls per job id."""
    app = App(name)
    return app, add_job(app, **handler_options)


# -- Reminder ---------------------------------------------------------------------------


@message("ptest.RemindMe")
@attrs.frozen(kw_only=True)
class RemindMe:
    """Remind ``reminder_id`` in ``seconds``."""

    reminder_id: str
    seconds: float


@message("ptest.Reminded")
@attrs.frozen(kw_only=True)
class Reminded:
    """The timer the ``Reminder`` workflow schedules."""

    reminder_id: str


@message("ptest.ReminderSet")
@attrs.frozen(kw_only=True)
class ReminderSet:
    """The ``Reminder`` workflow's reply to ``RemindMe``."""

    reminder_id: str


def reminder_decide(message: Any, state: int) -> Sequence[Command[Any]]:
    """Schedule ``Reminded`` and reply; complete when reminded."""
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


def _reminder_id(request: RemindMe, _: Metadata) -> str:
    return request.reminder_id


def reminder_app(name: str) -> App:
    """An app with the ``Reminder`` workflow."""
    app = App(name)
    app.workflow(reminder, inputs={RemindMe: _reminder_id, Reminded: by_correlation})
    return app


# -- the apps of the service tests ------------------------------------------------------


def number_with_effect(command: GenerateTrafficFineSystemNumber, command_id: str) -> list[object]:
    """The sample's handler, its effect recorded."""
    record_effect(command_id, "number")
    return generate_system_number(command, command_id)


def code_with_effect(
    command: GenerateTrafficFineManualIdentificationCode, command_id: str
) -> list[object]:
    """The sample's handler, its effect recorded."""
    record_effect(command_id, "code")
    return generate_manual_identification_code(command, command_id)


def issue_with_effect(command: IssueTrafficFine, command_id: str) -> list[object]:
    """Issuing the fine is an effect too."""
    record_effect(command_id, "issue")
    return []


def _report_id(report: PoliceReportPublished, _: Metadata) -> str:
    return report.police_report_id


fines_app = App("svc-fines")
"""The traffic-fine workflow; all three commands are handled, each recording its effect."""
fines_app.workflow(
    traffic_fine,
    inputs={
        PoliceReportPublished: _report_id,
        TrafficFineSystemNumberGenerated: by_correlation,
        TrafficFineManualIdentificationCodeGenerated: by_correlation,
    },
)
fines_app.add_handler(GenerateTrafficFineSystemNumber, number_with_effect)
fines_app.add_handler(GenerateTrafficFineManualIdentificationCode, code_with_effect)
fines_app.add_handler(IssueTrafficFine, issue_with_effect)

chores_app = App("svc-chores")
"""``Job`` (its handler records its effect; 3 attempts, then parked) and ``Reminder``."""
add_job(
    chores_app,
    record_effect,
    retry=RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.05),
)
chores_app.workflow(reminder, inputs={RemindMe: _reminder_id, Reminded: by_correlation})

# -- expected histories (the types of an instance's events) -----------------------------

FINE_SPEEDING = [
    "Began",
    "InitiatedBy:fines.PoliceReportPublished",
    "Sent:fines.GenerateTrafficFineSystemNumber",
    "Received:fines.TrafficFineSystemNumberGenerated",
    "Sent:fines.GenerateTrafficFineManualIdentificationCode",
    "Received:fines.TrafficFineManualIdentificationCodeGenerated",
    "Sent:fines.IssueTrafficFine",
    "Completed",
]
"""A traffic fine for speeding."""

FINE_PARKING = ["Began", "InitiatedBy:fines.PoliceReportPublished", "Completed"]
"""A traffic fine for parking (nobody is fined)."""

JOB_DONE = [
    "Began",
    "InitiatedBy:ptest.JobRequested",
    "Sent:ptest.DoWork",
    "Received:ptest.WorkDone",
    "Completed",
]
"""A job whose work was done."""

JOB_ABANDONED = [
    "Began",
    "InitiatedBy:ptest.JobRequested",
    "Sent:ptest.DoWork",
    "Received:decider.CommandFailed",
    "Published:ptest.JobAbandoned",
    "Completed",
]
"""A job whose command failed for good."""

REMINDER = [
    "Began",
    "InitiatedBy:ptest.RemindMe",
    "Scheduled:ptest.Reminded",
    "Replied:ptest.ReminderSet",
    "Received:ptest.Reminded",
    "Completed",
]
"""A reminder that was reminded."""
