"""decider.testing itself: its expectations fail, readably, whenever the workflow disagrees."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decider import (
    Began,
    Codec,
    Command,
    Complete,
    Completed,
    InitiatedBy,
    MessageRegistry,
    Publish,
    Published,
    Received,
    Send,
    Sent,
    Workflow,
    WorkflowEvent,
)
from decider.testing import (
    WorkflowSpec,
    assert_decide_deterministic,
    assert_fold_total,
    strategy_for,
)


@attrs.frozen
class Count:
    """Test state: how many inputs were received."""

    inputs: int = 0
    last: str = ""


def _evolve(state: Count, event: WorkflowEvent[str, str]) -> Count:
    match event:
        case InitiatedBy(message) | Received(message):
            return Count(state.inputs + 1, message)
    return state


def _decide(input: str, state: Count) -> Sequence[Command[str]]:
    if input == "bad":
        raise ValueError(f"bad input after {state.inputs}")
    if input == "quiet":
        return []
    if input == "end":
        return [Publish("ended"), Complete()]
    return [Send(f"{input}-{state.inputs}")]


counter: Workflow[str, Count, str] = Workflow("Counter", Count(), _evolve, _decide)
spec = WorkflowSpec(counter)


def _failure(check: Any) -> str:
    with pytest.raises(AssertionError) as caught:
        check()
    return str(caught.value)


def test_matching_expectations_pass_and_chain() -> None:
    outcome = (
        spec.given("a")
        .when("b")
        .then_commands(Send("b-1"))
        .then_events(Received("b"), Sent("b-1"))
        .then_history(Began(), InitiatedBy("a"), Sent("a-0"), Received("b"), Sent("b-1"))
        .then_state(Count(2, "b"))
    )

    assert outcome.commands == (Send("b-1"),)
    assert outcome.state == Count(2, "b")


def test_then_commands_shows_the_difference_index_by_index() -> None:
    failure = _failure(
        lambda: spec.given("a").when("end").then_commands(Publish("over"), Complete())
    )

    assert failure == (
        "commands differ: expected 2, got 2; first difference at #0\n"
        "  ! #0 expected: Publish(message='over')\n"
        "         actual: Publish(message='ended')\n"
        "         field message: expected 'over', actual 'ended'\n"
        "  = #1 Complete()\n"
        "when: 'end'"
    )


def test_then_events_shows_missing_and_extra_events() -> None:
    failure = _failure(lambda: spec.when("a").then_events(Began(), InitiatedBy("a")))

    assert "events differ: expected 2, got 3; first difference at #2" in failure
    assert "! #2 expected: (nothing)\n         actual: Sent(message='a-0')" in failure


def test_then_history_covers_the_given_events_too() -> None:
    failure = _failure(lambda: spec.given("a").when("b").then_history(Received("b"), Sent("b-1")))

    assert "first difference at #0" in failure
    assert "actual: Began()" in failure


def test_then_state_names_the_fields_that_differ() -> None:
    failure = _failure(lambda: spec.given("a").when("b").then_state(Count(2, "a")))

    assert failure == (
        "state differs:\n"
        "  expected: Count(inputs=2, last='a')\n"
        "    actual: Count(inputs=2, last='b')\n"
        "  field last: expected 'a', actual 'b'\n"
        "when: 'b'"
    )


def test_then_nothing_fails_when_commands_were_decided() -> None:
    spec.given("a").when("quiet").then_nothing()

    assert "expected 0, got 1" in _failure(lambda: spec.given("a").when("b").then_nothing())


def test_then_ignored_passes_only_after_completion() -> None:
    spec.given("a", "end").when("b").then_ignored().then_nothing().then_state(Count(2, "end"))

    failure = _failure(lambda: spec.given("a").when("b").then_ignored())
    assert failure == (
        "events differ: expected 1, got 2; first difference at #0\n"
        "  ! #0 expected: Ignored(message='b', reason=...)\n"
        "         actual: Received(message='b')\n"
        "  ! #1 expected: (nothing)\n"
        "         actual: Sent(message='b-1')\n"
        "when: 'b'"
    )


def test_then_completed_fails_while_running() -> None:
    spec.given("a").when("end").then_completed()

    assert "the instance is Lifecycle.RUNNING" in _failure(
        lambda: spec.given("a").when("b").then_completed()
    )


def test_then_raises_returns_the_error_decide_raised() -> None:
    error = spec.given("a").when("bad").then_raises(ValueError, match=r"after \d")

    assert str(error) == "bad input after 1"


def test_then_raises_fails_for_no_error_another_type_or_another_message() -> None:
    assert "expected ValueError to be raised; the input was handled" in _failure(
        lambda: spec.when("a").then_raises(ValueError)
    )
    assert "expected KeyError to be raised, got ValueError" in _failure(
        lambda: spec.when("bad").then_raises(KeyError)
    )
    assert "'after 7' is not in its message 'bad input after 0'" in _failure(
        lambda: spec.when("bad").then_raises(ValueError, match="after 7")
    )


def test_any_other_expectation_fails_when_decide_raised() -> None:
    failure = _failure(lambda: spec.given("a").when("bad").then_commands())

    assert failure.startswith("decide raised ValueError('bad input after 1') for 'bad'")


def test_given_workflow_events_are_folded_without_deciding() -> None:
    # "bad" would raise if it were decided upon: as a recorded event it is only folded
    spec.given(Began(), InitiatedBy("bad")).when("b").then_commands(Send("b-1"))


def test_given_workflow_events_can_complete_the_instance() -> None:
    spec.given(Began(), InitiatedBy("a"), Completed()).when("b").then_ignored()


def test_a_given_input_decide_rejects_fails_loudly() -> None:
    failure = _failure(lambda: spec.given("a", "bad"))

    assert re.match(r"given #1 'bad' cannot happen: decide raised ValueError", failure)


INPUTS = st.sampled_from(["a", "b", "quiet", "end", "bad"])


def test_the_property_helpers_pass_for_a_well_behaved_workflow() -> None:
    assert_decide_deterministic(counter, INPUTS, max_examples=20)
    assert_fold_total(counter, INPUTS, max_examples=20)


def test_assert_decide_deterministic_catches_a_decide_with_hidden_state() -> None:
    calls = itertools.count()

    def leaky(input: str, state: Count) -> Sequence[Command[str]]:
        return [Send(f"{input}-{next(calls)}")]

    with pytest.raises(AssertionError, match="decide is not deterministic"):
        assert_decide_deterministic(attrs.evolve(counter, decide=leaky), INPUTS)


def test_assert_decide_deterministic_catches_an_error_raised_only_sometimes() -> None:
    calls = itertools.count()

    def flaky(input: str, state: Count) -> Sequence[Command[str]]:
        if next(calls) % 2:
            raise RuntimeError("the network is down")
        return [Send(input)]

    with pytest.raises(AssertionError, match="is not deterministic"):
        assert_decide_deterministic(attrs.evolve(counter, decide=flaky), INPUTS)


def test_the_property_helpers_fail_when_decide_accepts_no_input_drawn() -> None:
    def refusing(input: str, state: Count) -> Sequence[Command[str]]:
        raise KeyError("missing_key")  # a bug: every input is rejected, no walk gets anywhere

    broken = attrs.evolve(counter, decide=refusing)

    with pytest.raises(AssertionError, match=r"accepted none of the \d+ inputs.*KeyError"):
        assert_fold_total(broken, INPUTS, max_examples=10)
    with pytest.raises(AssertionError, match="assert_decide_deterministic: decide accepted none"):
        assert_decide_deterministic(broken, INPUTS, max_examples=10)


def test_assert_fold_total_catches_an_evolve_that_fails_on_a_reachable_history() -> None:
    def partial(state: Count, event: WorkflowEvent[str, str]) -> Count:
        if isinstance(event, Published):
            raise KeyError("no case for Published")
        return _evolve(state, event)

    with pytest.raises(AssertionError, match="evolve raised KeyError"):
        assert_fold_total(attrs.evolve(counter, evolve=partial), INPUTS)


def test_assert_fold_total_catches_an_evolve_that_changes_the_initial_state() -> None:
    def in_place(state: list[str], event: WorkflowEvent[str, str]) -> list[str]:
        state.append(type(event).__name__)
        return state

    def decide(input: str, state: list[str]) -> Sequence[Command[str]]:
        return []

    mutating: Workflow[str, list[str], str] = Workflow("Mutating", [], in_place, decide)

    with pytest.raises(AssertionError, match="initial state"):
        assert_fold_total(mutating, INPUTS)


def test_assert_fold_total_with_a_codec_catches_an_unregistered_message() -> None:
    with pytest.raises(Exception, match="unknown message type 'str'"):
        assert_fold_total(counter, INPUTS, codec=Codec(MessageRegistry()))


@attrs.frozen(kw_only=True)
class Line:
    sku: str
    quantity: int


@attrs.frozen(kw_only=True)
class Basket:
    lines: tuple[Line, ...]
    note: str | None
    weight: float
    tags: frozenset[str]


@settings(max_examples=30, deadline=None)
@given(strategy_for(Basket, note=st.just("fragile")))
def test_strategy_for_builds_nested_attrs_unions_and_collections(basket: Basket) -> None:
    assert basket.note == "fragile"
    assert all(isinstance(line, Line) and isinstance(line.quantity, int) for line in basket.lines)
    assert isinstance(basket.tags, frozenset)
    assert basket.weight == basket.weight  # never NaN


def test_strategy_for_refuses_what_it_cannot_build() -> None:
    with pytest.raises(TypeError, match="needs an attrs class"):
        strategy_for(str)
    with pytest.raises(TypeError, match="Basket has no field colour"):
        strategy_for(Basket, colour=st.just("red"))
