"""The classification of failures: the one place that decides skip, retry, park or resume.

Every processor asks it, for inputs and for commands, and acts on its verdict; none decides
on its own what a failure means.

**Inputs and the processor's thread** (:func:`classify`; see
:class:`~decider.processors.engine.base.Processor`):

- **skip**: the data cannot be handled. Any exception raised while decoding an input, routing
  it, deciding on it (user code, ``SystemExit`` included), building a stream name from it, or
  a permanent store rejection (:class:`~decider.stores.errors.PermanentStoreError`,
  :class:`~decider.stores.errors.StreamDeleted`, :class:`~decider.stores.errors.CorruptEvent`)
  of what was built from it. The input is
  recorded in the processor's skipped stream with the reason, and the processor moves on.
- **retry**: a transient store failure (:class:`~decider.stores.errors.StoreUnavailable`:
  connection lost, busy, read-only, disk full). The processor waits with exponential back-off
  and resumes from its checkpoint; the store reopens its connections.
- **resume**: anything else (a bug, an exhausted conflict loop). Logged with its traceback,
  counted in :class:`ErrorLog`, and the processor resumes from its checkpoint after a back-off.
- **let go**: a commit found a partition's lease lost (or held none): the processor drops the
  partition and resumes from the checkpoints of what it still holds.
- **stop**: a failure while a stop is in progress ends the thread quietly.
- **interrupt**: ``KeyboardInterrupt`` (and ``GeneratorExit``) is never swallowed.

``BaseException`` other than those from user code counts as a user-code failure: it never ends
a processor's thread.

**Commands** (:func:`judge_attempt`, :func:`judge_redelivery`, :func:`backoff`): a handler
call's outcome is its results or a :class:`~decider.processors.app.retry.HandlerFailure`
(:func:`handler_raised`, :func:`handler_timed_out`, :func:`handler_refused`,
:func:`handler_returned` say which failures may pass). Then, with the attempts made and the
handler's :class:`~decider.processors.app.retry.RetryPolicy`:

- **done**: results; they are stored (a consumer group's delivery is acked);
- **retry**: a retryable failure with attempts left: called again after :func:`backoff`, in
  the pool (the command holds only its own instance's later commands);
- **redeliver**: the same, for a job the pool does not retry (a consumer group): the delivery
  is nacked for a retry after the back-off, and the server sends it again;
- **park**: a failure that is not retryable, or the last attempt's: the command goes to the
  parked ledger (:mod:`decider.processors.commands.parking`).

A failure to store a command's results is the thread's (:func:`classify`): a transient one
keeps the results to commit on the next try (they are not carried out again).
"""

from __future__ import annotations

import collections
import enum
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from decider.codec import describe, format_traceback
from decider.processors.app.errors import InvalidStreamName
from decider.processors.app.retry import HandlerFailure, RetryPolicy
from decider.processors.engine.sharing import LeaseNotHeld
from decider.stores import LeaseLost
from decider.stores.errors import (
    CorruptEvent,
    PermanentStoreError,
    StoreError,
    StoreUnavailable,
    StreamDeleted,
)

T = TypeVar("T")

PERMANENT = (PermanentStoreError, StreamDeleted)
"""The store errors that retrying the same write (or read) cannot mend."""


class Failure(enum.Enum):
    """What a processor does about a failure."""

    SKIP = "skip"
    """Record the input as skipped, with the reason, and go on."""
    RETRY = "retry"
    """A transient store failure: back off, resume from the checkpoint."""
    RESUME = "resume"
    """Unexpected: log and count it, back off, resume from the checkpoint."""
    INTERRUPT = "interrupt"
    """Let it end the thread (``KeyboardInterrupt``, ``GeneratorExit``)."""
    LET_GO = "let go"
    """A partition's lease was lost (or none held): drop it, resume with what is held."""
    STOP = "stop"
    """A stop is in progress: end the thread quietly."""


