"""The failure table: each failure a processor meets, for inputs and for commands, and the one
verdict :mod:`decider.processors.engine.failures` gives it; then that the pool and the handler
calls act on what it decides rather than deciding on their own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NoReturn

import attrs
import pytest
from returns.result import Failure as Refused
from returns.result import Success

from decider import Failed, Workflow, advance, handle, start
from decider.processors.app.definition import HandlerRegistration
from decider.processors.app.errors import InvalidStreamName
from decider.processors.app.retry import HandlerFailure, RetryPolicy
from decider.processors.commands.consumer_group import answer
from decider.processors.commands.handlers import AttemptFailed, GaveUp, invoke, invoke_async
from decider.processors.commands.pool import CommandPool, Conclusion, Job
from decider.processors.engine import failures
from decider.processors.engine.clock import SystemClock
from decider.processors.engine.failures import (
    Failure,
    UserCodeFailed,
    Verdict,
    backoff,
    call_user,
    classify,
    judge_attempt,
    judge_redelivery,
)
from decider.processors.engine.sharing import LeaseNotHeld
from decider.stores import Lease, LeaseLost
from decider.stores.consumer_groups import Nack
from decider.stores.errors import (
    CorruptEvent,
    PermanentStoreError,
    StoreUnavailable,
    StreamDeleted,
    WrongExpectedVersion,
)

# -- inputs and the processor's thread --------------------------------------------------------


def _raise(exc: BaseException) -> Callable[..., NoReturn]:
    def raising(*_: object) -> NoReturn:
        raise exc

    return raising


def _workflow(on_error: str = "skip", **parts: Any) -> Workflow[Any, Any, Any]:
    return Workflow(
        "Table",
        None,
        parts.get("evolve", lambda state, event: state),
        parts.get("decide", lambda message, state: []),
        on_error=on_error,  # type: ignore[arg-type]
    )


def _route_raises() -> object:
    return call_user("the route", _raise(ValueError("no id")), "message", None)


def _decide_raises(on_error: str, exc: BaseException) -> Callable[[], object]:
    def run() -> object:
        workflow = _workflow(on_error, decide=_raise(exc))
        return call_user("deciding on the input", handle, workflow, start(workflow), "input")

    return run


def _evolve_raises() -> object:
    workflow = _workflow(evolve=_raise(KeyError("state")))
    events = handle(workflow, start(workflow), "input")
    return call_user("evolving", advance, workflow, start(workflow), events)


def _raises(exc: BaseException) -> Callable[[], object]:
    return _raise(exc)


_LEASE = Lease("p3", "me", 4, datetime(2026, 1, 1, tzinfo=UTC))
_LOST = LeaseLost(_LEASE, attrs.evolve(_LEASE, owner="other", epoch=5))


@attrs.frozen
class InputCase:
    """A failure while handling an input (``handling_input``) or on the processor's thread,
    and the verdict; ``None``: no failure reaches the processor (the input is handled)."""

    action: Callable[[], object]
    expected: Failure | None
    handling_input: bool = True
    stopping: bool = False


INPUT_CASES = {
    "corrupt event": InputCase(_raises(CorruptEvent("s", 0, "not JSON")), Failure.SKIP),
    "user code raising in the route": InputCase(_route_raises, Failure.SKIP),
    "decide raising, on_error='skip'": InputCase(
        _decide_raises("skip", ValueError("no")), Failure.SKIP
    ),
    "decide exiting, on_error='skip'": InputCase(
        _decide_raises("skip", SystemExit(1)), Failure.SKIP
    ),
    "decide raising, on_error='fail': the instance fails": InputCase(
        _decide_raises("fail", ValueError("no")), None
    ),
    "evolve raising": InputCase(_evolve_raises, Failure.SKIP),
    "a stream name no store can hold": InputCase(
        _raises(InvalidStreamName("x", "holds NUL")), Failure.SKIP
    ),
    "transient store error, handling an input": InputCase(
        _raises(StoreUnavailable("down")), Failure.RETRY
    ),
    "transient store error, on the thread": InputCase(
        _raises(StoreUnavailable("down")), Failure.RETRY, handling_input=False
    ),
    "store unavailable while storing a command's results": InputCase(
        _raises(StoreUnavailable("busy")), Failure.RETRY, handling_input=False
    ),
    "permanent store error for an input's outcome": InputCase(
        _raises(PermanentStoreError("too big")), Failure.SKIP
    ),
    "permanent store error on the thread": InputCase(
        _raises(PermanentStoreError("too big")), Failure.RESUME, handling_input=False
    ),
    "deleted stream for an input's outcome": InputCase(_raises(StreamDeleted("s")), Failure.SKIP),
    "conflicts exhausted: not the input's fault": InputCase(
        _raises(WrongExpectedVersion("s", 1, 2)), Failure.RESUME
    ),
    "a bug on the thread": InputCase(
        _raises(ValueError("bug")), Failure.RESUME, handling_input=False
    ),
    "lease lost": InputCase(_raises(_LOST), Failure.LET_GO, handling_input=False),
    "no lease held": InputCase(_raises(LeaseNotHeld("p3")), Failure.LET_GO, handling_input=False),
    "lease lost while stopping": InputCase(
        _raises(_LOST), Failure.LET_GO, handling_input=False, stopping=True
    ),
    "a failure while stopping": InputCase(
        _raises(StoreUnavailable("down")), Failure.STOP, handling_input=False, stopping=True
    ),
    "KeyboardInterrupt": InputCase(_raises(KeyboardInterrupt()), Failure.INTERRUPT),
    "KeyboardInterrupt on the thread while stopping": InputCase(
        _raises(KeyboardInterrupt()), Failure.INTERRUPT, handling_input=False, stopping=True
    ),
    "GeneratorExit": InputCase(_raises(GeneratorExit()), Failure.INTERRUPT),
}


@pytest.mark.parametrize("case", INPUT_CASES.values(), ids=INPUT_CASES.keys())
def test_each_input_failure_has_one_verdict(case: InputCase) -> None:
    try:
        handled = case.action()
    except BaseException as exc:  # the processor's view: whatever reaches it
        verdict = classify(exc, handling_input=case.handling_input, stopping=case.stopping)
        assert verdict is case.expected
    else:
        assert case.expected is None
        assert isinstance(handled, list) and isinstance(handled[-1], Failed)


def test_user_code_failures_keep_what_user_code_raised() -> None:
    with pytest.raises(UserCodeFailed) as caught:
        _decide_raises("skip", ValueError("no"))()
    assert isinstance(failures.user_exception(caught.value), ValueError)
    assert "ValueError: no" in (failures.traceback_of(caught.value) or "")


# -- commands -------------------------------------------------------------------------------


def _handler(func: Callable[..., Any], *, timeout: float | None = None) -> HandlerRegistration:
    return HandlerRegistration(
        "table.Do",
        "do",
        func,
        RetryPolicy(max_attempts=3, jitter=0),
        timeout=timeout,
        is_async=asyncio.iscoroutinefunction(func),
    )


def _returns(value: object) -> Callable[[object, str], object]:
    return lambda command, command_id: value


async def _sleeps(command: object, command_id: str) -> list[object]:
    await asyncio.sleep(5)
    return []


async def _raises_async(command: object, command_id: str) -> list[object]:
    raise ConnectionError("refused")


@attrs.frozen
class CommandCase:
    """A handler call's outcome after ``attempts`` attempts (of 3), and the verdict."""

    handler: HandlerRegistration
    attempts: int
    expected: Verdict
    retry_here: bool = True
    retryable: bool | None = None
    """What the failure says of itself (``None``: no failure)."""


