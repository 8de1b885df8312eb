"""Sharper errors: a bad delay, a decide that returns no list of commands, an unregistered Send."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import attrs
import pytest

from decider import (
    Command,
    Complete,
    InvalidDecision,
    MessageRegistry,
    Publish,
    Schedule,
    Send,
    Workflow,
    WorkflowDefinitionError,
    handle,
    message,
    start,
)
from decider.testing import WorkflowSpec

registry = MessageRegistry()


@message("errors.Ping", registry=registry)
@attrs.frozen(kw_only=True)
class Ping:
    """A registered message."""

    id: str


@attrs.frozen(kw_only=True)
class Forgotten:
    """An attrs class nobody registered."""

    id: str


def _workflow(decide: Any) -> Workflow[Any, None, Any]:
    return Workflow("Errors", None, lambda s, e: s, decide)


def test_a_schedule_with_a_number_fails_at_once_saying_to_pass_a_timedelta() -> None:
    with pytest.raises(
        TypeError, match=r"got int 5: write Schedule\(timedelta\(seconds=5\), message\)"
    ):
        Schedule(5, Ping(id="p"))  # type: ignore[arg-type]


def test_a_schedule_with_its_arguments_swapped_says_the_delay_comes_first() -> None:
    with pytest.raises(TypeError, match=r"the delay comes first: Schedule\(after, message\)"):
        Schedule(Ping(id="p"), timedelta(seconds=5))  # type: ignore[arg-type]


def test_a_schedule_with_a_string_says_what_to_write() -> None:
    with pytest.raises(
        TypeError, match=r"got str '5m': write Schedule\(timedelta\(\.\.\.\), message\)"
    ):
        Schedule("5m", Ping(id="p"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("returned", "shown"),
    [
        (Ping(id="p"), "Ping(id='p')"),
        (Send(Ping(id="p")), "Send(message=Ping(id='p'))"),
        (None, "None"),
        ("done", "'done'"),
    ],
    ids=["a message", "one command", "None", "a string"],
)
def test_a_decide_that_returns_no_list_fails_at_once_saying_what_to_write(
    returned: object, shown: str
) -> None:
    workflow = _workflow(lambda i, s: returned)

    with pytest.raises(InvalidDecision) as raised:
        handle(workflow, start(workflow), "go")

    assert f"decide returned {shown} for 'go': decide must return a list of commands" in str(
        raised.value
    )
    assert "wrap a message in Send(...), Publish(...), Reply(...)" in str(raised.value)


def test_a_message_among_the_commands_fails_at_once_saying_to_wrap_it() -> None:
    workflow = _workflow(lambda i, s: [Send(Ping(id="a")), Ping(id="b")])

    with pytest.raises(
        InvalidDecision,
        match=r"decide returned Ping\(id='b'\) for 'go', which is not a command: wrap",
    ):
        handle(workflow, start(workflow), "go")


def test_a_command_after_complete_fails_at_once() -> None:
    def decide(input: str, state: None) -> Sequence[Command[Ping]]:
        return [Complete(), Publish(Ping(id="late"))]

    workflow = _workflow(decide)

    with pytest.raises(InvalidDecision, match=r"after Complete\(\).*must be the last one"):
        handle(workflow, start(workflow), "go")


def test_an_invalid_decision_is_a_failure_under_the_fail_policy() -> None:
    workflow = attrs.evolve(_workflow(lambda i, s: Ping(id="p")), on_error="fail")

    WorkflowSpec(workflow, registry=None).when("go").then_failed(
        "InvalidDecision: decide returned Ping"
    )


def test_the_spec_rejects_a_send_of_an_unregistered_message_at_once() -> None:
    spec = WorkflowSpec(_workflow(lambda i, s: [Send(Forgotten(id="f"))]), registry=registry)

    with pytest.raises(AssertionError) as raised:
        spec.when(Ping(id="p"))

    text = str(raised.value)
    assert "Send(message=Forgotten(id='f'))" in text
    assert "Forgotten is not a registered message" in text
    assert '@decider.message("<stable type name>")' in text


def test_the_spec_rejects_an_unregistered_input_in_the_given_history() -> None:
    spec = WorkflowSpec(_workflow(lambda i, s: []), registry=registry)

    with pytest.raises(AssertionError, match=r"given #0 Forgotten\(id='x'\).*not a registered"):
        spec.given(Forgotten(id="x"))


def test_the_spec_accepts_registered_messages_and_plain_values() -> None:
    spec = WorkflowSpec(
        _workflow(lambda i, s: [Send(Ping(id="out")), Send("text")]), registry=registry
    )

    spec.when(Ping(id="in")).then_commands(Send(Ping(id="out")), Send("text"))


def test_the_registered_check_can_be_turned_off() -> None:
    spec = WorkflowSpec(_workflow(lambda i, s: [Send(Forgotten(id="f"))]), registry=None)

    spec.when("go").then_commands(Send(Forgotten(id="f")))


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"version": ""}, "version must be a non-empty string"),
        ({"version": 3}, "version must be a non-empty string"),
        ({"snapshot_every": 0}, "snapshot_every must be a whole number of events, at least 1"),
        ({"snapshot_every": 2.5}, "snapshot_every must be a whole number"),
        ({"state_version": " "}, "state_version must be a non-empty string"),
    ],
)
def test_workflow_options_that_cannot_work_are_refused_when_it_is_built(
    options: dict[str, Any], match: str
) -> None:
    with pytest.raises(WorkflowDefinitionError, match=match):
        Workflow("W", None, lambda s, e: s, lambda i, s: [], **options)
