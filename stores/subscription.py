"""A catch-up subscription that any store can reuse, and the notifier that wakes it.

A store hands :class:`CatchUpSubscription` three things: a function that reads a page of the
global log after a position (already filtered), a function that returns the log's head (its last
position), and a :class:`LogNotifier` that the store pokes after every commit. The subscription
reads history page by page, yields one :class:`~decider.stores.protocol.CaughtUp`, then waits on the
notifier for live events. It never polls in a busy loop: an idle subscription sleeps on a
``threading.Condition``. Stores whose log can also grow from another process (SQLite on a shared
file) pass ``probe_interval``: the waiting subscription then checks the head every so often, a
query that costs microseconds.

No background thread is involved: the consumer's own :meth:`~CatchUpSubscription.poll` (or
iteration) does the reading, so a subscription that nobody polls costs nothing.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterator

from decider.stores.errors import StoreError
from decider.stores.protocol import CaughtUp, RecordedEvent

ReadPage = Callable[[int | None, int], list[RecordedEvent]]
"""``read_page(after_position, limit)``: up to ``limit`` matching events after the position."""

ReadHead = Callable[[], int | None]
"""``head()``: the last position of the whole log (matching or not), ``None`` if it is empty."""


class LogNotifier:
    """Wakes waiting subscriptions when the log grows or the store closes.

    A store calls :meth:`notify` after each commit; the version counter it bumps means a
    subscription never misses a wake-up that happens between its read and its wait.
    """

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._version = 0
        self._closed = False

    @property
    def version(self) -> int:
        """A counter that changes on every :meth:`notify`."""
        return self._version

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called; subscriptions then end."""
        return self._closed

    def notify(self) -> None:
        """Tell every waiting subscription that the log may have grown."""
        with self._condition:
            self._version += 1
            self._condition.notify_all()

    def close(self) -> None:
        """Wake every waiting subscription for good: the store is closing."""
        with self._condition:
            self._closed = True
            self._condition.notify_all()

    def wake(self) -> None:
        """Wake every waiter without a change, so each can re-check its own state (stop)."""
        with self._condition:
            self._condition.notify_all()

    def wait(self, seen_version: int, timeout: float, stop: Callable[[], bool]) -> None:
        """Block until the version differs from ``seen_version``, ``stop()`` holds, the notifier
        closes, or ``timeout`` seconds pass."""
        with self._condition:
            self._condition.wait_for(
                lambda: self._version != seen_version or self._closed or stop(), timeout
            )


class CatchUpSubscription:
    """History after a position, then one :class:`~decider.stores.protocol.CaughtUp`, then live
    events.

    Guarantees: events come in log order, each once; ``CaughtUp`` comes exactly once, after
    every event that was in the log when the subscription reached the head; :meth:`stop` is safe
    from any thread and makes a blocked :meth:`poll` return ``None`` promptly. One thread
    consumes a subscription (polls or iterates it); any thread may stop it.

    ``probe_interval`` (seconds, or ``None``) bounds how long a wait may last before the head is
    checked again: it is how appends made by another process, which cannot poke the notifier,
    are noticed.
    """

    def __init__(
        self,
        *,
        read_page: ReadPage,
        head: ReadHead,
        notifier: LogNotifier,
        after_position: int | None = None,
        page_size: int = 500,
        probe_interval: float | None = None,
    ) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size}")
        if probe_interval is not None and probe_interval <= 0:
            raise ValueError(f"probe_interval must be positive, got {probe_interval}")
        self._read_page = read_page
        self._head = head
        self._notifier = notifier
        self._position = after_position
        self._page_size = page_size
        self._probe_interval = probe_interval
        self._buffer: collections.deque[RecordedEvent | CaughtUp] = collections.deque()
        self._caught_up = False
        self._stopped = False

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called or the store was closed."""
        return self._ended()

    def _ended(self) -> bool:
        return self._stopped or self._notifier.closed

    def stop(self) -> None:
        """End the subscription; a blocked :meth:`poll` or iteration returns promptly."""
        self._stopped = True
        self._notifier.wake()

    def __enter__(self) -> CatchUpSubscription:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __iter__(self) -> Iterator[RecordedEvent | CaughtUp]:
        while (item := self.poll(None)) is not None:
            yield item

    def poll(self, timeout: float | None) -> RecordedEvent | CaughtUp | None:
        """The next item, waiting up to ``timeout`` seconds (``None``: until one comes or the
        subscription stops); ``None`` on timeout or once stopped."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ended():
            if self._buffer:
                return self._buffer.popleft()
            seen = self._notifier.version
            try:
                self._fetch()
            except StoreError:
                if self._ended():  # the store closed under us: end quietly
                    return None
                raise
            if self._buffer:
                continue
            wait = self._probe_interval if self._probe_interval is not None else 3600.0
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                wait = min(wait, remaining)
            self._notifier.wait(seen, wait, lambda: self._stopped)
        return None

    def _fetch(self) -> None:
        """Read the next page if the log grew past our position; queue CaughtUp when at the head."""
        head = self._head()
        if head is None or (self._position is not None and head <= self._position):
            self._mark_caught_up()
            return
        page = self._read_page(self._position, self._page_size)
        self._buffer.extend(page)
        if len(page) < self._page_size:
            # The page was read after the head, and it is short, so it holds every matching
            # event up to the head: skipping the non-matching tail up to the head is safe.
            last = page[-1].position if page else head
            self._position = max(head, last)
            self._mark_caught_up()
        else:
            self._position = page[-1].position

    def _mark_caught_up(self) -> None:
        if not self._caught_up:
            self._caught_up = True
            self._buffer.append(CaughtUp(self._position))