RETRYABLE = _returns(Refused(HandlerFailure("busy")))
COMMAND_CASES = {
    "results": CommandCase(_handler(_returns(["done"])), 1, Verdict.DONE),
    "Success(results)": CommandCase(_handler(_returns(Success(["done"]))), 1, Verdict.DONE),
    "retryable failure below max attempts": CommandCase(
        _handler(RETRYABLE), 2, Verdict.RETRY, retryable=True
    ),
    "retryable failure at max attempts": CommandCase(
        _handler(RETRYABLE), 3, Verdict.PARK, retryable=True
    ),
    "non-retryable failure": CommandCase(
        _handler(_returns(Refused(HandlerFailure("declined", retryable=False)))),
        1,
        Verdict.PARK,
        retryable=False,
    ),
    "Failure of another value": CommandCase(
        _handler(_returns(Refused("declined"))), 1, Verdict.RETRY, retryable=True
    ),
    "not a list of messages": CommandCase(
        _handler(_returns({"a": 1})), 1, Verdict.PARK, retryable=False
    ),
    "exception in the handler": CommandCase(
        _handler(_raise(ValueError("boom"))), 1, Verdict.RETRY, retryable=True
    ),
    "exception in the handler, last attempt": CommandCase(
        _handler(_raise(ValueError("boom"))), 3, Verdict.PARK, retryable=True
    ),
    "SystemExit in the handler": CommandCase(
        _handler(_raise(SystemExit(2))), 1, Verdict.RETRY, retryable=True
    ),
    "exception in an async handler": CommandCase(
        _handler(_raises_async), 1, Verdict.RETRY, retryable=True
    ),
    "timeout": CommandCase(_handler(_sleeps, timeout=0.01), 1, Verdict.RETRY, retryable=True),
    "timeout, last attempt": CommandCase(
        _handler(_sleeps, timeout=0.01), 3, Verdict.PARK, retryable=True
    ),
    "consumer group: retryable failure below max attempts": CommandCase(
        _handler(RETRYABLE), 1, Verdict.REDELIVER, retry_here=False, retryable=True
    ),
    "consumer group: retryable failure at max attempts": CommandCase(
        _handler(RETRYABLE), 3, Verdict.PARK, retry_here=False, retryable=True
    ),
    "consumer group: non-retryable failure": CommandCase(
        _handler(_raise(ValueError("boom"))), 3, Verdict.PARK, retry_here=False, retryable=True
    ),
}


