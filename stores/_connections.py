"""Connections per thread, for the stores that speak to a database through a driver.

SQLite's and psycopg's connections are not to be used by two threads at once, and closing one
while another thread runs a statement on it crashes the interpreter (sqlite3) or corrupts the
protocol state (psycopg). So each thread gets its own connection, paired with a lock that every
use holds and that :meth:`ThreadConnections.close` takes before closing it. A thread that ends
gives its connection back (short-lived threads must not pile up open files or server
connections): kept for the next thread that needs one (up to :data:`KEEP_IDLE`, where the store
says how to tell a connection fit to hand on), so threads that come and go (a metrics
endpoint's request threads) do not open and close a connection each. ``shared=True`` keeps a
single connection for every thread instead, taking turns through its lock (SQLite's
``:memory:``, which is one database per connection).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar


class _Token:
    """What a thread's local storage holds while the thread has a connection (see
    :meth:`ThreadConnections._adopt`)."""


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)

Pair = tuple[C, threading.RLock]

KEEP_IDLE = 4
"""How many connections of ended threads a store keeps for the next threads, at most."""


class ThreadConnections(Generic[C]):
    """The connections of one store: one per thread (or one shared), each behind its lock.

    ``connect()`` opens a connection (its errors propagate: the store maps them);
    ``closed_error()`` is the exception that use after :meth:`close` raises.
    """

    def __init__(
        self,
        connect: Callable[[], C],
        closed_error: Callable[[], Exception],
        *,
        shared: bool = False,
        reusable: Callable[[C], bool] | None = None,
    ) -> None:
        self._connect = connect
        self._reusable = reusable
        """Whether an ended thread's connection may serve the next thread (``None``: never)."""
        self._idle: list[Pair[C]] = []
        """Ended threads' connections, kept for the next threads (see :data:`KEEP_IDLE`)."""
        self._closed_error = closed_error
        self._shared = shared
        self._local = threading.local()
        self._pairs: list[Pair[C]] = []
        self._registry = threading.RLock()  # re-entered by _forget, when _adopt drops a token
        self._finalizers: list[weakref.finalize[Any, Any]] = []
        self._closed = False
        self._generation = 0
        """Bumped by :meth:`drop_all`: a thread's connection of an older one is stale."""
        self._stale: list[Pair[C]] = []
        """Connections :meth:`drop_all` found in use: their threads close them."""
        self._opened = 0

    @property
    def opened(self) -> int:
        """How many connections were opened since the store opened (kept for a thread's life, a
        count that grows only with the threads, or where one broke)."""
        return self._opened

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __len__(self) -> int:
        """How many connections are open (the threads' and those kept for the next ones)."""
        return len(self._pairs) + len(self._idle)

    def check_open(self) -> None:
        """Raise ``closed_error()`` once :meth:`close` was called."""
        if self._closed:
            raise self._closed_error()

    def get(self) -> Pair[C]:
        """This thread's connection (opened now if it has none) and its lock."""
        self.check_open()
        if self._shared and self._pairs:
            return self._pairs[0]
        pair: Pair[C] | None = getattr(self._local, "pair", None)
        if pair is not None:
            if getattr(self._local, "generation", 0) == self._generation:
                return pair
            self._local.pair = None
            self._close_stale(pair)  # drop_all found it in use, or closed it already
        with self._registry:
            kept = self._idle.pop() if self._idle and not self._shared else None
            if kept is not None:
                self._adopt(kept, self._generation)
                return kept
        generation = self._generation
        connection = self._connect()
        pair = (connection, threading.RLock())
        with self._registry:
            self._opened += 1
            if self._closed:
                connection.close()
                raise self._closed_error()
            if self._shared:
                if self._pairs:
                    connection.close()  # another thread made the shared one first
                    return self._pairs[0]
                self._pairs.append(pair)
                return pair
            self._adopt(pair, generation)
        return pair

    def _adopt(self, pair: Pair[C], generation: int) -> None:
        """Make ``pair`` this thread's (under the registry's lock), given back when it ends."""
        self._pairs.append(pair)
        self._local.pair = pair
        self._local.generation = generation
        # A token only this thread's local storage holds: dropped as the thread ends (the
        # thread object itself may live on, in a reference cycle the collector frees later).
        token = _Token()
        self._local.token = token
        finalizer = weakref.finalize(token, _forget, weakref.ref(self), pair)
        self._finalizers.append(finalizer)

    def _keep(self, pair: Pair[C]) -> bool:
        """Under the registry's lock: keep an ended thread's ``pair`` for the next thread, if
        the store says it is fit and fewer than :data:`KEEP_IDLE` are kept."""
        if self._closed or self._reusable is None or len(self._idle) >= KEEP_IDLE:
            return False
        try:
            fit = self._reusable(pair[0])
        except Exception:  # a connection that cannot tell is not handed on
            fit = False
        if fit:
            self._idle.append(pair)
        return fit

    def drop(self, pair: Pair[C]) -> None:
        """Forget and close this thread's connection (it broke); the next :meth:`get` opens
        another."""
        with self._registry:
            if pair in self._pairs:
                self._pairs.remove(pair)
        if getattr(self._local, "pair", None) == pair:
            self._local.pair = None
        pair[0].close()

    def drop_connection(self, connection: C) -> None:
        """:meth:`drop` the pair that holds ``connection`` (closed all the same if none does:
        :meth:`drop_all` or :meth:`close` let go of it already)."""
        with self._registry:
            pair = next((p for p in self._pairs if p[0] is connection), None)
        if pair is None:
            if getattr(self._local, "pair", (None,))[0] is connection:
                self._local.pair = None
            connection.close()
            return
        self.drop(pair)

    def drop_all(self) -> None:
        """Close every connection not in use now (this thread's too), and make every thread
        open a fresh one at its next :meth:`get`; a connection in use by another thread is
        closed by that thread at its next :meth:`get` (never waited for: two threads that
        drop all at once, each holding its own connection, would wait on each other).

        For a state that the driver shares between the connections of one process (SQLite's
        shared memory of a WAL file, opened read-only while the file system was): it is opened
        afresh only once every connection to the file was closed.
        """
        with self._registry:
            self._generation += 1
            pairs, self._pairs = [*self._pairs, *self._idle], []
            self._idle = []
            finalizers, self._finalizers = self._finalizers, []
        for finalizer in finalizers:
            finalizer.detach()
        self._local.pair = None
        for pair in pairs:
            connection, in_use = pair
            if in_use.acquire(blocking=False):  # this thread's own lock: taken again
                try:
                    connection.close()
                finally:
                    in_use.release()
            else:
                with self._registry:
                    self._stale.append(pair)

    def _close_stale(self, pair: Pair[C]) -> None:
        with self._registry:
            if pair in self._stale:
                self._stale.remove(pair)
        connection, in_use = pair
        with in_use:
            connection.close()

    def close(self) -> None:
        """Close every connection, each once its current use ends; safe to call twice."""
        with self._registry:
            self._closed = True
            pairs, self._pairs = [*self._pairs, *self._stale, *self._idle], []
            self._stale = []
            self._idle = []
            finalizers, self._finalizers = self._finalizers, []
        for finalizer in finalizers:
            finalizer.detach()
        for connection, in_use in pairs:
            with in_use:
                connection.close()


def _forget(owner_ref: weakref.ref[ThreadConnections[Any]], pair: Pair[Any]) -> None:
    """Keep the connection of a thread that ended for the next thread, or close it, unless its
    owner closed it already."""
    owner = owner_ref()
    if owner is not None:
        with owner._registry:
            if pair not in owner._pairs:
                return
            owner._pairs.remove(pair)
            if owner._keep(pair):
                return
    connection, in_use = pair
    with in_use:
        connection.close()
