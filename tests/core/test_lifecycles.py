"""Terminal states: Completed, Failed, Cancelled; the Fail and Cancel commands; on_error."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decider import (
    Began,
    Cancel,
    Cancelled,
    Codec,
    Command,
    Complete,
    Completed,
    DecodeError,
    Fail,
    Failed,
    Ignored,
    InitiatedBy,
    Instance,
    Lifecycle,
    Received,
    Send,
    Sent,
    Workflow,
    WorkflowDefinitionError,
    WorkflowEvent,
    advance,
    event_kind,
    handle,
    lifecycle,
    record_failure,
    start,
    translate,
)
from decider.testing import WorkflowSpec


def _evolve(state: int, event: WorkflowEvent[str, str]) -> int:
    return state + 1 if isinstance(event, Received | InitiatedBy) else state


def _decide(input: str, state: int) -> Sequence[Command[str]]:
    match input:
        case "boom":
            raise ValueError("boom is not allowed")
        case "give up":
            return [Send("sorry"), Fail("the customer gave up")]
        case "stop":
            return [Cancel("stopped by the operator")]
        case "done":
            return [Complete()]
    return [Send(f"{input}!")]


counter: Workflow[str, int, str] = Workflow("Counter", 0, _evolve, _decide)
failing = attrs.evolve(counter, on_error="fail")


def test_fail_and_cancel_are_recorded_as_failed_and_cancelled() -> None:
    commands: list[Command[str]] = [Send("a"), Fail("why")]
    assert translate(False, "x", commands) == [
        Received("x"),
        Sent("a"),
        Failed("why"),
    ]
    assert translate(False, "x", [Cancel("why")]) == [Received("x"), Cancelled("why")]


@pytest.mark.parametrize(
    ("end", "status"),
    [
        (Completed(), Lifecycle.COMPLETED),
        (Failed("r"), Lifecycle.FAILED),
        (Cancelled("r"), Lifecycle.CANCELLED),
    ],
)
def test_each_terminal_event_ends_the_lifecycle_for_good(
    end: WorkflowEvent[str, str], status: Lifecycle
) -> None:
    history: list[WorkflowEvent[str, str]] = [Began(), InitiatedBy("a"), end]

    assert lifecycle(history) is status
    assert status.terminal
    # The first end is the end: a later terminal event (only a hand-made history has one)
    # does not change it, in lifecycle() and advance() alike.
    later = [*history, Ignored("b", "ended"), Completed(), Failed("again")]
    assert lifecycle(later) is status
    assert advance(counter, start(counter), later).status is status


def test_running_and_not_started_are_not_terminal() -> None:
    assert not Lifecycle.RUNNING.terminal
    assert not Lifecycle.NOT_STARTED.terminal


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (Lifecycle.COMPLETED, "the workflow instance has completed"),
        (Lifecycle.FAILED, "the workflow instance has failed"),
        (Lifecycle.CANCELLED, "the workflow instance was cancelled"),
    ],
)
def test_inputs_after_any_terminal_state_are_ignored(status: Lifecycle, reason: str) -> None:
    ended = Instance(3, status, 5)

    assert handle(counter, ended, "late") == [Ignored("late", reason)]
    assert handle(failing, ended, "boom") == [Ignored("boom", reason)]


def test_decide_can_fail_an_instance_on_purpose() -> None:
    spec = WorkflowSpec(counter)

    outcome = (
        spec.given("a").when("give up").then_commands(Send("sorry"), Fail("the customer gave up"))
    )
    outcome.then_failed("gave up").then_events(
        Received("give up"), Sent("sorry"), Failed("the customer gave up")
    )
    spec.given("a", "give up").when("b").then_ignored()


def test_decide_can_cancel_an_instance() -> None:
    WorkflowSpec(counter).given("a").when("stop").then_cancelled("operator")


def test_then_failed_and_then_cancelled_say_what_the_instance_is() -> None:
    spec = WorkflowSpec(counter)
    with pytest.raises(AssertionError, match="expected failed, the instance is"):
        spec.given("a").when("stop").then_failed()
    with pytest.raises(AssertionError, match="'payment' is not in its reason"):
        spec.given("a").when("give up").then_failed("payment")
    with pytest.raises(AssertionError, match="expected cancelled"):
        spec.given("a").when("done").then_cancelled()


def test_the_skip_policy_lets_the_exception_propagate() -> None:
    instance = advance(counter, start(counter), handle(counter, start(counter), "a"))

    with pytest.raises(ValueError, match="boom is not allowed"):
        handle(counter, instance, "boom")
    WorkflowSpec(counter).given("a").when("boom").then_raises(ValueError, "boom")


def test_the_fail_policy_records_the_input_and_failed_with_the_exception_text() -> None:
    instance = advance(failing, start(failing), handle(failing, start(failing), "a"))

    events = handle(failing, instance, "boom")

    assert events == [Received("boom"), Failed("decide raised ValueError: boom is not allowed")]
    assert advance(failing, instance, events).status is Lifecycle.FAILED
    WorkflowSpec(failing).given("a").when("boom").then_failed("ValueError: boom is not allowed")


def test_the_fail_policy_on_a_first_input_begins_the_instance_then_fails_it() -> None:
    assert handle(failing, start(failing), "boom") == [
        Began(),
        InitiatedBy("boom"),
        Failed("decide raised ValueError: boom is not allowed"),
    ]


def test_record_failure_is_what_the_fail_policy_records() -> None:
    error = KeyError("sku-1")
    running = Instance(1, Lifecycle.RUNNING, 3)

    assert record_failure(running, "in", error) == [
        Received("in"),
        Failed("decide raised KeyError: 'sku-1'"),
    ]


def test_an_unknown_policy_is_refused_when_the_workflow_is_built() -> None:
    with pytest.raises(WorkflowDefinitionError, match=r"on_error='retry' is not a policy.*'skip'"):
        Workflow("W", 0, _evolve, _decide, on_error="retry")  # type: ignore[arg-type]


def test_a_workflow_skips_by_default() -> None:
    assert counter.on_error == "skip"


@pytest.mark.parametrize(
    ("event", "stored"),
    [(Failed("no stock"), "Failed"), (Cancelled("asked to"), "Cancelled")],
)
def test_terminal_events_are_stored_under_their_own_names_with_the_reason(
    event: WorkflowEvent[str, str], stored: str
) -> None:
    codec = Codec()

    type_name, data = codec.encode_event(event)

    assert (type_name, event_kind(type_name)) == (stored, stored)
    assert codec.decode_event(type_name, data) == event
    # The names stored before terminal states existed stay as they were.
    assert codec.encode_event(Completed()) == ("Completed", b"{}")
    assert codec.encode_event(Began()) == ("Began", b"{}")


@pytest.mark.parametrize("data", [b"{}", b'{"reason": 3}', b"[]"])
def test_a_terminal_event_without_a_reason_string_does_not_decode(data: bytes) -> None:
    with pytest.raises(DecodeError, match="cannot decode 'Failed'"):
        Codec().decode_event("Failed", data)


ANY_EVENT = st.one_of(
    st.just(Began()),
    st.builds(InitiatedBy, st.text(max_size=3)),
    st.builds(Received, st.text(max_size=3)),
    st.builds(Sent, st.text(max_size=3)),
    st.just(Completed()),
    st.builds(Failed, st.text(max_size=3)),
    st.builds(Cancelled, st.text(max_size=3)),
    st.builds(Ignored, st.text(max_size=3), st.text(max_size=3)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(ANY_EVENT, max_size=12))
def test_lifecycle_and_advance_agree_on_any_sequence_of_events(
    events: list[WorkflowEvent[str, str]],
) -> None:
    instance = start(counter)
    for event in events:  # one event at a time, and all at once, as processors do both
        instance = advance(counter, instance, [event])

    assert lifecycle(events) is instance.status is advance(counter, start(counter), events).status
