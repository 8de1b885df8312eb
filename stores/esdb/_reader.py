"""What the EventStoreDB adapter's readers share: a thread that reads one gRPC call into a
bounded queue, so that :meth:`QueuedReader.poll` can wait with a timeout while the thread blocks
in gRPC (no polling). The catch-up subscription (:mod:`decider.stores.esdb._subscription`) and
the consumer-group reader (:mod:`decider.stores.esdb._persistent`) are its two kinds."""

from __future__ import annotations

import contextlib
import queue
import threading
from abc import ABC, abstractmethod
from typing import ClassVar, Generic, TypeVar, cast

from decider.stores.errors import StoreError
from decider.stores.esdb._errors import ended, map_error

_QUEUE_SIZE = 1000
T = TypeVar("T")


class QueuedReader(ABC, Generic[T]):
    """Items of type ``T`` read from one gRPC call by a thread of their own.

    A kind says which items it hands over (``_ITEMS``), reads its call in :meth:`_pump`
    (putting each item with :meth:`_put`), cancels it in :meth:`_cancel`, and names its call
    for the error raised when it ends by itself (``_ENDED``). A kind calls :meth:`_start`
    once its call is open.
    """

    _END = object()
    _WAKE = object()
    _ITEMS: ClassVar[tuple[type, ...]]
    _ENDED: ClassVar[str]
    _THREAD: ClassVar[str]
    _JOIN: ClassVar[bool] = False
    """Whether :meth:`stop` returns only once the thread has ended (a kind whose call ends at
    once when cancelled)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[object] = queue.Queue(_QUEUE_SIZE)
        self._stopped = threading.Event()
        self._ended = False
        self._woken = False
        self._marker_queued = False
        self._thread: threading.Thread | None = None

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._THREAD, daemon=True)
        self._thread.start()

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called (or the call ended)."""
        return self._stopped.is_set() or self._ended

    def wake(self) -> None:
        """Make a blocked :meth:`poll` (or the next, if none is blocked) return ``None`` at
        once, without ending the call: a flag the next :meth:`poll` sees once the queue is
        empty, and a marker on the queue for a :meth:`poll` blocked now (never more than one)."""
        self._woken = True
        if self._marker_queued:
            return
        self._marker_queued = True
        try:
            self._queue.put_nowait(self._WAKE)
        except queue.Full:  # poll is not blocked: it sees the flag once it drained the queue
            self._marker_queued = False

    def poll(self, timeout: float | None) -> T | None:
        """The next item, waiting up to ``timeout`` seconds; ``None`` on timeout, once
        stopped, or after :meth:`wake`. An error of the call is raised here (mapped)."""
        if self._stopped.is_set() or self._ended:
            return None
        try:
            item = self._queue.get_nowait()
        except queue.Empty:
            if self._woken:
                self._woken = False
                return None
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                return None
        if item is self._WAKE:
            self._marker_queued = False
            self._woken = False
            return None
        if item is self._END or self._stopped.is_set():
            self._ended = True
            return None
        if isinstance(item, StoreError):
            self._ended = True
            raise item
        assert isinstance(item, self._ITEMS)
        return cast(T, item)

    def stop(self) -> None:
        """End the call (:meth:`_cancel`) and wake a blocked :meth:`poll`; with ``_JOIN``,
        return once the thread has ended (within :meth:`_put`'s 0.2 s wait at most)."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._cancel()
        # a full queue means poll is not blocked: it sees ``stopped`` next time
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(self._END)
        thread = self._thread
        if self._JOIN and thread is not None and thread is not threading.current_thread():
            thread.join()

    def _put(self, item: object) -> bool:
        """Put ``item`` on the queue: blocks while the consumer is behind (back-pressure on the
        server), but wakes up to notice :meth:`stop` (then ``False``)."""
        while not self._stopped.is_set():
            try:
                self._queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            self._pump()
        except Exception as exc:
            if not self._stopped.is_set():
                self._put(map_error(exc))
            return
        # A call never ends by itself: the server went away (or cancelled it).
        if not self._stopped.is_set():
            self._put(ended(self._ENDED))

    @abstractmethod
    def _pump(self) -> None:
        """Read the call, :meth:`_put` each item; return when :meth:`_put` says stopped."""

    @abstractmethod
    def _cancel(self) -> None:
        """End the call (from :meth:`stop`)."""
