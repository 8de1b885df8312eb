"""Calling a command's handler once: a sync call, or an ``async def`` handler awaited with its
timeout; the answer as results or a :class:`~decider.processors.app.retry.HandlerFailure`.

A handler's exception (any ``BaseException`` but ``KeyboardInterrupt``, ``SystemExit``
included) is a retryable :class:`~decider.processors.app.retry.HandlerFailure`; a
``returns.result.Failure(HandlerFailure(...))`` is the handler's own verdict. Retries, back-off
and timeouts of sync calls are the pool's (:mod:`decider.processors.commands.pool`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import attrs
from returns.result import Failure, Result, Success

from decider.codec import describe
from decider.processors.app.definition import HandlerRegistration
from decider.processors.app.retry import HandlerFailure
from decider.processors.engine.failures import is_interrupt


@attrs.frozen
class GaveUp:
    """The handler failed for good, or its retries ran out: the command is to be parked."""

    reason: str
    attempts: int


@attrs.frozen
class AttemptFailed:
    """One attempt failed and may be retried, but the job asked the pool not to retry it
    (a consumer group retries through the server: ``attempts`` so far, over every delivery)."""

    reason: str
    attempts: int


def invoke(
    handler: HandlerRegistration, command: Any, command_id: str
) -> Sequence[Any] | HandlerFailure:
    """Run a sync handler once: its results, or why it failed (an exception is retryable)."""
    try:
        result = handler.func(command, command_id)
    except BaseException as exc:
        if is_interrupt(exc):
            raise
        return HandlerFailure(reason=describe(exc), retryable=True)
    return interpret(result)


async def invoke_async(
    handler: HandlerRegistration, command: Any, command_id: str, timeout: float | None
) -> Sequence[Any] | HandlerFailure:
    """Await an ``async def`` handler once, up to ``timeout`` seconds: its results, or why it
    failed (an exception or running past the timeout is retryable)."""
    try:
        result = await asyncio.wait_for(handler.func(command, command_id), timeout)
    except TimeoutError:
        return HandlerFailure(reason=f"timed out after {timeout}s", retryable=True)
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        if is_interrupt(exc):
            raise
        return HandlerFailure(reason=describe(exc), retryable=True)
    return interpret(result)


def interpret(result: Any) -> Sequence[Any] | HandlerFailure:
    """A handler's return value as its results, or as the failure it stands for."""
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