def _call(handler: HandlerRegistration) -> Any:
    if handler.is_async:
        return asyncio.run(invoke_async(handler, "command", "c-1", handler.timeout))
    return invoke(handler, "command", "c-1")


@pytest.mark.parametrize("case", COMMAND_CASES.values(), ids=COMMAND_CASES.keys())
def test_each_command_outcome_has_one_verdict(case: CommandCase) -> None:
    outcome = _call(case.handler)
    if case.retryable is None:
        assert not isinstance(outcome, HandlerFailure)
    else:
        assert isinstance(outcome, HandlerFailure) and outcome.retryable is case.retryable
    policy = case.handler.retry
    verdict = judge_attempt(outcome, case.attempts, policy, retry_here=case.retry_here)
    assert verdict is case.expected


def test_an_interrupt_in_a_handler_is_no_failure_of_the_command() -> None:
    with pytest.raises(KeyboardInterrupt):
        invoke(_handler(_raise(KeyboardInterrupt())), "command", "c-1")


def test_a_failure_from_an_exception_keeps_it_for_the_park_record() -> None:
    outcome = invoke(_handler(_raise(ValueError("boom"))), "command", "c-1")
    assert isinstance(outcome, HandlerFailure)
    assert isinstance(outcome.exception, ValueError)
    assert "ValueError: boom" in (failures.traceback_of(outcome.exception) or "")


REDELIVERIES = {
    "its results are stored: ack": ("done", Verdict.DONE, None),
    "its park record is in the ledger: park again": ("parked", Verdict.PARK, Nack.PARK),
}


@pytest.mark.parametrize("case", REDELIVERIES.values(), ids=REDELIVERIES.keys())
def test_a_consumer_group_redelivery_concluded_before_is_answered_as_it_concluded(
    case: tuple[str, Verdict, Nack | None],
) -> None:
    before, verdict, nack = case
    assert judge_redelivery(before) is verdict
    assert answer(verdict) is nack


def test_a_redelivery_not_concluded_before_is_carried_out_and_its_retry_is_a_nack() -> None:
    assert judge_redelivery(None) is None
    assert answer(Verdict.REDELIVER) is Nack.RETRY


def test_the_back_off_is_the_policy_s_capped_for_a_consumer_group() -> None:
    policy = RetryPolicy(initial_delay=0.2, multiplier=2, max_delay=30, jitter=0)
    assert backoff(policy, 1) == pytest.approx(0.2)
    assert backoff(policy, 3) == pytest.approx(0.8)
    assert backoff(policy, 10, at_most=15.0) == 15.0


# -- the callers ask the one place ----------------------------------------------------------


def _run_in_pool(job_handler: HandlerRegistration, *, retry_here: bool = True) -> Conclusion:
    pool = CommandPool("table", 1, SystemClock(), None)
    concluded: list[Conclusion] = []
    done = threading.Event()

    def conclude(conclusion: Conclusion) -> None:
        concluded.append(conclusion)
        done.set()

    pool.start(needs_loop=False)
    try:
        job = Job("key", job_handler, "command", "c-1", conclude, retry_here=retry_here)
        pool.submit(job)
        assert done.wait(5.0)
    finally:
        pool.close()
    return concluded[0]


def test_the_pool_parks_where_the_one_place_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(failures, "judge_attempt", lambda *_, **__: Verdict.PARK)
    conclusion = _run_in_pool(_handler(RETRYABLE))
    assert isinstance(conclusion, GaveUp) and conclusion.attempts == 1


def test_the_pool_leaves_the_retry_to_the_server_where_the_one_place_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(failures, "judge_attempt", lambda *_, **__: Verdict.REDELIVER)
    conclusion = _run_in_pool(_handler(RETRYABLE))  # retry_here, but the verdict rules
    assert isinstance(conclusion, AttemptFailed) and conclusion.attempts == 1


def test_a_timed_out_call_is_what_the_one_place_makes_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        failures, "handler_timed_out", lambda timeout: HandlerFailure("late", retryable=False)
    )
    release = threading.Event()

    def slow(command: object, command_id: str) -> list[object]:
        release.wait(5.0)
        return []

    try:
        conclusion = _run_in_pool(_handler(slow, timeout=0.01))
    finally:
        release.set()
    assert isinstance(conclusion, GaveUp) and conclusion.reason == "late"


def test_a_handler_s_exception_is_what_the_one_place_makes_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        failures, "handler_raised", lambda exc: HandlerFailure("judged", retryable=False)
    )
    outcome = invoke(_handler(_raise(ValueError("boom"))), "command", "c-1")
    assert outcome == HandlerFailure("judged", retryable=False)
