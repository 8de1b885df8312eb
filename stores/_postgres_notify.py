"""The PostgreSQL store's wake-up of other processes: one coalesced ``NOTIFY`` after commits.

A ``NOTIFY`` inside the appending transaction would be simplest, but PostgreSQL serialises every
notifying commit of the cluster behind one lock held through the commit's WAL flush
(``PreCommit_Notify`` in ``src/backend/commands/async.c``), which would put the writers back in
single file. So the store notifies *after* its commits, from a connection of its own whose
``synchronous_commit`` is off (a notification needs no durability), and coalesces: while one
thread sends, the commits of other threads only mark that another notification is due, and
the sender sends it once more when it is done. A notification only says "look again": the
readers trust the log, never the message.

WARNING: a process killed between a commit and its notification wakes nobody; the listeners of
other processes still look again within their probe interval
(:data:`decider.stores._postgres_listen.PROBE_INTERVAL`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import psycopg
from psycopg.rows import TupleRow


class CommitAnnouncer:
    """Sends the store's ``NOTIFY`` after commits, at most one at a time, coalescing the rest.

    ``connect()`` opens a new autocommit connection. :meth:`announce` never raises: an append
    that committed must not fail because the wake-up could not be sent.
    """

    def __init__(self, connect: Callable[[], psycopg.Connection[TupleRow]], notify: str) -> None:
        self._connect = connect
        self._notify = notify
        self._lock = threading.Lock()
        self._pending = False
        self._sending = False
        self._connection: psycopg.Connection[TupleRow] | None = None
        self._closed = False

    def announce(self) -> None:
        """Make sure a notification goes out after this call; send it unless another thread
        is sending (that thread then sends once more for this call)."""
        with self._lock:
            self._pending = True
            if self._sending or self._closed:
                return
            self._sending = True
        try:
            while True:
                with self._lock:
                    if not self._pending or self._closed:
                        self._sending = False
                        return
                    self._pending = False
                self._send()
        except BaseException:
            with self._lock:
                self._sending = False
            raise

    def close(self) -> None:
        """Close the notifying connection; later announcements are dropped."""
        with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def _send(self) -> None:
        try:
            if self._connection is None:
                connection = self._connect()
                connection.execute("SET synchronous_commit TO off")
                self._connection = connection
            self._connection.execute(self._notify)
        except psycopg.Error:
            # Dropped: the listeners' probe still finds the commit (module docstring).
            with contextlib.suppress(psycopg.Error):
                if self._connection is not None:
                    self._connection.close()
            self._connection = None
