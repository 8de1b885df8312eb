"""The traffic-fine sample as a runnable App: the workflow, its handlers and its routes.

The handlers derive the system number and the manual identification code from the command id,
so carrying a command out twice (after a crash, or a retry) yields the same answer; a real
system would call a number service with the command id as idempotency key. ``IssueTrafficFine``
is appended to the ``fines-issued`` stream, for the system that issues fines to read.
"""

from __future__ import annotations

import hashlib

from decider import Metadata
from decider.processors import App, RetryPolicy, by_correlation
from samples.traffic_fine.messages import (
    GenerateTrafficFineManualIdentificationCode,
    GenerateTrafficFineSystemNumber,
    IssueTrafficFine,
    PoliceReportPublished,
    TrafficFineManualIdentificationCodeGenerated,
    TrafficFineSystemNumberGenerated,
)
from samples.traffic_fine.workflow import workflow

ISSUED_STREAM = "fines-issued"
"""Where issued fines go."""

REPORTS_STREAM = "police-reports"
"""Where the outside publishes police reports."""


def _digest(command_id: str, salt: str) -> str:
    return hashlib.sha256(f"{salt}:{command_id}".encode()).hexdigest().upper()


def generate_system_number(
    command: GenerateTrafficFineSystemNumber, command_id: str
) -> list[object]:
    """The fine's system number, the same for the same command id."""
    number = f"PAY-{_digest(command_id, 'number')[:8]}"
    return [
        TrafficFineSystemNumberGenerated(police_report_id=command.police_report_id, number=number)
    ]


def generate_manual_identification_code(
    command: GenerateTrafficFineManualIdentificationCode, command_id: str
) -> list[object]:
    """The fine's manual identification code, the same for the same command id."""
    code = _digest(command_id, "code")[:6]
    return [
        TrafficFineManualIdentificationCodeGenerated(
            police_report_id=command.police_report_id,
            number=command.system_number,
            code=code,
        )
    ]


def _report_id(report: PoliceReportPublished, _: Metadata) -> str:
    return report.police_report_id


def make_app(name: str = "traffic-fines", retry: RetryPolicy | None = None) -> App:
    """A fresh App for the traffic-fine workflow (tests make their own variations from it)."""
    app = App(name, retry=retry)
    app.workflow(
        workflow,
        inputs={
            PoliceReportPublished: _report_id,
            TrafficFineSystemNumberGenerated: by_correlation,
            TrafficFineManualIdentificationCodeGenerated: by_correlation,
        },
    )
    # Both handlers compute their answer from the command id: quick, and they never block.
    app.add_handler(GenerateTrafficFineSystemNumber, generate_system_number, inline=True)
    app.add_handler(
        GenerateTrafficFineManualIdentificationCode,
        generate_manual_identification_code,
        inline=True,
    )
    app.route(IssueTrafficFine, stream=ISSUED_STREAM)
    return app


def make_state_stored_app(name: str = "traffic-fines-state") -> App:
    """The same App with the workflow state-stored: each instance's state in a row and its
    commands in an outbox, written in one transaction (SQLite or PostgreSQL)."""
    app = App(name)
    app.workflow(
        workflow,
        inputs={
            PoliceReportPublished: _report_id,
            TrafficFineSystemNumberGenerated: by_correlation,
            TrafficFineManualIdentificationCodeGenerated: by_correlation,
        },
        stored="state",
    )
    # Both handlers compute their answer from the command id: quick, and they never block.
    app.add_handler(GenerateTrafficFineSystemNumber, generate_system_number, inline=True)
    app.add_handler(
        GenerateTrafficFineManualIdentificationCode,
        generate_manual_identification_code,
        inline=True,
    )
    app.route(IssueTrafficFine, stream=ISSUED_STREAM)
    return app


app = make_app()
"""The traffic-fine App, as ``decider run samples.traffic_fine.app:app`` runs it."""
