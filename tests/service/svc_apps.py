"""Apps the service tests run in ``decider run`` processes (``svc_apps:fines_app`` and
``svc_apps:chores_app``; the tests put this folder on the subprocess's PYTHONPATH).

Every handler records its effect in the SQLite file named by ``$SVC_EFFECTS_DB``, table
``effects(command_id PRIMARY KEY, kind, calls)``: one row per command id (the effect, made
idempotent by its key) and ``calls`` counting how many times the handler ran for it (at least
once delivery shows as calls > 1).

- ``fines_app``: the traffic-fine workflow; all three commands are handled (issuing the fine
  is an effect too).
- ``chores_app``: ``Errand`` sends ``RunErrand``, whose handler always fails for a doomed
  errand (3 attempts, then parked; the workflow gets ``decider.CommandFailed``, publishes
  ``ErrandAbandoned`` and completes); ``Reminder`` schedules ``ReminderDue`` after some seconds
  and completes when it comes.
"""

from __future__ import annotations

import os
import sqlite3
import threading
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

EFFECTS_ENV = "SVC_EFFECTS_DB"
DELAY_ENV = "SVC_HANDLER_DELAY"
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS effects("
    "command_id TEXT PRIMARY KEY, kind TEXT NOT NULL, calls INTEGER NOT NULL)"
)
_local = threading.local()


def effects_connection(path: str) -> sqlite3.Connection:
    connection = sqlite3.connect(path, timeout=30, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    # A killed process loses nothing the OS already has; only power loss would.
    connection.execute("PRAGMA synchronous=OFF")
    connection.execute(SCHEMA)
    return connection


def record_effect(command_id: str, kind: str) -> None:
    """The effect of a command, keyed by its id: a second call only counts.

    ``$SVC_HANDLER_DELAY`` seconds pass first, as for a call to a remote service, so that a
    run lasts long enough to be killed in the middle.
    """
    delay = float(os.environ.get(DELAY_ENV) or 0)
    if delay:
        threading.Event().wait(delay)
    connection: sqlite3.Connection | None = getattr(_local, "connection", None)
    if connection is None:
        connection = _local.connection = effects_connection(os.environ[EFFECTS_ENV])
    connection.execute(
        "INSERT INTO effects(command_id, kind, calls) VALUES (?, ?, 1) "
        "ON CONFLICT(command_id) DO UPDATE SET calls = calls + 1",
        (command_id, kind),
    )


def read_effects(path: str) -> dict[str, tuple[str, int]]:
    """command id -> (kind, calls)."""
    connection = effects_connection(path)
    try:
        rows = connection.execute("SELECT command_id, kind, calls FROM effects").fetchall()
    finally:
        connection.close()
    return {command_id: (kind, calls) for command_id, kind, calls in rows}


# -- the traffic-fine workflow with recorded effects -------------------------------------


def number_with_effect(command: GenerateTrafficFineSystemNumber, command_id: str) -> list[object]:
    record_effect(command_id, "number")
    return generate_system_number(command, command_id)


def code_with_effect(
    command: GenerateTrafficFineManualIdentificationCode, command_id: str
) -> list[object]:
    record_effect(command_id, "code")
    return generate_manual_identification_code(command, command_id)


def issue_with_effect(command: IssueTrafficFine, command_id: str) -> list[object]:
    record_effect(command_id, "issue")
    return []


def _report_id(report: PoliceReportPublished, _: Metadata) -> str:
    return report.police_report_id


fines_app = App("svc-fines")
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
FINE_PARKING = ["Began", "InitiatedBy:fines.PoliceReportPublished", "Completed"]

# -- chores: a failing handler, and a timer --------------------------------------------


@message("svc.ErrandRequested")
@attrs.frozen(kw_only=True)
class ErrandRequested:
    errand_id: str
    doomed: bool


@message("svc.RunErrand")
@attrs.frozen(kw_only=True)
class RunErrand:
    errand_id: str
    doomed: bool


@message("svc.ErrandDone")
@attrs.frozen(kw_only=True)
class ErrandDone:
    errand_id: str


@message("svc.ErrandAbandoned")
@attrs.frozen(kw_only=True)
class ErrandAbandoned:
    errand_id: str
    reason: str


def errand_decide(input: Any, state: str) -> Sequence[Command[Any]]:
    match input:
        case ErrandRequested(errand_id=errand_id, doomed=doomed):
            return [Send(RunErrand(errand_id=errand_id, doomed=doomed))]
        case ErrandDone():
            return [Complete()]
        case CommandFailed(reason=reason):
            return [Publish(ErrandAbandoned(errand_id=state, reason=reason)), Complete()]
    raise ValueError(f"unexpected input {input!r}")


def errand_evolve(state: str, event: WorkflowEvent[Any, Any]) -> str:
    match event:
        case InitiatedBy(ErrandRequested(errand_id=errand_id)):
            return errand_id
    return state


errand = Workflow("Errand", "", errand_evolve, errand_decide)


def run_errand(command: RunErrand, command_id: str) -> list[object]:
    record_effect(command_id, "errand")
    if command.doomed:
        raise RuntimeError(f"errand {command.errand_id} cannot be done")
    return [ErrandDone(errand_id=command.errand_id)]


@message("svc.ReminderSet")
@attrs.frozen(kw_only=True)
class ReminderSet:
    reminder_id: str
    seconds: float


@message("svc.ReminderDue")
@attrs.frozen(kw_only=True)
class ReminderDue:
    reminder_id: str


def reminder_decide(input: Any, state: None) -> Sequence[Command[Any]]:
    match input:
        case ReminderSet(reminder_id=reminder_id, seconds=seconds):
            return [Schedule(timedelta(seconds=seconds), ReminderDue(reminder_id=reminder_id))]
        case ReminderDue():
            return [Complete()]
    raise ValueError(f"unexpected input {input!r}")


reminder: Workflow[Any, None, Any] = Workflow(
    "Reminder", None, lambda state, event: state, reminder_decide
)

chores_app = App("svc-chores")
chores_app.workflow(
    errand,
    inputs={
        ErrandRequested: lambda m, _: m.errand_id,
        ErrandDone: by_correlation,
        CommandFailed: by_correlation,
    },
)
chores_app.add_handler(
    RunErrand, run_errand, retry=RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.05)
)
chores_app.workflow(
    reminder, inputs={ReminderSet: lambda m, _: m.reminder_id, ReminderDue: by_correlation}
)

ERRAND_DONE = ["Began", "InitiatedBy:svc.ErrandRequested", "Sent:svc.RunErrand"]
ERRAND_DONE += ["Received:svc.ErrandDone", "Completed"]
ERRAND_ABANDONED = ["Began", "InitiatedBy:svc.ErrandRequested", "Sent:svc.RunErrand"]
ERRAND_ABANDONED += ["Received:decider.CommandFailed", "Published:svc.ErrandAbandoned", "Completed"]
REMINDER = ["Began", "InitiatedBy:svc.ReminderSet", "Scheduled:svc.ReminderDue"]
REMINDER += ["Received:svc.ReminderDue", "Completed"]