def classify(exc: BaseException, *, handling_input: bool, stopping: bool = False) -> Failure:
    """How to treat ``exc``; ``handling_input``: raised while handling one input (decoding,
    routing, deciding, building names from it, or committing only what it led to);
    ``stopping``: the processor's thread was asked to stop (its failures end it quietly).

    >>> classify(SystemExit(1), handling_input=True)
    <Failure.SKIP: 'skip'>
    >>> classify(StoreUnavailable("down"), handling_input=True)
    <Failure.RETRY: 'retry'>
    >>> classify(ValueError("bug"), handling_input=False)
    <Failure.RESUME: 'resume'>
    >>> classify(ValueError("bug"), handling_input=False, stopping=True)
    <Failure.STOP: 'stop'>
    """
    if isinstance(exc, LeaseLost | LeaseNotHeld):
        return Failure.LET_GO  # even while stopping: the partition is not ours any more
    if isinstance(exc, KeyboardInterrupt | GeneratorExit):
        return Failure.INTERRUPT
    if stopping:
        return Failure.STOP
    if isinstance(exc, StoreUnavailable):
        return Failure.RETRY
    if isinstance(exc, (*PERMANENT, CorruptEvent, InvalidStreamName)):
        return Failure.SKIP if handling_input else Failure.RESUME
    if isinstance(exc, StoreError):
        return Failure.RESUME  # a conflict or deleted stream: not the input's fault
    return Failure.SKIP if handling_input else Failure.RESUME


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` must end the thread rather than count as a (user-code) failure."""
    return isinstance(exc, KeyboardInterrupt | GeneratorExit)


class ErrorLog:
    """The unexpected errors of a processor: the last ``keep`` of them, and how many in all.

    Memory stays bounded while a processor keeps failing (a stuck store, a bug).
    """

    def __init__(self, keep: int = 100) -> None:
        self._recent: collections.deque[BaseException] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()
        self.count = 0
        """How many errors were recorded in all."""

    def append(self, exc: BaseException) -> None:
        """Record ``exc``; the oldest kept one goes if the log is full."""
        with self._lock:
            self._recent.append(exc)
            self.count += 1

    def recent(self) -> list[BaseException]:
        """The errors kept, oldest first."""
        with self._lock:
            return list(self._recent)

    def __len__(self) -> int:
        return len(self._recent)

    def __iter__(self) -> Iterator[BaseException]:
        return iter(self.recent())

    def __getitem__(self, index: int) -> BaseException:
        return self.recent()[index]


class UserCodeFailed(Exception):
    """User code (a route, ``decide``, ``evolve``, an upcaster) raised; ``SystemExit`` and other
    ``BaseException``\\ s included, so they never end a processor's thread."""

    def __init__(self, what: str, exc: BaseException) -> None:
        self.what = what
        self.exc = exc
        super().__init__(f"{what} raised {describe(exc)}")


def call_user(what: str, func: Callable[..., T], *args: Any) -> T:
    """``func(*args)``; any failure but an interrupt becomes :class:`UserCodeFailed`."""
    try:
        return func(*args)
    except BaseException as exc:
        raise user_failure(what, exc) from exc


def user_failure(what: str, exc: BaseException) -> UserCodeFailed:
    """What :func:`call_user` raises for ``exc``, which user code raised while ``what``; an
    interrupt is raised again as it is. For a hot path that calls user code in its own
    ``try`` (no call of :func:`call_user` in between): ``raise user_failure(what, exc) from
    exc``."""
    if is_interrupt(exc):
        raise exc
    return UserCodeFailed(what, exc)


def user_exception(exc: BaseException) -> BaseException:
    """The exception user code raised, where ``exc`` wraps one (:class:`UserCodeFailed`), else
    ``exc``: what a traceback shown to the user starts from."""
    return exc.exc if isinstance(exc, UserCodeFailed) else exc


def traceback_of(exc: BaseException | None) -> str | None:
    """The bounded traceback kept with a skip or park record: that of the exception user code
    raised (see :func:`user_exception`); ``None`` for no exception."""
    return None if exc is None else format_traceback(user_exception(exc))


# -- commands ---------------------------------------------------------------------------------


class Verdict(enum.Enum):
    """What becomes of a command after one attempt of its handler (or a redelivery)."""

    DONE = "done"
    """It concluded: store its results (a consumer group's delivery is acked)."""
    RETRY = "retry"
    """A retryable failure with attempts left: call the handler again here, after
    :func:`backoff`."""
    REDELIVER = "redeliver"
    """The same, for a job not retried here: the consumer group's server sends it again after
    :func:`backoff` (a nack with retry)."""
    PARK = "park"
    """Set it aside in the parked ledger (a consumer group's delivery is nacked with park)."""


def judge_attempt(
    outcome: Sequence[Any] | HandlerFailure,
    attempts: int,
    policy: RetryPolicy,
    *,
    retry_here: bool = True,
) -> Verdict:
    """What becomes of a command whose handler's attempt number ``attempts`` (from 1, over every
    delivery) came to ``outcome``; ``retry_here``: whether the pool retries it (not a consumer
    group's, whose server does).

    >>> policy = RetryPolicy(max_attempts=3)
    >>> judge_attempt(HandlerFailure("down"), 2, policy)
    <Verdict.RETRY: 'retry'>
    >>> judge_attempt(HandlerFailure("down"), 3, policy)
    <Verdict.PARK: 'park'>
    >>> judge_attempt(HandlerFailure("declined", retryable=False), 1, policy)
    <Verdict.PARK: 'park'>
    """
    if not isinstance(outcome, HandlerFailure):
        return Verdict.DONE
    if not outcome.retryable or attempts >= policy.max_attempts:
        return Verdict.PARK
    return Verdict.RETRY if retry_here else Verdict.REDELIVER


def backoff(
    policy: RetryPolicy,
    attempts: int,
    rng: random.Random | None = None,
    *,
    at_most: float | None = None,
) -> float:
    """Seconds to wait before attempt ``attempts + 1``: the policy's delay (see
    :meth:`~decider.processors.app.retry.RetryPolicy.delay`), capped at ``at_most`` (a consumer
    group holds a delivery at most half its message timeout).

    >>> backoff(RetryPolicy(initial_delay=1, jitter=0), 3, at_most=2.5)
    2.5
    """
    delay = policy.delay(attempts, rng)
    return delay if at_most is None else min(delay, at_most)


def judge_redelivery(before: str | None) -> Verdict | None:
    """A command delivered again (a consumer group's ``retry_count`` above 0): ``before`` is
    what its stored outcome shows (``"done"``: its results are stored; ``"parked"``: this
    round's park record is in the ledger). ``None``: carry it out.

    >>> judge_redelivery("done"), judge_redelivery(None)
    (<Verdict.DONE: 'done'>, None)
    """
    if before is None:
        return None
    return Verdict.DONE if before == "done" else Verdict.PARK


def handler_raised(exc: BaseException) -> HandlerFailure:
    """The failure a handler call that raised ``exc`` stands for: retryable (the outage or bug
    may pass), with the exception kept for its traceback; an interrupt is raised again.

    >>> handler_raised(ValueError("boom")).retryable
    True
    """
    if is_interrupt(exc):
        raise exc
    return HandlerFailure(reason=describe(exc), retryable=True, exception=exc)


def handler_timed_out(timeout: float | None) -> HandlerFailure:
    """The failure a call that ran past its handler's ``timeout`` stands for: retryable."""
    return HandlerFailure(reason=f"timed out after {timeout}s", retryable=True)


def handler_refused(value: object) -> HandlerFailure:
    """The failure a handler's ``returns.result.Failure(value)`` stands for: ``value`` itself
    if it is a :class:`~decider.processors.app.retry.HandlerFailure` (the handler's verdict),
    else a retryable failure described by its ``repr``."""
    if isinstance(value, HandlerFailure):
        return value
    return HandlerFailure(reason=describe_value(value), retryable=True)


def handler_returned(value: object) -> HandlerFailure:
    """The failure a handler that returned ``value``, not a list of messages, stands for: not
    retryable (the same code returns the same kind of value)."""
    return HandlerFailure(
        reason=f"the handler returned {type(value).__name__}, not a list of messages",
        retryable=False,
    )


def describe_value(value: object) -> str:
    """A short ``repr`` of ``value``, whatever it holds."""
    try:
        text = repr(value)
    except Exception:  # a repr that fails
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 500 else text[:499] + "…"
