"""Replay checks: recorded histories replayed through the current decide and evolve."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest

from decider import (
    Began,
    CancelRequested,
    Codec,
    Command,
    Complete,
    InitiatedBy,
    Metadata,
    Received,
    Send,
    Sent,
    Workflow,
    WorkflowEvent,
    began_version,
)
from decider.testing import WorkflowSpec, assert_replays, replay_check
from samples.traffic_fine import workflow
from samples.traffic_fine.messages import (
    GenerateTrafficFineManualIdentificationCode,
    Input,
    Output,
    PoliceReportPublished,
    SpeedingViolation,
    TrafficFineManualIdentificationCodeGenerated,
    TrafficFineSystemNumberGenerated,
)
from samples.traffic_fine.workflow import State
from samples.traffic_fine.workflow import decide as current_decide

REPORT = PoliceReportPublished(
    police_report_id="PR-1",
    offense=SpeedingViolation(maximum_speed="50 km/h", measured_speed="72 km/h"),
)
NUMBER = TrafficFineSystemNumberGenerated(police_report_id="PR-1", number="FINE-7")
CODE = TrafficFineManualIdentificationCodeGenerated(
    police_report_id="PR-1", number="FINE-7", code="XMfhyM"
)
REQUEST = CancelRequested(reason="withdrawn")


def _history(*inputs: Any) -> tuple[WorkflowEvent[Input, Output], ...]:
    """A history as the processors record it: the inputs handled one after the other."""
    *given, last = inputs
    return WorkflowSpec(workflow).given(*given).when(last).history


FINISHED = _history(REPORT, NUMBER, CODE)
HALFWAY = _history(REPORT, NUMBER)


def _asks_for_the_code_in_capitals(message: Input, state: State) -> Sequence[Command[Output]]:
    commands = current_decide(message, state)
    match commands:
        case [Send(GenerateTrafficFineManualIdentificationCode() as ask)]:
            return [Send(attrs.evolve(ask, system_number=ask.system_number.lower()))]
    return commands


changed = attrs.evolve(workflow, decide=_asks_for_the_code_in_capitals)


def test_the_current_code_replays_its_own_histories() -> None:
    report = replay_check(workflow, FINISHED)

    assert report.ok
    assert (report.inputs, report.events) == (3, len(FINISHED))
    assert (
        str(report)
        == f"IssueTrafficFineForSpeedingViolation: 3 inputs, {len(FINISHED)} events replay the same"
    )


def test_a_changed_decision_is_reported_at_the_first_event_that_differs() -> None:
    report = replay_check(changed, FINISHED)

    assert not report.ok
    difference = report.difference
    assert difference is not None
    assert difference.revision == 4  # Began, InitiatedBy, Sent, Received(NUMBER), >Sent<
    assert difference.input_revision == 3
    assert difference.input == NUMBER
    assert difference.recorded == FINISHED[4]
    assert isinstance(difference.replayed, Sent)
    assert "field message.system_number: expected 'FINE-7', actual 'fine-7'" in str(report)


def test_a_replay_stops_at_the_first_difference() -> None:
    report = replay_check(changed, FINISHED)

    assert report.inputs == 2 and report.events == 4


def test_a_decision_that_now_raises_is_reported_with_the_error() -> None:
    def refuses_numbers(message: Input, state: State) -> Sequence[Command[Output]]:
        if isinstance(message, TrafficFineSystemNumberGenerated):
            raise ValueError("numbers are no longer accepted")
        return current_decide(message, state)

    report = replay_check(attrs.evolve(workflow, decide=refuses_numbers), HALFWAY)

    assert report.difference is not None
    assert report.difference.revision == 3
    assert "decide now raises ValueError('numbers are no longer accepted')" in str(report)


def test_an_evolve_that_now_raises_is_reported_with_the_events_it_failed_on() -> None:
    def strict(state: State, event: WorkflowEvent[Input, Output]) -> State:
        if isinstance(event, Received):
            raise KeyError("no Received any more")
        return workflow.evolve(state, event)

    report = replay_check(attrs.evolve(workflow, evolve=strict), FINISHED)

    assert report.difference is not None
    assert "evolve now raises KeyError('no Received any more') on the recorded events #3-#4" in str(
        report
    )


def test_a_dropped_command_shows_nothing_where_the_history_has_an_event() -> None:
    def forgets(message: Input, state: State) -> Sequence[Command[Output]]:
        return [c for c in current_decide(message, state) if isinstance(c, Complete)]

    report = replay_check(attrs.evolve(workflow, decide=forgets), FINISHED)

    assert report.difference is not None
    assert report.difference.revision == 2 and report.difference.replayed is None
    assert "now nothing" in str(report)


def test_an_event_that_records_no_input_where_one_is_due_is_reported() -> None:
    broken: list[WorkflowEvent[Input, Output]] = [Began(), Sent(CODE)]  # type: ignore[arg-type]

    report = replay_check(workflow, broken)

    assert report.difference is not None
    assert "an event records no input here" in str(report)


def test_ignored_inputs_replay_as_ignored() -> None:
    late = _history(REPORT, NUMBER, CODE, NUMBER)

    assert replay_check(workflow, late).ok


def test_a_history_failed_by_the_fail_policy_replays_when_decide_still_raises() -> None:
    failing = attrs.evolve(workflow, on_error="fail")
    history = WorkflowSpec(failing).given(REPORT).when(CODE).then_failed().history

    assert replay_check(failing, history).ok
    fixed = attrs.evolve(failing, decide=lambda m, s: [] if m == CODE else current_decide(m, s))
    report = replay_check(fixed, history)
    assert report.difference is not None and report.difference.revision == 4


def test_a_cancel_at_once_replays_when_the_workflow_still_does_not_decide_on_cancels() -> None:
    history = WorkflowSpec(workflow, decides_cancel=False).given(REPORT).when(REQUEST).history

    assert replay_check(workflow, history, decides_cancel=False).ok
    report = replay_check(workflow, history, decides_cancel=True)
    assert report.difference is not None and "decide now raises UnexpectedInput" in str(report)


def test_assert_replays_names_every_history_that_differs() -> None:
    assert_replays(workflow, FINISHED, HALFWAY)

    with pytest.raises(AssertionError) as raised:
        assert_replays(changed, FINISHED, _history(REPORT), HALFWAY)

    text = str(raised.value)
    assert "2 of 3 recorded histories of IssueTrafficFineForSpeedingViolation" in text
    assert "history #0: IssueTrafficFineForSpeedingViolation: differs at #4" in text
    assert "history #2:" in text and "history #1:" not in text


def test_a_history_read_back_through_the_codec_replays_the_same() -> None:
    codec = Codec()
    stored = [codec.encode_event(event) for event in FINISHED]

    assert replay_check(workflow, [codec.decode_event(*row) for row in stored]).ok


def test_the_workflow_version_is_recorded_in_the_metadata_of_began_only() -> None:
    versioned: Workflow[Any, Any, Any] = attrs.evolve(workflow, version="2024-06-fines-v2")
    codec = Codec()

    versions = [began_version(versioned, event) for event in FINISHED]
    assert versions[0] == "2024-06-fines-v2" and set(versions[1:]) == {None}
    assert began_version(workflow, Began()) is None
    metadata = Metadata(message_id="m1", workflow_version=versions[0])
    assert codec.decode_metadata(codec.encode_metadata(metadata)) == metadata
    assert b"workflow_version" not in codec.encode_metadata(Metadata(message_id="m1"))
    assert isinstance(FINISHED[1], InitiatedBy)
