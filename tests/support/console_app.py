"""The app the console tests run: the traffic-fine workflow with handlers that can misbehave.

``tests.support.console_app:app`` is loaded by the console in its own process (the repository
root on its PYTHONPATH) and run by a service in the test's process, where :data:`BROKEN` decides:

- the system-number handler gives no answer for a report id starting ``PR-WAIT``, so that
  instance keeps running;
- the code handler fails for a report id starting ``PR-PARK`` while :data:`BROKEN` is set, and
  has one attempt, so the command is parked at once; clearing :data:`BROKEN` and retrying the
  parked command lets the instance complete;
- the workflow fails its instance when ``decide`` raises (``on_error="fail"``), so an input it
  cannot take in its state (a code before any report) leaves a failed instance.
"""

from __future__ import annotations

import threading

import attrs

from decider.processors import App, RetryPolicy, by_correlation
from samples.traffic_fine.app import (
    _report_id,
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
from samples.traffic_fine.workflow import workflow

BROKEN = threading.Event()
"""Set: the code handler fails for ``PR-PARK*`` reports."""
BROKEN.set()


def system_number(command: GenerateTrafficFineSystemNumber, command_id: str) -> list[object]:
    """The sample's handler, except that ``PR-WAIT*`` reports never get their number."""
    if command.police_report_id.startswith("PR-WAIT"):
        return []
    return generate_system_number(command, command_id)


def identification_code(
    command: GenerateTrafficFineManualIdentificationCode, command_id: str
) -> list[object]:
    """The sample's handler, except that it fails for ``PR-PARK*`` reports while broken."""
    if command.police_report_id.startswith("PR-PARK") and BROKEN.is_set():
        raise RuntimeError("the code service is down")
    return generate_manual_identification_code(command, command_id)


app = App("console-fines", retry=RetryPolicy(max_attempts=1, initial_delay=0, jitter=0))
app.workflow(
    attrs.evolve(workflow, on_error="fail"),
    inputs={
        PoliceReportPublished: _report_id,
        TrafficFineSystemNumberGenerated: by_correlation,
        TrafficFineManualIdentificationCodeGenerated: by_correlation,
    },
)
app.add_handler(GenerateTrafficFineSystemNumber, system_number)
app.add_handler(GenerateTrafficFineManualIdentificationCode, identification_code)
app.route(IssueTrafficFine, stream="fines-issued")
