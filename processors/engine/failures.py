"""The classification of failures: the one place that decides skip, retry or resume.

Every processor goes through it (see :class:`~decider.processors.engine.base.Processor`):

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
- **interrupt**: ``KeyboardInterrupt`` (and ``GeneratorExit``) is never swallowed.

``BaseException`` other than those from user code counts as a user-code failure: it never ends
a processor's thread.
"""

from __future__ import annotations

import collections
import enum
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from decider.codec import describe
from decider.processors.app.errors import InvalidStreamName
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


def classify(exc: BaseException, *, handling_input: bool) -> Failure:
    """How to treat ``exc``; ``handling_input``: raised while handling one input (decoding,
    routing, deciding, building names from it, or committing only what it led to).

    >>> classify(SystemExit(1), handling_input=True)
    <Failure.SKIP: 'skip'>
    >>> classify(StoreUnavailable("down"), handling_input=True)
    <Failure.RETRY: 'retry'>
    >>> classify(ValueError("bug"), handling_input=False)
    <Failure.RESUME: 'resume'>
    """
    if isinstance(exc, KeyboardInterrupt | GeneratorExit):
        return Failure.INTERRUPT
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
        if is_interrupt(exc):
            raise
        raise UserCodeFailed(what, exc) from exc
