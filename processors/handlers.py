"""Carrying out a command with its handler: invocation, the retry policy, the result appends.

A handler's exception (any ``BaseException`` but ``KeyboardInterrupt``, ``SystemExit``
included) is a retryable :class:`~decider.processors.retry.HandlerFailure`; a
``returns.result.Failure(HandlerFailure(...))`` is the handler's own verdict. Waits between
attempts go through the service clock, so a stop interrupts them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from returns.result import Failure, Result, Success

from decider.codec import describe
from decider.processors import telemetry
from decider.processors.app import HandlerRegistration
from decider.processors.base import Context
from decider.processors.failures import is_interrupt
from decider.processors.retry import HandlerFailure
from decider.stores.protocol import StreamAppend


@attrs.frozen
class Carried:
    """The handler succeeded: the appends of its results (none if it returned none)."""

    appends: list[StreamAppend]


@attrs.frozen
class GaveUp:
    """The handler failed for good, or its retries ran out: the command is to be parked."""

    reason: str
    attempts: int


@attrs.frozen
class Stopped:
    """The service stopped while waiting to retry: the command is not concluded."""


Ran = Carried | GaveUp | Stopped
"""What running a handler came to."""


class HandlerRunner:
    """Runs a command's handler under its :class:`~decider.processors.retry.RetryPolicy`."""

    def __init__(self, context: Context, name: str) -> None:
        self.context = context
        self.name = name
        self._random = random.Random()

    def run(
        self,
        handler: HandlerRegistration,
        command: Any,
        command_id: str,
        to_appends: Callable[[Sequence[Any]], list[StreamAppend]],
        before_wait: Callable[[], None],
    ) -> Ran:
        """Invoke ``handler`` until it succeeds, fails for good or runs out of attempts.

        ``to_appends`` turns its results into appends (a failure there is final);
        ``before_wait`` is called before each wait (to commit what is done so far).
        """
        policy = handler.retry
        attempt = 0
        while True:
            attempt += 1
            # The one place a handler is invoked: its span, latency and retry count.
            outcome = telemetry.call_handler(
                self.name,
                handler.type_name,
                command_id,
                attempt,
                lambda: invoke(handler, command, command_id),
            )
            if not isinstance(outcome, HandlerFailure):
                try:
                    return Carried(to_appends(outcome))
                except Exception as exc:
                    outcome = HandlerFailure(
                        reason=f"the handler's results cannot be stored: {describe(exc)}",
                        retryable=False,
                    )
            if not outcome.retryable or attempt >= policy.max_attempts:
                return GaveUp(outcome.reason, attempt)
            delay = policy.delay(attempt, self._random)
            self.context.logger.warning(
                "%s: %s %s failed (attempt %d of %d), retrying in %.3fs: %s",
                self.name,
                handler.type_name,
                command_id,
                attempt,
                policy.max_attempts,
                delay,
                outcome.reason,
            )
            before_wait()
            if self.context.clock.wait(self.context.stop, delay):
                return Stopped()


def invoke(
    handler: HandlerRegistration, command: Any, command_id: str
) -> Sequence[Any] | HandlerFailure:
    """Run a handler once: its results, or why it failed (an exception is retryable)."""
    try:
        result = handler.func(command, command_id)
    except BaseException as exc:
        if is_interrupt(exc):
            raise
        return HandlerFailure(reason=describe(exc), retryable=True)
    if isinstance(result, Result):
        match result:
            case Success(value):
                return _as_results(value)
            case Failure(failure):
                if isinstance(failure, HandlerFailure):
                    return failure
                return HandlerFailure(reason=describe_value(failure), retryable=True)
    return _as_results(result)


def describe_value(value: object) -> str:
    """A short ``repr`` of ``value``, whatever it holds."""
    try:
        text = repr(value)
    except Exception:  # a repr that fails
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 500 else text[:499] + "…"


def _as_results(value: Any) -> Sequence[Any] | HandlerFailure:
    if isinstance(value, list | tuple):
        return value
    return HandlerFailure(
        reason=f"the handler returned {type(value).__name__}, not a list of messages",
        retryable=False,
    )
