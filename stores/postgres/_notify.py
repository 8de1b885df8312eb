"""The PostgreSQL store's wake-up of other processes: one coalesced ``NOTIFY`` after commits.

A ``NOTIFY`` inside the appending transaction would be simplest, but PostgreSQL serialises every
notifying commit of the cluster behind one lock held through the commit's WAL flush
(``PreCommit_Notify`` in ``src/backend/commands/async.c``), which would put the writers back in
single file. So the store notifies *after* its commits, from a connection of its own whose
``synchronous_commit`` is off (a notification needs no durability), in a thread of its own,
and coalesces: while it sends, further commits only mark that another notification is due.
A notification only says "look again": the readers trust the log, never the message.

Under a steady stream of commits the thread sends at most one notification per
:data:`MIN_INTERVAL`: each one is a round trip and a transaction on the server, and sending one
per append cost about a third of the appends' client CPU with 16 writers (about 30 us an
append). The first commit after a quiet spell is announced at once, so a wake-up waits at most
that interval longer, and only while commits keep coming.

WARNING: a process killed between a commit and its notification wakes nobody; the listeners of
other processes still look again within their probe interval
(:data:`decider.stores.postgres._listen.PROBE_INTERVAL`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import psycopg
from psycopg.rows import TupleRow

MIN_INTERVAL = 0.005
"""Seconds between the end of one notification and the next (commits meanwhile coalesce)."""


class CommitAnnouncer:
    """Sends the store's ``NOTIFY`` after commits from a thread of its own, coalescing them.

    ``connect()`` opens a new autocommit connection. :meth:`announce` returns at once and never
    raises: an append that committed must not wait for, or fail because of, the wake-up.
    """

    def __init__(
        self, connect: Callable[[], psycopg.Connection[TupleRow]], notify: str, name: str
    ) -> None:
        self._connect = connect
        self._notify = notify
        self._name = name
        self._condition = threading.Condition()
        self._pending = False
        self._closed = False
        self._closing = threading.Event()  # wakes the thread's pause between notifications
        self._thread: threading.Thread | None = None
        self._connection: psycopg.Connection[TupleRow] | None = None

    def announce(self) -> None:
        """Make sure a notification goes out after this call (from the sending thread)."""
        with self._condition:
            if self._closed or self._pending:
                return  # pending: the thread has yet to take it, and sends after this commit
            self._pending = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._condition.notify()

    def close(self, timeout: float) -> None:
        """Send what is pending, then stop the thread and close its connection (waits up to
        ``timeout`` seconds)."""
        with self._condition:
            self._closed = True
            self._condition.notify()
            thread = self._thread
        self._closing.set()
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        try:
            while True:
                with self._condition:
                    self._condition.wait_for(lambda: self._pending or self._closed)
                    if not self._pending:
                        return
                    self._pending = False
                self._send()
                # Coalesce the commits of the next few ms into one notification (a commit
                # meanwhile only marks it pending: no wake-up per append).
                self._closing.wait(MIN_INTERVAL)
        finally:
            if self._connection is not None:
                self._connection.close()

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
