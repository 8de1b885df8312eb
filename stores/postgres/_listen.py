"""The PostgreSQL store's LISTEN thread: it turns other processes' appends into wake-ups.

Every append sends a ``NOTIFY`` on its schema's channel when it commits. One thread per store
(started by the first subscription) holds a connection that ``LISTEN``s on that channel, sleeps
in ``select`` on its socket, and pokes the store's :class:`~decider.stores.subscription.LogNotifier`
whenever something arrives from another store (its own notifications, sent by the store's
announcer, are passed over: its subscriptions were woken when it committed). A notification's
payload is the gist of the commits it covers (:mod:`decider.stores.postgres._notify`): only the
subscriptions that may want one of their events are woken (a process of a group, those of the
partitions written), and they then read the log as usual. An empty or unreadable payload wakes
every subscription. The readers never rely on the payload for what they read: it only says
whom to tell "look again".

A commit can be readable later than its notification: readers read only below the oldest
transaction still in flight (:mod:`decider.stores.postgres.store`, "Ordering"), which may be one
that never notifies (a checkpoint, a lease, another database's). So after a notification the thread
asks whether a committed row waits behind such a transaction, and while one does it pokes the
notifier again after a short, growing delay (up to :data:`HELD_BACK_MAX_DELAY`). Without any
notification it still pokes every :data:`PROBE_INTERVAL`, so a writer killed between its commit
and its (separate) notification delays readers by at most that.

If the connection breaks (a server restart, a killed backend), the thread reconnects with a
growing delay (up to 2 s) and pokes the notifier once it listens again, so an append made while
it was deaf is still delivered. :meth:`NotifyListener.stop` wakes the thread through a socket
pair and joins it; it returns at once unless the thread is in the middle of a connection attempt
(bounded by ``connect_timeout``).
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable

import psycopg
from psycopg import sql as pgsql
from psycopg.rows import TupleRow

from decider.stores.subscription import Gist, LogNotifier

_MAX_RETRY_DELAY = 2.0

PROBE_INTERVAL = 1.0
"""Seconds the listener waits for a notification before it pokes the notifier anyway."""

HELD_BACK_MAX_DELAY = 0.1
"""The longest delay between pokes while committed rows wait behind a transaction in flight."""


class NotifyListener:
    """A thread that LISTENs on one channel and pokes ``notifier`` on every notification.

    ``connect()`` opens a new autocommit connection (raising psycopg's errors). :meth:`start`
    listens before it returns, so any commit after it wakes the notifier.
    """

    def __init__(
        self,
        connect: Callable[[], psycopg.Connection[TupleRow]],
        channel: str,
        notifier: LogNotifier,
        name: str,
        held_back: str,
        *,
        own_pid: Callable[[], int | None] = lambda: None,
    ) -> None:
        self._connect = connect
        self._own_pid = own_pid
        self._held_back = held_back
        self._listen = pgsql.SQL("LISTEN {}").format(pgsql.Identifier(channel))
        self._notifier = notifier
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._connection: psycopg.Connection[TupleRow] | None = None

    @property
    def backend_pid(self) -> int | None:
        """The server process of the listening connection (``None`` while reconnecting)."""
        connection = self._connection
        return None if connection is None or connection.closed else connection.info.backend_pid

    def start(self) -> None:
        """Connect and LISTEN (psycopg's errors propagate), then start the thread."""
        self._connection = self._open()
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop the thread and close its connection; waits up to ``timeout`` seconds."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._wake_writer.send(b"x")
        if self._thread.is_alive():
            self._thread.join(timeout)
        if not self._thread.is_alive():
            self._wake_reader.close()
            self._wake_writer.close()

    def _open(self) -> psycopg.Connection[TupleRow]:
        connection = self._connect()
        try:
            connection.execute(self._listen)
        except BaseException:
            connection.close()
            raise
        return connection

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                connection = self._connection
                if connection is None:
                    if not self._reconnect():
                        break
                    continue
                wake = self._wake_reader.fileno()
                readable, _, _ = select.select([connection.fileno(), wake], [], [], PROBE_INTERVAL)
                if wake in readable:
                    break
                try:
                    if not readable:  # the probe: wake every subscription
                        self._notifier.notify()
                        continue
                    self._take_notifications(connection)
                except psycopg.Error:
                    self._drop()
                    continue
        finally:
            self._drop()
            if self._stopping.is_set():  # stop() may have given up waiting for us
                self._wake_reader.close()
                self._wake_writer.close()

    def _take_notifications(self, connection: psycopg.Connection[TupleRow]) -> None:
        """Wake the subscriptions that the notifications received concern, until none is left
        (psycopg's errors propagate).

        A notification that arrives while the held-back check runs is kept by psycopg, not left
        on the socket, so ``select`` would not see it: it is taken here, or it would wait for
        the probe.
        """
        own = self._own_pid()
        while True:
            notifies = list(connection.notifies(timeout=0))
            if not notifies:
                return
            # This store's own are passed over: announced in-process already.
            gists = [Gist.of_text(notify.payload) for notify in notifies if notify.pid != own]
            if gists:
                gist = _union(gists)
                # Rows held back concern only the subscriptions that want them: when none
                # does, there is nobody to wake again, and no need to ask.
                if self._notifier.notify_gist(gist):
                    self._follow_held_back(connection, gist)

    def _follow_held_back(
        self, connection: psycopg.Connection[TupleRow], gist: Gist | None
    ) -> None:
        """Poke the subscriptions that ``gist`` concerns again, after growing delays, while
        committed rows wait behind a transaction in flight (psycopg's errors propagate)."""
        delay = 0.002
        while connection.execute(self._held_back).fetchone() == (True,):
            if self._sleep(delay):
                return
            self._notifier.notify_gist(gist)
            delay = min(delay * 2, HELD_BACK_MAX_DELAY)

    def _reconnect(self) -> bool:
        """Connect again, waiting longer after each failure; ``False`` once stopping."""
        delay = 0.05
        while not self._sleep(delay):
            try:
                self._connection = self._open()
            except psycopg.Error:
                delay = min(delay * 2, _MAX_RETRY_DELAY)
                continue
            # Appends committed while no one listened woke nobody: look at the log again.
            self._notifier.notify()
            return True
        return False

    def _sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` or until stopped; whether stopping."""
        select.select([self._wake_reader], [], [], seconds)
        return self._stopping.is_set()

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()


def _union(gists: list[Gist | None]) -> Gist | None:
    """What several notifications cover together (``None``, unknown, if one's is)."""
    first = gists[0]
    for gist in gists[1:]:
        if first is None or gist is None:
            return None
        first = first | gist
    return first
