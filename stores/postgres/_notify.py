"""The PostgreSQL store's wake-up of other processes: one coalesced ``NOTIFY`` after commits.

A ``NOTIFY`` inside the appending transaction would be simplest, but PostgreSQL serialises every
notifying commit of the cluster behind one lock held through the commit's WAL flush
(``PreCommit_Notify`` in ``src/backend/commands/async.c``), which would put the writers back in
single file. So the store notifies *after* its commits, from a connection of its own whose
``synchronous_commit`` is off (a notification needs no durability), in a thread of its own,
and coalesces: while it sends, further commits only mark that another notification is due.
A notification only says "look again": the readers trust the log, never the message.

Its payload says where to look: the :class:`~decider.stores.subscription.Gist` of the commits
it covers (their events' types and partition keys, JSON), so a listener wakes only the
subscriptions that may want one of them: a process of a group is not woken by the commits of
partitions it does not hold. A payload that would pass :data:`PAYLOAD_LIMIT` bytes (many
instances' keys) is sent empty, which wakes every subscription, as a commit whose gist is
unknown does.

No linger: the thread sends as soon as its previous notification is done, so a lone commit is
announced at once and, under a steady stream of commits, every commit made while one
notification is in flight is announced by the next (at most one notification per round trip,
about 0.1-0.3 ms on a local server, whatever the rate of commits).

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

from decider.stores.subscription import Gist

PAYLOAD_LIMIT = 7900
"""The longest payload sent, in bytes (PostgreSQL refuses 8000 or more); a longer one is sent
empty: "wake every subscription"."""


def payload(gist: Gist | None) -> str:
    """The notification's payload for ``gist`` (:meth:`Gist.text`): ``""`` (wake all) when
    unknown or too long.

    >>> payload(Gist(frozenset({"Placed"}), frozenset({7, 3}), False))
    '[["Placed"],[3,7],0]'
    >>> payload(None)
    ''
    """
    if gist is None:
        return ""
    text = gist.text()
    return text if len(text.encode()) <= PAYLOAD_LIMIT else ""


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
        self._gist: Gist | None = None
        """What the pending notification covers (``None``: unknown, wake all)."""
        self._closed = False
        self._thread: threading.Thread | None = None
        self._connection: psycopg.Connection[TupleRow] | None = None

    def announce(self, gist: Gist | None) -> None:
        """Make sure a notification covering ``gist`` (``None``: unknown) goes out after this
        call (from the sending thread)."""
        with self._condition:
            if self._closed:
                return
            if self._pending:
                # The thread has yet to take it, and sends after this commit: it covers both.
                if self._gist is not None:
                    self._gist = None if gist is None else self._gist | gist
                return
            self._pending = True
            self._gist = gist
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._condition.notify()

    @property
    def backend_pid(self) -> int | None:
        """The server process that sends the notifications (``None`` before the first)."""
        connection = self._connection
        return None if connection is None or connection.closed else connection.info.backend_pid

    def close(self, timeout: float) -> None:
        """Send what is pending, then stop the thread and close its connection (waits up to
        ``timeout`` seconds)."""
        with self._condition:
            self._closed = True
            self._condition.notify()
            thread = self._thread
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
                    gist = self._gist
                self._send(payload(gist))  # commits meanwhile only mark the next one pending
        finally:
            if self._connection is not None:
                self._connection.close()

    def _send(self, text: str) -> None:
        try:
            if self._connection is None:
                connection = self._connect()
                connection.execute("SET synchronous_commit TO off")
                self._connection = connection
            self._connection.execute(self._notify, (text,))
        except psycopg.Error:
            # Dropped: the listeners' probe still finds the commit (module docstring).
            with contextlib.suppress(psycopg.Error):
                if self._connection is not None:
                    self._connection.close()
            self._connection = None
