"""IssueTrafficFineForSpeedingViolation, the workflow of Yves Reynhout's "The Workflow Pattern".

A police report of a speeding violation leads to a fine: generate its system number, then its
manual identification code, then issue it. Any other offense completes at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import attrs

from decider import (
    Command,
    Complete,
    Completed,
    InitiatedBy,
    Received,
    Send,
    Workflow,
    WorkflowEvent,
)
from samples.traffic_fine.messages import (
    GenerateTrafficFineManualIdentificationCode,
    GenerateTrafficFineSystemNumber,
    Input,
    IssueTrafficFine,
    Output,
    PoliceReportPublished,
    SpeedingViolation,
    TrafficFineManualIdentificationCodeGenerated,
    TrafficFineSystemNumberGenerated,
)


@attrs.frozen
class Initial:
    """No police report yet."""


@attrs.frozen
class AwaitingSystemNumber:
    """A speeding violation was reported; its fine needs a system number."""

    police_report_id: str


@attrs.frozen
class AwaitingManualIdentificationCode:
    """The fine has its system number; it needs a manual identification code."""

    police_report_id: str
    system_number: str


@attrs.frozen
class Final:
    """Nothing more to do: the fine was issued, or there was nothing to fine."""


State: TypeAlias = Initial | AwaitingSystemNumber | AwaitingManualIdentificationCode | Final


class UnexpectedInput(Exception):
    """An input the workflow does not expect in its current state."""

    def __init__(self, message: object, state: State) -> None:
        super().__init__(f"{type(message).__name__} is not expected in state {state!r}")


def decide(message: Input, state: State) -> Sequence[Command[Output]]:
    """What the workflow decides for an input in a state."""
    match message, state:
        case PoliceReportPublished(offense=SpeedingViolation()), Initial():
            return [
                Send(GenerateTrafficFineSystemNumber(police_report_id=message.police_report_id))
            ]
        case PoliceReportPublished(), Initial():
            return [Complete()]
        case TrafficFineSystemNumberGenerated(number=number), AwaitingSystemNumber(report_id):
            return [
                Send(
                    GenerateTrafficFineManualIdentificationCode(
                        police_report_id=report_id, system_number=number
                    )
                )
            ]
        case (
            TrafficFineManualIdentificationCodeGenerated(code=code),
            AwaitingManualIdentificationCode(report_id, system_number),
        ):
            return [
                Send(
                    IssueTrafficFine(
                        police_report_id=report_id,
                        system_number=system_number,
                        manual_identification_code=code,
                    )
                ),
                Complete(),
            ]
    raise UnexpectedInput(message, state)


def evolve(state: State, event: WorkflowEvent[Input, Output]) -> State:
    """The state after a workflow event: only inputs and completion move it."""
    match event:
        case InitiatedBy(PoliceReportPublished(police_report_id=report_id, offense=offense)):
            if isinstance(offense, SpeedingViolation):
                return AwaitingSystemNumber(report_id)
            return state
        case Received(TrafficFineSystemNumberGenerated(police_report_id=report_id, number=number)):
            return AwaitingManualIdentificationCode(report_id, number)
        case Completed():
            return Final()
    return state


workflow: Workflow[Input, State, Output] = Workflow(
    name="IssueTrafficFineForSpeedingViolation",
    initial_state=Initial(),
    evolve=evolve,
    decide=decide,
)
"""The workflow, ready to be tested or run by the processors."""
