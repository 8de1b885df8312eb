"""Given-when-then tests of the traffic-fine workflow, one per transition."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from decider import (
    Began,
    Complete,
    Completed,
    InitiatedBy,
    Received,
    Send,
    Sent,
)
from decider.testing import (
    WorkflowSpec,
    assert_decide_deterministic,
    assert_fold_total,
    strategy_for,
)
from samples.traffic_fine import workflow
from samples.traffic_fine.messages import (
    GenerateTrafficFineManualIdentificationCode,
    GenerateTrafficFineSystemNumber,
    IssueTrafficFine,
    ParkingViolation,
    PoliceReportPublished,
    SpeedingViolation,
    TrafficFineManualIdentificationCodeGenerated,
    TrafficFineSystemNumberGenerated,
)
from samples.traffic_fine.workflow import (
    AwaitingManualIdentificationCode,
    AwaitingSystemNumber,
    Final,
    UnexpectedInput,
)

spec = WorkflowSpec(workflow)

REPORT = "PR-2023-1"
SPEEDING = PoliceReportPublished(
    police_report_id=REPORT,
    offense=SpeedingViolation(maximum_speed="50 km/h", measured_speed="72 km/h"),
)
NUMBER = TrafficFineSystemNumberGenerated(police_report_id=REPORT, number="PPXRG/23TV8457")
CODE = TrafficFineManualIdentificationCodeGenerated(
    police_report_id=REPORT, number="PPXRG/23TV8457", code="XMfhyM"
)


def test_readme_example() -> None:
    spec = WorkflowSpec(workflow)
    report = PoliceReportPublished(
        police_report_id="PR-1",
        offense=SpeedingViolation(maximum_speed="50 km/h", measured_speed="72 km/h"),
    )
    number = TrafficFineSystemNumberGenerated(police_report_id="PR-1", number="FINE-7")
    code = TrafficFineManualIdentificationCodeGenerated(
        police_report_id="PR-1", number="FINE-7", code="XMfhyM"
    )

    spec.given(report, number).when(code).then_commands(
        Send(
            IssueTrafficFine(
                police_report_id="PR-1", system_number="FINE-7", manual_identification_code="XMfhyM"
            )
        ),
        Complete(),
    )


def test_the_whole_history_of_a_speeding_fine() -> None:
    spec.given(SPEEDING, NUMBER).when(CODE).then_history(
        Began(),
        InitiatedBy(SPEEDING),
        Sent(GenerateTrafficFineSystemNumber(police_report_id=REPORT)),
        Received(NUMBER),
        Sent(
            GenerateTrafficFineManualIdentificationCode(
                police_report_id=REPORT, system_number="PPXRG/23TV8457"
            )
        ),
        Received(CODE),
        Sent(
            IssueTrafficFine(
                police_report_id=REPORT,
                system_number="PPXRG/23TV8457",
                manual_identification_code="XMfhyM",
            )
        ),
        Completed(),
    ).then_state(Final()).then_completed()


def test_a_speeding_violation_asks_for_a_system_number() -> None:
    spec.when(SPEEDING).then_events(
        Began(),
        InitiatedBy(SPEEDING),
        Sent(GenerateTrafficFineSystemNumber(police_report_id=REPORT)),
    ).then_state(AwaitingSystemNumber(REPORT))


def test_a_system_number_asks_for_a_manual_identification_code() -> None:
    spec.given(SPEEDING).when(NUMBER).then_commands(
        Send(
            GenerateTrafficFineManualIdentificationCode(
                police_report_id=REPORT, system_number="PPXRG/23TV8457"
            )
        )
    ).then_state(AwaitingManualIdentificationCode(REPORT, "PPXRG/23TV8457"))


def test_a_manual_identification_code_issues_the_fine_and_completes() -> None:
    spec.given(SPEEDING, NUMBER).when(CODE).then_events(
        Received(CODE),
        Sent(
            IssueTrafficFine(
                police_report_id=REPORT,
                system_number="PPXRG/23TV8457",
                manual_identification_code="XMfhyM",
            )
        ),
        Completed(),
    ).then_completed()


def test_a_report_without_speeding_completes_at_once() -> None:
    parking = PoliceReportPublished(
        police_report_id="PR-2", offense=ParkingViolation(location="Grote Markt")
    )

    spec.when(parking).then_events(Began(), InitiatedBy(parking), Completed()).then_commands(
        Complete()
    ).then_state(Final())


def test_the_state_can_be_given_as_workflow_events() -> None:
    spec.given(Began(), InitiatedBy(SPEEDING)).when(NUMBER).then_state(
        AwaitingManualIdentificationCode(REPORT, "PPXRG/23TV8457")
    )


def test_a_code_before_the_number_is_unexpected() -> None:
    spec.given(SPEEDING).when(CODE).then_raises(
        UnexpectedInput, match="TrafficFineManualIdentificationCodeGenerated is not expected"
    )


def test_a_first_input_that_is_not_a_report_is_unexpected() -> None:
    spec.when(NUMBER).then_raises(UnexpectedInput, match="in state Initial()")


def test_an_input_after_completion_is_ignored() -> None:
    spec.given(SPEEDING, NUMBER, CODE).when(NUMBER).then_ignored().then_nothing().then_state(
        Final()
    )


def test_a_given_input_the_workflow_rejects_fails_the_test_setup() -> None:
    with pytest.raises(AssertionError, match=r"given #0 .* cannot happen"):
        spec.given(NUMBER)


REPORT_IDS = st.sampled_from(["PR-1", "PR-2"])
INPUTS = st.one_of(
    strategy_for(PoliceReportPublished, police_report_id=REPORT_IDS),
    strategy_for(TrafficFineSystemNumberGenerated, police_report_id=REPORT_IDS),
    strategy_for(TrafficFineManualIdentificationCodeGenerated, police_report_id=REPORT_IDS),
)


def test_decide_is_deterministic() -> None:
    assert_decide_deterministic(workflow, INPUTS)


def test_fold_is_total_over_the_histories_it_produces() -> None:
    assert_fold_total(workflow, INPUTS)
