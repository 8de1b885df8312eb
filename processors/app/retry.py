"""Retry policies for command handlers, and the failure value a handler returns.

Hand-written rather than taken from a library (tenacity, backoff): those sleep with
``time.sleep``, which neither a stop request nor a
:class:`~decider.processors.engine.clock.FakeClock` can interrupt, and the policy here is a dozen
lines of arithmetic.

These are definitions only: what a failure leads to (retried here, redelivered, parked) is
decided in one place, :mod:`decider.processors.engine.failures`.
"""

from __future__ import annotations

import random

import attrs


@attrs.frozen
class HandlerFailure:
    """Why a handler could not carry out a command, and whether trying again may help.

    A handler returns ``returns.result.Failure(HandlerFailure(...))`` for an expected failure;
    a raised exception counts as ``HandlerFailure(reason=repr(exc), retryable=True)``. The
    reason may be given by position, ``retryable`` only by keyword.

    >>> HandlerFailure("card declined", retryable=False)
    HandlerFailure(reason='card declined', retryable=False)
    """

    reason: str
    retryable: bool = attrs.field(default=True, kw_only=True)
    exception: BaseException | None = attrs.field(default=None, kw_only=True, eq=False, repr=False)
    """The exception the handler raised, if it raised: its traceback is kept with the park
    record, logged and recorded on the span."""


def _positive(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value < 0:
        raise ValueError(f"RetryPolicy.{attribute.name} must not be negative, got {value}")


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """Exponential back-off with jitter, bounded by a number of attempts.

    Attempt ``n`` (from 1) that fails is followed by a wait of
    ``min(max_delay, initial_delay * multiplier ** (n - 1))``, shortened by a random fraction
    of up to ``jitter`` (0: none, 1: "full jitter"), so many failing commands do not retry in
    lockstep. After ``max_attempts`` failed attempts the command is parked.
    """

    max_attempts: int = attrs.field(default=5)
    initial_delay: float = attrs.field(default=0.2, validator=_positive)
    max_delay: float = attrs.field(default=30.0, validator=_positive)
    multiplier: float = attrs.field(default=2.0, validator=_positive)
    jitter: float = attrs.field(default=0.5)

    @max_attempts.validator
    def _check_attempts(self, _: attrs.Attribute[int], value: int) -> None:
        if value < 1:
            raise ValueError(f"RetryPolicy.max_attempts must be at least 1, got {value}")

    @jitter.validator
    def _check_jitter(self, _: attrs.Attribute[float], value: float) -> None:
        if not 0 <= value <= 1:
            raise ValueError(f"RetryPolicy.jitter must be between 0 and 1, got {value}")

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based).

        >>> RetryPolicy(initial_delay=1, multiplier=2, jitter=0).delay(3)
        4.0
        >>> RetryPolicy(initial_delay=1, max_delay=3, jitter=0).delay(10)
        3.0
        """
        base = min(self.max_delay, self.initial_delay * self.multiplier ** (attempt - 1))
        draw = (rng or random).random()
        return float(base * (1 - self.jitter * draw))
