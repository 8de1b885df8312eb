"""The traffic-fine app of the telemetry tests, run by ``decider run`` processes.

Importing it plugs in the span exporter of :mod:`tests.support.tracing` (when the test set
its variable). With :data:`HOLD_ENV` set, the manual-identification-code handler fails
(retryably) and the next attempt is a minute away: the process holds the workflow there, with
work pending, until the test stops it and a second process (without the variable) goes on.
"""

from __future__ import annotations

import os
from datetime import timedelta

from returns.result import Failure, Result, Success

from decider import Metadata
from decider.processors import App, HandlerFailure, RetryPolicy, by_correlation
from samples.traffic_fine.app import generate_manual_identification_code, generate_system_number
from samples.traffic_fine.messages import (
    GenerateTrafficFineManualIdentificationCode,
    GenerateTrafficFineSystemNumber,
    IssueTrafficFine,
    PoliceReportPublished,
    TrafficFineManualIdentificationCodeGenerated,
    TrafficFineSystemNumberGenerated,
)
from samples.traffic_fine.workflow import workflow as traffic_fine
from tests.support.tracing import export_spans_from_env

HOLD_ENV = "DECIDER_TEST_HOLD"
"""Set (non-empty): the code handler fails, and is retried only after a minute."""

STUCK_AFTER = timedelta(seconds=1)
"""The fines' ``progress_within``: a held instance is soon stuck."""

REPORTS = "police-reports"
"""Where the tests publish the police reports."""

export_spans_from_env()


def _report_id(report: PoliceReportPublished, _: Metadata) -> str:
    return report.police_report_id


def held_code(
    command: GenerateTrafficFineManualIdentificationCode, command_id: str
) -> Result[list[object], HandlerFailure]:
    """The sample's handler, failing while :data:`HOLD_ENV` is set."""
    if os.environ.get(HOLD_ENV):
        return Failure(HandlerFailure(reason="held by the test", retryable=True))
    return Success(generate_manual_identification_code(command, command_id))


def issue(command: IssueTrafficFine, command_id: str) -> list[object]:
    """Issuing the fine: nothing to record."""
    return []


app = App("traced-fines")
"""The traffic-fine workflow with its three handlers."""
app.workflow(
    traffic_fine,
    inputs={
        PoliceReportPublished: _report_id,
        TrafficFineSystemNumberGenerated: by_correlation,
        TrafficFineManualIdentificationCodeGenerated: by_correlation,
    },
    progress_within=STUCK_AFTER,
)
app.add_handler(GenerateTrafficFineSystemNumber, generate_system_number)
app.add_handler(
    GenerateTrafficFineManualIdentificationCode,
    held_code,
    retry=RetryPolicy(max_attempts=100, initial_delay=60.0, max_delay=60.0, jitter=0.0),
)
app.add_handler(IssueTrafficFine, issue)
