"""Clocks: where processors get the time, and how they wait for it to pass.

Every wait in the processors goes through a clock and a :class:`Signal`, so a stop (which sets
the signal) interrupts it at once, and tests drive time with a :class:`FakeClock` instead of
sleeping.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable


class Signal:
    """A flag threads wait on: :meth:`set` wakes every waiter, and so does a clock's tick.

    Unlike :class:`threading.Event`, a :class:`FakeClock` can wake a thread waiting on it when
    time moves, so a wait "until this time or until told" needs no polling.
    """

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._set = False

    def set(self) -> None:
        """Raise the flag and wake every waiter."""
        with self._condition:
            self._set = True
            self._condition.notify_all()

    def clear(self) -> None:
        """Lower the flag."""
        with self._condition:
            self._set = False

    def is_set(self) -> bool:
        """Whether the flag is raised."""
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` real seconds for the flag; whether it is raised."""
        with self._condition:
            return self._condition.wait_for(lambda: self._set, timeout)

    def _poke(self) -> None:
        with self._condition:
            self._condition.notify_all()


@runtime_checkable
class Clock(Protocol):
    """The time, and an interruptible wait for some of it to pass."""

    def now(self) -> datetime:
        """The current time, timezone-aware (UTC)."""
        ...

    def wait(self, signal: Signal, seconds: float) -> bool:
        """Wait until ``seconds`` of this clock's time pass or ``signal`` is set.

        Returns whether ``signal`` is set (``True``: the wait was interrupted).
        """
        ...


class SystemClock:
    """The wall clock; waits are real waits on the signal."""

    def now(self) -> datetime:
        """The current UTC time."""
        return datetime.now(UTC)

    def wait(self, signal: Signal, seconds: float) -> bool:
        """Wait up to ``seconds`` real seconds, or until ``signal`` is set."""
        if seconds <= 0:
            return signal.is_set()
        return signal.wait(seconds)


class FakeClock:
    """A clock that moves only when told (:meth:`advance`), for tests that must not sleep.

    A thread waiting on it wakes as soon as :meth:`advance` moves time past its deadline, or its
    signal is set. It starts at the real current time (or ``start``), so due times computed from
    a store's recorded times line up with it.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime.now(UTC)
        if self._now.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware start time")
        self._lock = threading.Lock()
        self._waiting: list[Signal] = []

    def now(self) -> datetime:
        """The clock's current time."""
        return self._now

    def advance(self, by: timedelta | float) -> datetime:
        """Move time forward by ``by`` (a timedelta or seconds) and wake every waiter."""
        delta = by if isinstance(by, timedelta) else timedelta(seconds=by)
        if delta < timedelta(0):
            raise ValueError(f"a clock cannot go back: advance({by!r})")
        with self._lock:
            self._now += delta
            waiting = list(self._waiting)
        for signal in waiting:
            signal._poke()
        return self._now

    @property
    def waiters(self) -> int:
        """How many threads are waiting on this clock now."""
        with self._lock:
            return len(self._waiting)

    def wait(self, signal: Signal, seconds: float) -> bool:
        """Wait until the clock has moved ``seconds`` on, or ``signal`` is set."""
        deadline = self._now + timedelta(seconds=seconds)
        with self._lock:
            self._waiting.append(signal)
        try:
            with signal._condition:
                signal._condition.wait_for(lambda: signal._set or self._now >= deadline)
                return signal._set
        finally:
            with self._lock:
                self._waiting.remove(signal)
