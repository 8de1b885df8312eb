"""Figure 1: the pure core's overhead on the traffic-fine workflow.

The subject runs each workflow through the framework: ``start``, then per input ``handle``
(decide + translate) and ``advance`` (evolve + lifecycle), and finally ``fold`` of the whole
history. The baseline is the loop a developer would write by hand around the same ``decide``
and ``evolve`` functions, building the same event objects. Both sides see the same input
objects, built before timing starts, and produce the same histories (checked).
"""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.harness import Figure, Target, compare_best
from decider import (
    Began,
    Complete,
    Completed,
    Ignored,
    InitiatedBy,
    Publish,
    Published,
    Received,
    Replied,
    Reply,
    Schedule,
    Scheduled,
    Send,
    Sent,
    WorkflowEvent,
    advance,
    fold,
    handle,
    start,
)
from samples.traffic_fine.messages import (
    Input,
    Output,
    PoliceReportPublished,
    SpeedingViolation,
    TrafficFineManualIdentificationCodeGenerated,
    TrafficFineSystemNumberGenerated,
)
from samples.traffic_fine.workflow import Final, workflow

History = list[WorkflowEvent[Input, Output]]

_IGNORED_REASON = "the workflow instance has completed"


def traffic_fine_inputs(count: int) -> list[tuple[Input, ...]]:
    """The three inputs of ``count`` speeding-violation workflows, each of which completes."""
    runs: list[tuple[Input, ...]] = []
    for i in range(count):
        report_id = f"pr_{i:06d}"
        number = f"PPXRG/{i:06d}"
        runs.append(
            (
                PoliceReportPublished(
                    police_report_id=report_id,
                    offense=SpeedingViolation(maximum_speed="50 km/h", measured_speed="72 km/h"),
                ),
                TrafficFineSystemNumberGenerated(police_report_id=report_id, number=number),
                TrafficFineManualIdentificationCodeGenerated(
                    police_report_id=report_id, number=number, code=f"code-{i:06d}"
                ),
            )
        )
    return runs


def through_framework(runs: Sequence[tuple[Input, ...]]) -> list[History]:
    """Each workflow handled with ``start``/``handle``/``advance``, then folded with ``fold``."""
    histories: list[History] = []
    for inputs in runs:
        instance = start(workflow)
        history: History = []
        for message in inputs:
            events = handle(workflow, instance, message)
            instance = advance(workflow, instance, events)
            history.extend(events)
        if fold(workflow, history) != instance.state:
            raise AssertionError("fold disagrees with advance")
        histories.append(history)
    return histories


def by_hand(runs: Sequence[tuple[Input, ...]]) -> list[History]:
    """The same work as :func:`through_framework`, written as one plain loop."""
    decide, evolve, initial = workflow.decide, workflow.evolve, workflow.initial_state
    histories: list[History] = []
    for inputs in runs:
        state = initial
        began = completed = False
        history: History = []
        for message in inputs:
            events: History
            if completed:
                events = [Ignored(message, _IGNORED_REASON)]
            else:
                events = [Received(message)] if began else [Began(), InitiatedBy(message)]
                for command in decide(message, state):
                    if isinstance(command, Send):
                        events.append(Sent(command.message))
                    elif isinstance(command, Complete):
                        events.append(Completed())
                    elif isinstance(command, Reply):
                        events.append(Replied(command.message))
                    elif isinstance(command, Publish):
                        events.append(Published(command.message))
                    elif isinstance(command, Schedule):
                        events.append(Scheduled(command.after, command.message))
            for event in events:
                state = evolve(state, event)
                if isinstance(event, Completed):
                    completed = True
            began = True
            history.extend(events)
        folded = initial
        for event in history:
            folded = evolve(folded, event)
        if folded != state:
            raise AssertionError("the hand-written fold disagrees with the loop")
        histories.append(history)
    return histories


def measure(workflows: int, rounds: int) -> Figure:
    """Figure 1: framework time over hand-written time for ``workflows`` complete workflows."""
    runs = traffic_fine_inputs(workflows)
    framework_histories = through_framework(runs)
    if framework_histories != by_hand(runs):
        raise AssertionError("the framework and the hand-written loop produce different events")
    if not all(isinstance(fold(workflow, h), Final) for h in framework_histories):
        raise AssertionError("a benchmark workflow did not reach its final state")
    subject, baseline = compare_best(lambda: through_framework(runs), lambda: by_hand(runs), rounds)
    return Figure(
        key="core_overhead",
        title="1. core: fold+decide+translate",
        unit="workflows/s",
        rate=workflows / subject,
        baseline="hand-written loop over the same decide/evolve, same event objects",
        baseline_rate=workflows / baseline,
        ratio=subject / baseline,
        ratio_is="framework time / hand-written time (lower is better)",
        target=Target("<=", 1.3),
        extra={
            "workflows_per_round": workflows,
            "rounds": rounds,
            "events_per_workflow": len(framework_histories[0]),
            "estimator": "best of interleaved rounds",
        },
    )
