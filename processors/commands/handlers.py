"""Calling a command's handler once: a sync call, or an ``async def`` handler awaited with its
timeout; the answer as results or a :class:`~decider.processors.app.retry.HandlerFailure`.

A handler's exception (any ``BaseException`` but ``KeyboardInterrupt``, ``SystemExit``
included) is a retryable :class:`~decider.processors.app.retry.HandlerFailure`; a
``returns.result.Failure(HandlerFailure(...))`` is the handler's own verdict. What each
outcome means is decided in :mod:`decider.processors.engine.failures`; retries, back-off and
timeouts of sync calls are the pool's to carry out (:mod:`decider.processors.commands.pool`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import attrs
from returns.result import Failure, Result, Success

from decider.processors.app.definition import HandlerRegistration
from decider.processors.app.retry import HandlerFailure
from decider.processors.engine import failures
from decider.processors.engine.failures import describe_value

__all__ = ["AttemptFailed", "GaveUp", "describe_value", "interpret", "invoke", "invoke_async"]


@attrs.frozen
class GaveUp:
    """The handler failed for good, or its retries ran out: the command is to be parked."""

    reason: str
    attempts: int
    exception: BaseException | None = attrs.field(default=None, eq=False, repr=False)
    """The exception the last attempt raised, if it raised."""


@attrs.frozen
class AttemptFailed:
    """One attempt failed and may be retried, but the job asked the pool not to retry it
    (a consumer group retries through the server: ``attempts`` so far, over every delivery)."""

    reason: str
    attempts: int
    exception: BaseException | None = attrs.field(default=None, eq=False, repr=False)
    """The exception the attempt raised, if it raised."""


def invoke(
    handler: HandlerRegistration, command: Any, command_id: str
) -> Sequence[Any] | HandlerFailure:
    """Run a sync handler once: its results, or why it failed (an exception is retryable)."""
    try:
        result = handler.func(command, command_id)
    except BaseException as exc:
        return failures.handler_raised(exc)  # an interrupt is raised again
    return interpret(result)


async def invoke_async(
    handler: HandlerRegistration, command: Any, command_id: str, timeout: float | None
) -> Sequence[Any] | HandlerFailure:
    """Await an ``async def`` handler once, up to ``timeout`` seconds: its results, or why it
    failed (an exception or running past the timeout is retryable)."""
    try:
        result = await asyncio.wait_for(handler.func(command, command_id), timeout)
    except TimeoutError:
        return failures.handler_timed_out(timeout)
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        return failures.handler_raised(exc)  # an interrupt is raised again
    return interpret(result)


def interpret(result: Any) -> Sequence[Any] | HandlerFailure:
    """A handler's return value as its results, or as the failure it stands for."""
    if type(result) is list or type(result) is tuple:  # the common answer, no ABC check
        return result
    if isinstance(result, Result):
        match result:
            case Success(value):
                return _as_results(value)
            case Failure(failure):
                return failures.handler_refused(failure)
    return _as_results(result)


def _as_results(value: Any) -> Sequence[Any] | HandlerFailure:
    if isinstance(value, list | tuple):
        return value
    return failures.handler_returned(value)
