"""The pure core of a workflow: translate, fold, lifecycle, start/advance and handle."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import attrs
import pytest

from decider import (
    Began,
    Command,
    Complete,
    Completed,
    Ignored,
    InitiatedBy,
    Instance,
    Lifecycle,
    Publish,
    Published,
    Received,
    Replied,
    Reply,
    Schedule,
    Scheduled,
    Send,
    Sent,
    Workflow,
    WorkflowEvent,
    advance,
    fold,
    handle,
    lifecycle,
    start,
    translate,
)


@attrs.frozen
class Tally:
    """Test state: every event seen, in order."""

    seen: tuple[str, ...] = ()


def _evolve(state: Tally, event: WorkflowEvent[str, str]) -> Tally:
    return Tally((*state.seen, type(event).__name__))


def _decide(input: str, state: Tally) -> Sequence[Command[str]]:
    if input == "boom":
        raise ValueError("boom is not allowed")
    if input == "stop":
        return [Publish("stopped"), Complete()]
    return [Send(f"{input}!")]


tally: Workflow[str, Tally, str] = Workflow("Tally", Tally(), _evolve, _decide)


def test_translate_records_a_first_input_as_began_and_initiated_by() -> None:
    assert translate(True, "in", []) == [Began(), InitiatedBy("in")]


def test_translate_records_a_later_input_as_received() -> None:
    assert translate(False, "in", []) == [Received("in")]


def test_translate_records_every_kind_of_command_in_order() -> None:
    commands: list[Command[str]] = [
        Reply("r"),
        Send("s"),
        Publish("p"),
        Schedule(timedelta(minutes=5), "t"),
        Complete(),
    ]

    assert translate(False, "in", commands) == [
        Received("in"),
        Replied("r"),
        Sent("s"),
        Published("p"),
        Scheduled(timedelta(minutes=5), "t"),
        Completed(),
    ]


def test_a_schedule_cannot_be_in_the_past() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        Schedule(timedelta(seconds=-1), "late")


def test_fold_of_nothing_is_the_initial_state() -> None:
    assert fold(tally, []) == Tally()


def test_fold_applies_evolve_in_order() -> None:
    assert fold(tally, [Began(), InitiatedBy("a"), Sent("b")]) == Tally(
        ("Began", "InitiatedBy", "Sent")
    )


@pytest.mark.parametrize(
    ("events", "status"),
    [
        ([], Lifecycle.NOT_STARTED),
        ([Began()], Lifecycle.RUNNING),
        ([Began(), InitiatedBy("a"), Received("b"), Sent("c")], Lifecycle.RUNNING),
        ([Began(), InitiatedBy("a"), Completed()], Lifecycle.COMPLETED),
        ([Began(), InitiatedBy("a"), Completed(), Ignored("b", "done")], Lifecycle.COMPLETED),
    ],
)
def test_lifecycle_follows_began_and_completed(
    events: list[WorkflowEvent[str, str]], status: Lifecycle
) -> None:
    assert lifecycle(events) is status


def test_start_is_an_instance_with_no_events() -> None:
    assert start(tally) == Instance(Tally(), Lifecycle.NOT_STARTED, 0)


def test_advance_counts_events_and_matches_fold_and_lifecycle() -> None:
    events: list[WorkflowEvent[str, str]] = [Began(), InitiatedBy("a"), Sent("a!"), Completed()]

    instance = advance(tally, advance(tally, start(tally), events[:2]), events[2:])

    assert instance == Instance(fold(tally, events), lifecycle(events), 4)


def test_handle_begins_an_instance_with_its_first_input() -> None:
    assert handle(tally, start(tally), "a") == [Began(), InitiatedBy("a"), Sent("a!")]


def test_handle_receives_later_inputs() -> None:
    instance = advance(tally, start(tally), handle(tally, start(tally), "a"))

    assert handle(tally, instance, "stop") == [Received("stop"), Published("stopped"), Completed()]


def test_handle_ignores_an_input_after_completion_without_deciding() -> None:
    events: list[WorkflowEvent[str, str]] = [
        Began(),
        InitiatedBy("stop"),
        Published("stopped"),
        Completed(),
    ]
    instance = advance(tally, start(tally), events)

    # "boom" would raise if decided upon: it is not
    assert handle(tally, instance, "boom") == [
        Ignored("boom", "the workflow instance has completed")
    ]


def test_handle_lets_an_error_of_decide_propagate() -> None:
    with pytest.raises(ValueError, match="boom is not allowed"):
        handle(tally, start(tally), "boom")


def test_a_workflow_names_its_instances_streams() -> None:
    assert tally.stream("wf_01") == "Tally-wf_01"
