"""The SQLite event store (the default): one file, stdlib ``sqlite3``, several threads and
processes.

Ordering. The global position is an ``INTEGER PRIMARY KEY AUTOINCREMENT``. SQLite lets one
writer at a time hold the write lock, from ``BEGIN IMMEDIATE`` to ``COMMIT``, and positions are
assigned inside that transaction; so the order of positions is the order of commits, and a
reader never sees a gap that a slower transaction fills later (unlike a sequence in
PostgreSQL). Positions start at 1 and, since nothing is ever deleted, have no gaps in practice.

Durability. ``synchronous`` is SQLite's ``PRAGMA synchronous`` for this store's connections, in
WAL mode:

- ``"FULL"`` (default): every commit is fsynced; a committed append survives power loss;
- ``"NORMAL"``: fsync at checkpoints only; a commit survives a crash of the process, but the
  last commits may be lost on power loss or an OS crash (the database stays consistent);
- ``"OFF"``: no fsync at all; for tests and throwaway data;
- ``"EXTRA"``: ``FULL`` plus an fsync of the directory; for the paranoid.

Several processes. Every process opens its own :class:`SqliteEventStore` on the same file.
Writers wait for each other (``busy_timeout``, 30 s by default) rather than fail; a wait longer
than that raises :class:`~decider.stores.errors.StoreUnavailable`. In-process appends wake the
subscriptions at once; another process's appends wake them through the doorbell file beside the
database, heard through ``inotify`` on Linux (:mod:`decider.stores.sqlite._watch`). A waiting
subscription also probes every ``probe_interval`` seconds (50 ms by default; one look of the
process's serves all its subscriptions, so a row no bell announced is found within twice that):
the backstop where no bell is heard.

WARNING: open the store after forking, never before: a connection must not cross a fork.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from decider.stores._connections import ThreadConnections
from decider.stores._expectations import check_read_args, validate_append
from decider.stores.errors import PermanentStoreError, StoreError, StoreUnavailable
from decider.stores.leases import Lease, batch_checkpoints, batch_leases, check_ttl
from decider.stores.names import CHECKPOINT, DEFAULT, NameRules
from decider.stores.protocol import (
    ALL,
    AppendResult,
    ExpectedRevision,
    Filter,
    NewEvent,
    RecordedEvent,
    Snapshot,
    StateWrite,
    StoredState,
    StreamAppend,
)
from decider.stores.sqlite import _leases as lease_rows
from decider.stores.sqlite import _snapshots as snapshots
from decider.stores.sqlite import _sql as sql
from decider.stores.sqlite import _state as states
from decider.stores.sqlite._append import IDS_PER_QUERY, append_all, append_one
from decider.stores.sqlite._watch import (
    BELLS,
    Doorbell,
    FileWatch,
    Rung,
    bell_names,
    start_watch,
)
from decider.stores.subscription import (
    CatchUpSubscription,
    Gist,
    LogNotifier,
    Summed,
    Written,
    written_by,
    written_to,
)

_T = TypeVar("_T")

SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")
"""The accepted values of ``synchronous`` (SQLite's ``PRAGMA synchronous``)."""


_LOOK_AT_MOST = 10_000
"""How many positions past its last look the doorbell's look sums up at most; past that it
wakes every subscription instead."""

_KEEP_GISTS = 4 * _LOOK_AT_MOST
"""How many positions back from the log's head the commits' gists are kept (a look never reads
one further back than :data:`_LOOK_AT_MOST`)."""

_PRUNE_GISTS_EVERY = 64
"""A store forgets the gists too old to read once every this many commits of its own."""


class SqliteEventStore:
    """An event store in one SQLite file (or ``":memory:"``), safe for threads and processes.

    Implements :class:`~decider.stores.protocol.EventStore`,
    :class:`~decider.stores.protocol.CheckpointStore`,
    :class:`~decider.stores.protocol.TransactionalStore`,
    :class:`~decider.stores.leases.LeaseStore` (a lease table),
    :class:`~decider.stores.protocol.SnapshotStore` and
    :class:`~decider.stores.protocol.IdLookupStore`. Appends are atomic and serialised by
    SQLite's write lock; positions strictly increase in commit order; ``synchronous`` sets the
    durability of a commit (see the module docstring). Each thread uses its own connection.
    ``":memory:"`` holds the log in this process only, behind one shared connection.
    """

    keeps_partition_keys: ClassVar[bool] = True
    """Each event's partition key is kept and filtered by
    (:class:`~decider.stores.protocol.KeyedStore`)."""

    name_rules: ClassVar[NameRules] = DEFAULT
    """The names this store holds (:mod:`decider.stores.names`); others raise
    :class:`~decider.stores.errors.InvalidName` before anything is written or read."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "FULL",
        busy_timeout: float = 30.0,
        probe_interval: float = 0.05,
    ) -> None:
        level = synchronous.upper()
        if level not in SYNCHRONOUS_LEVELS:
            raise ValueError(
                f"synchronous must be one of {', '.join(SYNCHRONOUS_LEVELS)}, got {synchronous!r}"
            )
        if not 0 <= busy_timeout < math.inf:
            raise ValueError(f"busy_timeout must be >= 0 seconds, got {busy_timeout}")
        if not 0 < probe_interval < math.inf:
            raise ValueError(f"probe_interval must be a positive number, got {probe_interval}")
        self._path = os.fspath(path)
        self._in_memory = self._path == ":memory:"
        self.synchronous = level
        """The ``PRAGMA synchronous`` level of this store's connections."""
        self._busy_timeout = busy_timeout
        self._probe_interval = None if self._in_memory else probe_interval
        # ":memory:" is one database per connection, so every thread shares one connection
        # (taking turns through its lock); a file gets a connection per thread.
        self._connections = ThreadConnections(
            self._connect,
            lambda: StoreError(f"the SQLite event store {self._path!r} is closed"),
            shared=self._in_memory,
            reusable=lambda connection: not connection.in_transaction,
        )
        self._notifier = LogNotifier()
        self._notifier.on_change = self._aim
        self._bell = None if self._in_memory else Doorbell(self._path)
        self._watch: FileWatch | None = None
        self._watch_lock = threading.Lock()
        self._watched_head: int | None = None
        self._head_lock = threading.Lock()
        """Guards ``_watched_head``: the watch and this process's commits move it."""
        self._looked_at = -math.inf
        """When the last look began (``time.monotonic()``): a probe within ``probe_interval``
        of it makes none of its own (:meth:`_announced`)."""
        self._gists_kept = 0
        connection, _ = self._connection()
        try:
            if not self._in_memory:
                connection.execute("PRAGMA journal_mode=WAL")
            connection.executescript(sql.SCHEMA)
            _add_partition_keys(connection)
            connection.executescript(snapshots.SCHEMA)
            connection.executescript(states.SCHEMA)
        except sqlite3.Error as exc:
            self.close()
            raise _store_error(self._path, exc) from exc

    def __repr__(self) -> str:
        return f"SqliteEventStore({self._path!r})"

    @property
    def path(self) -> str:
        """The database file (or ``":memory:"``)."""
        return self._path

    def append(
        self, stream: str, events: Sequence[NewEvent], expected_revision: ExpectedRevision
    ) -> AppendResult:
        """Append ``events`` atomically if the stream is at ``expected_revision``.

        Raises :class:`~decider.stores.errors.WrongExpectedVersion`, writing nothing, on a mismatch;
        re-appending stored ids with the same expectation returns the stored result. The
        append is durable as ``synchronous`` says once this returns.
        """
        validate_append(len(events), expected_revision)
        self.name_rules.check_append(stream, events)
        now = _now()
        return self._write(
            lambda c: append_one(c, stream, events, expected_revision, now),
            written_to(stream, events),
            lambda result: result.position,
        )

    def append_batch(
        self,
        appends: Sequence[StreamAppend],
        *,
        checkpoints: Sequence[tuple[str, int]] = (),
        leases: Sequence[Lease] = (),
    ) -> list[AppendResult]:
        """Apply every append and every checkpoint in one transaction: all of them, or none;
        with ``leases``, only while every one is still held (else
        :class:`~decider.stores.leases.LeaseLost` naming the first lost)."""
        return self._commit_batch(appends, batch_checkpoints(checkpoints), batch_leases(leases))

    def claim_lease(self, partition: str, owner: str, ttl: float) -> Lease | None:
        """Take the lease on ``partition`` for ``ttl`` seconds (see
        :class:`~decider.stores.leases.LeaseStore`); ``None`` if another owner holds it."""
        check_ttl(ttl)
        return self._write(lambda c: lease_rows.claim(c, partition, owner, ttl), ())

    def renew_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend ``lease`` by ``ttl`` seconds from now; ``LeaseLost`` if no longer held."""
        check_ttl(ttl)
        return self._write(lambda c: lease_rows.renew(c, lease, ttl), ())

    def release_lease(self, lease: Lease) -> bool:
        """Free the partition at once; whether ``lease`` was still held."""
        return self._write(lambda c: lease_rows.release(c, lease), ())

    def leases(self) -> list[Lease]:
        """Every partition's lease, ordered by partition."""
        connection, in_use = self._connection()
        with in_use:
            self._check_open()
            try:
                return lease_rows.all_leases(connection)
            except sqlite3.Error as exc:
                raise _store_error(self._path, exc) from exc

    def read_stream(
        self, stream: str, from_revision: int = 0, limit: int | None = None
    ) -> list[RecordedEvent]:
        """The stream's events from ``from_revision`` on; ``[]`` for a missing stream."""
        check_read_args(from_revision, limit)
        self.name_rules.check_stream(stream)
        rows = self._query(sql.READ_STREAM, (stream, from_revision, -1 if limit is None else limit))
        return sql.decode_rows(rows)

    def read_all(
        self,
        after_position: int | None = None,
        limit: int | None = None,
        filter: Filter = ALL,
    ) -> list[RecordedEvent]:
        """Events after ``after_position`` (exclusive) that pass ``filter``, in log order."""
        check_read_args(0, limit)
        statement, params = sql.read_all_sql(filter)
        after = 0 if after_position is None else after_position
        rows = self._query(statement, (after, *params, -1 if limit is None else limit))
        return sql.decode_rows(rows)

    def subscribe(
        self, after_position: int | None = None, filter: Filter = ALL
    ) -> CatchUpSubscription:
        """A catch-up subscription after ``after_position``.

        Woken at once by appends through this object, and by other processes' (or other store
        objects') through the doorbell; where it is not heard, within ``probe_interval``.
        """
        self._check_open()
        self._start_watch()
        return CatchUpSubscription(
            read_page=lambda after, limit: self.read_all(after, limit, filter),
            head=self._head,
            notifier=self._notifier,
            after_position=after_position,
            probe_interval=self._probe_interval,
            filter=filter,
            announced=self._announced,
        )

    def load_checkpoint(self, name: str) -> int | None:
        """The last stored position of processor ``name``, or ``None``."""
        self.name_rules.check(CHECKPOINT, name)
        rows = self._query(sql.LOAD_CHECKPOINT, (name,))
        return int(rows[0][0]) if rows else None

    def save_checkpoint(self, name: str, position: int) -> None:
        """Store the position of processor ``name`` durably, replacing any earlier one."""
        self.name_rules.check(CHECKPOINT, name)
        self._query(sql.SAVE_CHECKPOINT, (name, position))

    def load_snapshot(self, stream: str) -> Snapshot | None:
        """The stored snapshot of ``stream``, or ``None``."""
        self.name_rules.check_stream(stream)
        rows = self._query(snapshots.LOAD, (stream,))
        return Snapshot(int(rows[0][0]), str(rows[0][1]), bytes(rows[0][2])) if rows else None

    def stored_ids(self, stream: str, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Those of ``ids`` that ``stream`` holds, found through the (stream, event id) index."""
        self.name_rules.check_stream(stream)
        found: set[uuid.UUID] = set()
        for start in range(0, len(ids), IDS_PER_QUERY):  # SQLite caps a statement's parameters
            chunk = ids[start : start + IDS_PER_QUERY]
            rows = self._query(sql.find_ids_sql(len(chunk)), (*(i.bytes for i in chunk), stream))
            found.update(uuid.UUID(bytes=row[0]) for row in rows)
        return found

    def save_snapshot(self, stream: str, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` unless the stored one is of its state version and later."""
        self.name_rules.check_stream(stream)
        row = (stream, snapshot.revision, snapshot.state_version, snapshot.data)
        self._query(snapshots.SAVE, row)

    def load_state(self, key: str) -> StoredState | None:
        """The stored state of ``key``, or ``None``."""
        return states.load(self._query(states.LOAD, (key,)))

    def commit_states(
        self,
        writes: Sequence[StateWrite],
        appends: Sequence[StreamAppend],
        *,
        checkpoints: Sequence[tuple[str, int]] = (),
        leases: Sequence[Lease] = (),
    ) -> None:
        """Write every state (version-checked), append and checkpoint in one transaction;
        with leases, only while every one is still held (as :meth:`append_batch`)."""
        self._commit_batch(
            appends,
            batch_checkpoints(checkpoints),
            batch_leases(leases),
            lambda connection: states.write(connection, writes),
        )

    def _commit_batch(
        self,
        appends: Sequence[StreamAppend],
        saved: Sequence[tuple[str, int]],
        fences: Sequence[Lease],
        first: Callable[[sqlite3.Connection], None] | None = None,
    ) -> list[AppendResult]:
        """The leases' fences, ``first`` (the state rows), every append and the checkpoints,
        in one write transaction: what :meth:`append_batch` and :meth:`commit_states` share."""
        for item in appends:
            validate_append(len(item.events), item.expected_revision)
            self.name_rules.check_append(item.stream, item.events)
        for name, _ in saved:
            self.name_rules.check(CHECKPOINT, name)
        now = _now()

        def body(connection: sqlite3.Connection) -> list[AppendResult]:
            for fence in fences:
                lease_rows.fence(connection, fence)
            if first is not None:
                first(connection)
            results = append_all(connection, appends, now)
            if saved:
                connection.executemany(sql.SAVE_CHECKPOINT, saved)
            return results

        return self._write(body, written_by(appends), _last_position)

    def close(self) -> None:
        """Close every connection and end every subscription; safe to call twice."""
        # Subscriptions learn of the close before their reads start failing.
        self._notifier.close()
        with self._watch_lock:
            watch, self._watch = self._watch, None
        if watch is not None:
            watch.close()
        if self._bell is not None:
            self._bell.close()
        self._connections.close()

    def _start_watch(self) -> None:
        """Once, for a file: ask the kernel to tell when another process writes it
        (:mod:`decider.stores.sqlite._watch`)."""
        if self._in_memory or self._watch is not None:
            return
        with self._watch_lock:
            if self._watch is None:
                self._watched_head = self._head()
                self._watch = start_watch(self._path, self._file_written, self._bells())

    def _bells(self) -> frozenset[int | None]:
        """The bells to listen to: the plain one (events with no key), and the keyed ones of
        the partitions the subscriptions read (:meth:`LogNotifier.key_classes`)."""
        classes = self._notifier.key_classes(BELLS)
        return frozenset((None, *(range(BELLS) if classes is None else classes)))

    def _aim(self) -> None:
        """A subscription came or went: listen to the bells of the partitions read now. A bell
        added is listened to before the new subscription's first read, so none of its rows
        committed after that read goes unheard."""
        with self._watch_lock:  # a watch being started is aimed once it is there
            if self._watch is not None:
                self._watch.aim(*bell_names(os.path.basename(self._path), self._bells()))

    def _file_written(self, keyed: bool) -> None:
        """On the watch's thread: some process rang the doorbell: :meth:`_look`. Where only
        keyed bells rang (``keyed``), each rung after the head file passed its commit's rows
        (:meth:`Doorbell.rung`), so a head file at most at the watched head says every row
        rung for was announced (this process's own commits ring the bells it listens to): no
        look. Where the head file's commit begins at the watched head, its gist there sums up
        every row up to the head file's (they are that commit's): it is announced so, with
        no query. A plain bell is always looked at: a writer that rings it by hand (or an
        older decider) keeps no head file."""
        if keyed and self._bell is not None:
            rung = self._bell.rung()
            if rung is not None:
                with self._head_lock:
                    watched = self._watched_head or 0
                if rung.head <= watched:
                    return
                if rung.first == watched and self._announce(rung):
                    return
        with contextlib.suppress(StoreError):  # closing, or the file is away: the probe goes on
            self._look()

    def _announce(self, rung: Rung) -> bool:
        """Wake the subscriptions that may want the rows of the commit ``rung`` records (all
        those after the watched head up to ``rung.head``), from its gist; whether its gist
        could be read (else nothing is done: the caller looks)."""
        gist = Gist.of_text(rung.gist) if rung.gist else None
        if gist is None:
            return False
        count = self._notifier.partition_count()
        self._notifier.notify_written(gist.summed(count, rung.head, rung.modulo), count)
        with self._head_lock:  # announced first, as a look does
            self._watched_head = max(rung.head, self._watched_head or 0)
        return True

    def _look(self) -> int | None:
        """Sum up what was written since the last look and wake the subscriptions that have
        not read past something they may want: this process's own commits, already announced,
        wake nobody again. The log's head, every row up to which is announced once this
        returns.

        The sum comes from the commits' gists (each commit of events keeps one, see
        :meth:`_keep_gist`), read with the log's head in one query: a few rows however many
        events were written. Rows that no gist covers (a writer that keeps none, such as plain
        ``sqlite3``, or a gist too long to keep) are summed up in the database instead (each
        type and partition with its last position). Safe on any thread, two at once included
        (the watch's and a probe's: both announce, the head kept is the furthest)."""
        with self._head_lock:
            looked = self._watched_head or 0
            self._looked_at = time.monotonic()
        rows = self._query(sql.GISTS_SINCE, (looked,))
        head: int | None = next(last for first, last, _, _ in rows if first is None)
        if head is None or head <= looked:
            return head
        if head - looked > _LOOK_AT_MOST:  # a burst: every subscription looks for itself
            # Announced first: a probe that finds the head watched passes over it unread.
            self._notifier.notify(None)
        else:
            count = self._notifier.partition_count()
            self._notifier.notify_written(self._summed(rows, looked, head, count), count)
        with self._head_lock:
            self._watched_head = max(head, self._watched_head or 0)
        return int(head)

    def _summed(self, rows: list[Any], looked: int, head: int, count: int) -> Summed:
        """What the commits after ``looked`` up to ``head`` wrote (each type and partition of
        ``count`` with its last position), from the gists in ``rows`` (:data:`sql.GISTS_SINCE`)
        and, for the rows no gist covers, from the database."""
        summed: Summed = {}
        at = looked
        # Ranges in log order: a later one's position replaces an earlier one's.
        gists = sorted((row for row in rows if row[0] is not None), key=_by_last)
        for first, last, modulo, text in gists:
            if last > head:  # (never: a gist is written with its rows)
                break
            gist = Gist.of_text(text) if first == at and text else None
            if gist is None:
                self._sum_up(summed, count, at, last)
            else:
                for event_type, partitions in gist.summed(count, last, modulo).items():
                    summed.setdefault(event_type, {}).update(partitions)
            at = last
        if at < head:
            self._sum_up(summed, count, at, head)
        return summed

    def _sum_up(self, summed: Summed, count: int, after: int, last: int) -> None:
        """Add to ``summed`` what the rows after ``after`` up to ``last`` are, summed up in the
        database (:data:`sql.WRITTEN_BETWEEN`)."""
        for event_type, partition, position in self._query(
            sql.WRITTEN_BETWEEN, (count, after, last)
        ):
            summed.setdefault(event_type, {})[partition] = position

    def _announced(self) -> tuple[bool, int | None]:
        """A subscription's probe: whether every row up to the log's head was announced to this
        process's subscriptions, and the head. Every row up to ``_watched_head`` was, before it
        moved there: this process's own commits by their notification, other processes' by a
        look (:meth:`_look`). A row past it (another process's that rang no bell yet, or never
        will: plain ``sqlite3``, a network mount) is looked at now, by the probe's own look: one
        query that announces it to every subscription that may want it (the probing one
        included, which then reads), where a read of each probing subscription would walk it.
        A store with no watch reads.

        One look serves every subscription of the process: a probe within ``probe_interval``
        of the last look (the watch's or another probe's) makes none and answers with what that
        look announced, so the process's waiting subscriptions look about once per interval
        together, not once each, and not at all while bells keep the watch looking."""
        if self._watch is None:
            return False, None
        with self._head_lock:
            if time.monotonic() - self._looked_at < (self._probe_interval or 0.0):
                return True, self._watched_head
        head = self._look()
        with self._head_lock:
            announced = self._watched_head or 0
        return head is None or head <= announced, head

    def _head(self) -> int | None:
        [(head,)] = self._query(sql.HEAD, ())
        return None if head is None else int(head)

    def _check_open(self) -> None:
        self._connections.check_open()

    def _query(self, statement: str, params: tuple[object, ...]) -> list[Any]:
        """Run one statement in autocommit mode (its own implicit transaction); its rows."""
        connection, in_use = self._connection()
        with in_use:
            self._check_open()
            try:
                return connection.execute(statement, params).fetchall()
            except sqlite3.Error as exc:
                raise self._failed(connection, in_use, exc) from exc

    def _write(
        self,
        body: Callable[[sqlite3.Connection], _T],
        written: Written | None,
        last: Callable[[_T], int | None] | None = None,
    ) -> _T:
        """Run ``body`` in a write transaction, then wake the subscriptions that read what it
        ``written`` (in this process; in the others, by the doorbell, if it wrote events).
        ``last``: the highest position the body's result names (its appends' results: each
        the last row it wrote, or a stored one it found), so the log's head after the body
        needs no query.

        ``BEGIN IMMEDIATE`` takes the write lock first, so the revision ``body`` reads still
        holds when it inserts, in this process and in every other.
        """
        # The log's head before and after the body (under the write lock: the rows between are
        # this commit's) lets the watch skip this process's own rows, and dates the commit's
        # gist, which the other processes' watch reads.
        gisted = self._bell is not None and bool(written)
        watched = gisted or (self._watch is not None and written is None)
        before = after = None
        kept: tuple[int, str] | None = None
        connection, in_use = self._connection()
        with in_use:
            self._check_open()
            try:
                connection.execute("BEGIN IMMEDIATE")
                try:
                    if watched:
                        before = connection.execute(sql.HEAD).fetchone()[0]
                    result = body(connection)
                    if watched:
                        after = _head_after(connection, before, result, last)
                    if gisted and written and after is not None and after > (before or 0):
                        kept = self._keep_gist(connection, before or 0, after, written)
                    connection.execute("COMMIT")
                except BaseException:
                    # Some errors (a full disk) end the transaction themselves.
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise self._failed(connection, in_use, exc) from exc
        if written is None or written:
            self._notifier.notify(written)
            if after is not None:
                self._own_rows(before, after)
            if self._bell is not None:
                rung = after if after is not None and after > (before or 0) else None
                self._bell.ring(written, rung, before or 0, kept)
        return result

    def _keep_gist(
        self, connection: sqlite3.Connection, before: int, after: int, written: Written
    ) -> tuple[int, str]:
        """Inside the commit's write transaction: keep its gist (what it wrote, in brief) for
        the other processes' watch (:meth:`_file_written`); now and then, forget those too old
        for any watch to read (one that far behind wakes every subscription instead). The
        gist's modulo and text (for the head file too, :meth:`Doorbell.ring`)."""
        gist = Gist.of(written)
        # In a group, the partitions of the count this process reads by (its keys modulo it) are
        # what the other processes' subscriptions read by too: a few numbers, not one key per
        # instance.
        modulo = self._notifier.partition_count()
        if modulo > 1:
            gist = gist.reduced(modulo)
        else:
            modulo = 0
        text = gist.text()
        connection.execute(
            sql.INSERT_GIST, (after, before, modulo, text if len(text) <= sql.GIST_LIMIT else "")
        )
        self._gists_kept += 1
        if self._gists_kept % _PRUNE_GISTS_EVERY == 0:
            connection.execute(sql.PRUNE_GISTS, (after - _KEEP_GISTS,))
        return modulo, text

    def _own_rows(self, before: int | None, after: int) -> None:
        """This process committed (and announced) the rows after ``before`` up to ``after``:
        if the watch has looked up to ``before``, it looks on from ``after`` (its next look,
        woken by this commit's own ring, reads only what other processes wrote)."""
        with self._head_lock:
            if (self._watched_head or 0) == (before or 0):
                self._watched_head = after

    def _failed(
        self, connection: sqlite3.Connection, in_use: threading.RLock, exc: sqlite3.Error
    ) -> StoreError:
        """The store's error for ``exc``; after a transient one this thread's connection is
        dropped, so the next call opens a fresh one.

        A connection opened while the file was read-only (or that met an I/O error) stays so
        for good: reopening is what lets a store recover once the file is writable again.
        ``":memory:"`` keeps its one connection (it is the database).
        """
        error = _store_error(self._path, exc)
        if isinstance(error, StoreUnavailable) and not self._in_memory:
            with contextlib.suppress(sqlite3.Error):
                if _primary(exc) == sqlite3.SQLITE_READONLY:
                    # Every connection of this process to a WAL file shares its shared-memory
                    # file, opened read-only if the file system was read-only when the first
                    # connection came: only closing them all lets the next one write.
                    self._connections.drop_all()
                else:
                    self._connections.drop((connection, in_use))
        return error

    def _connection(self) -> tuple[sqlite3.Connection, threading.RLock]:
        """This thread's connection and the lock that keeps close() from closing it in use."""
        try:
            return self._connections.get()
        except sqlite3.Error as exc:
            raise _store_error(self._path, exc) from exc

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self._path,
            timeout=self._busy_timeout,
            isolation_level=None,  # autocommit: transactions are explicit BEGIN IMMEDIATE
            check_same_thread=False,  # close() closes every thread's connection
            cached_statements=64,
        )
        try:
            connection.execute(f"PRAGMA synchronous={self.synchronous}")
        except BaseException:
            connection.close()
            raise
        return connection


def _add_partition_keys(connection: sqlite3.Connection) -> None:
    """Give a file written before partition keys existed its column (:data:`sql.MIGRATE`),
    under the write lock: another process may be opening it at the same moment."""
    if connection.execute(sql.HAS_PARTITION_KEY).fetchone() is not None:
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        if connection.execute(sql.HAS_PARTITION_KEY).fetchone() is None:
            connection.execute(sql.MIGRATE)
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


# SQLite's primary result codes (the low byte of an extended one) by what they mean for a caller.
_TRANSIENT = {
    sqlite3.SQLITE_BUSY: "stayed locked",
    sqlite3.SQLITE_LOCKED: "stayed locked",
    sqlite3.SQLITE_READONLY: "is read-only",  # a remount, a permissions change: may be undone
    sqlite3.SQLITE_IOERR: "had an I/O error",
    sqlite3.SQLITE_FULL: "is on a full disk",
    sqlite3.SQLITE_CANTOPEN: "cannot be opened",
    sqlite3.SQLITE_PROTOCOL: "stayed locked",
    sqlite3.SQLITE_NOMEM: "ran out of memory",
}
_PERMANENT = {sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_RANGE}


def _primary(exc: sqlite3.Error) -> int | None:
    """The primary result code of ``exc`` (the low byte of its extended code), if it has one."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


def _store_error(path: str, exc: sqlite3.Error) -> StoreError:
    """The one place where sqlite3's errors become the store's.

    Locked or busy beyond ``busy_timeout``, read-only, an I/O error, a full disk, a file that
    cannot be opened: :class:`StoreUnavailable` (the condition may pass; the store reopens the
    connection, see :func:`_is_transient`). A value SQLite can never hold (too big):
    :class:`PermanentStoreError`. Anything else (a corrupt file, a bug): :class:`StoreError`.
    """
    primary = _primary(exc)
    if isinstance(exc, sqlite3.ProgrammingError) and "closed database" in str(exc):
        # Only a connection closed under a thread that had taken it, by a read-only failure
        # on another thread (see SqliteEventStore._failed): the next call opens a fresh one.
        return StoreUnavailable(f"SQLite database {path!r} was reopened: {exc}")
    if primary in _TRANSIENT:
        return StoreUnavailable(f"SQLite database {path!r} {_TRANSIENT[primary]}: {exc}")
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc)):
        return StoreUnavailable(f"SQLite database {path!r} stayed locked: {exc}")
    if primary in _PERMANENT or isinstance(exc, sqlite3.DataError):
        return PermanentStoreError(f"SQLite database {path!r} cannot store this: {exc}")
    return StoreError(f"SQLite database {path!r}: {exc}")


def _by_last(row: Any) -> int:
    """A gist's row (:data:`sql.GISTS_SINCE`) by its commit's last position."""
    return int(row[1])


def _last_position(results: list[AppendResult]) -> int | None:
    return max([result.position for result in results], default=None)  # a list: no generator


def _head_after(
    connection: sqlite3.Connection,
    before: int | None,
    result: _T,
    last: Callable[[_T], int | None] | None,
) -> int | None:
    """The log's head after a write transaction's body (its lock held) whose head before was
    ``before``. Every row the body inserted has a position past ``before`` (``AUTOINCREMENT``,
    one writer), and each append's result names its last row or a stored one (at most
    ``before``): the highest position named is the head, if past ``before``; else nothing was
    inserted. Without ``last``, the head is read."""
    if last is None:
        head: int | None = connection.execute(sql.HEAD).fetchone()[0]
        return head
    named = last(result)
    if named is None or (before is not None and named <= before):
        return before
    return named


def _now() -> str:
    return datetime.now(UTC).isoformat()
