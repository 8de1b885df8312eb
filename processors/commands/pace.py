"""How quick each handler's calls are lately: whether its next call may run inline.

Handing a command to a worker thread and its conclusion back costs a wake-up of the worker
and of the submitting thread (futex calls and the GIL passing between threads), more than a
quick handler itself takes when traffic is light. A sync handler whose recent calls returned
within :data:`QUICK` is run by the :class:`~decider.processors.commands.pool.CommandPool` on
the thread that submits its command (the command processor's, when its batch is small)
instead. Every call is timed, wherever it runs, and the last :data:`WINDOW` calls of each
handler are kept:

- a handler's first :data:`FIRST` calls run on the workers;
- then it runs inline while at most :data:`TOLERATED` of its last :data:`WINDOW` calls was
  slow (took :data:`QUICK` or more, or timed out); a second slow call sends it back to the
  workers until the window holds one slow call or none again.

One slow call is tolerated because a quick call is now and then measured slow when the
interpreter hands the GIL to another thread in the middle of it (a 5 ms switch interval):
measured on the traffic-fine sample, about 2 calls in 1,000, at random. A handler that turns
slow (a store that stalls) costs the submitting thread at most two slow calls; a handler that
is slow now and then (a cache miss) more than once in :data:`WINDOW` calls runs on the workers,
where a slow call holds no other command. An I/O-bound handler (a call of a millisecond or
more) is never quick, so it always runs on the workers, side by side with others; an
``async def`` handler always runs on the event loop.
"""

from __future__ import annotations

import collections

import attrs

QUICK = 0.001
"""Seconds: a call that returns sooner is quick (wall time, the span's and the result's
interpretation included)."""

FIRST = 8
"""Calls a handler makes on the workers before it may run inline."""

WINDOW = 32
"""How many of a handler's last calls are looked at."""

TOLERATED = 1
"""How many slow calls among the last :data:`WINDOW` still let a handler run inline."""


@attrs.define
class _Handler:
    recent: collections.deque[bool] = attrs.Factory(lambda: collections.deque(maxlen=WINDOW))
    """Whether each of the last calls was slow, oldest first."""
    slow: int = 0
    """How many of ``recent`` were."""


class Pace:
    """Each handler's recent call times, and whether its next call may run inline.

    Not thread-safe: the pool calls it with its lock held.
    """

    def __init__(self, quick: float = QUICK) -> None:
        self.quick = quick
        """Seconds under which a call is quick (0: no call runs inline)."""
        self._handlers: dict[str, _Handler] = {}

    def inline(self, name: str) -> bool:
        """Whether the sync handler ``name``'s next call may run on the submitting thread."""
        pace = self._handlers.get(name)
        return (
            self.quick > 0
            and pace is not None
            and len(pace.recent) >= FIRST
            and pace.slow <= TOLERATED
        )

    def record(self, name: str, seconds: float) -> None:
        """One call of ``name`` took ``seconds`` (wherever it ran)."""
        pace = self._handlers.get(name)
        if pace is None:
            pace = self._handlers[name] = _Handler()
        recent = pace.recent
        if len(recent) == WINDOW and recent[0]:
            pace.slow -= 1  # about to leave the window
        slow = seconds >= self.quick
        recent.append(slow)
        pace.slow += slow
