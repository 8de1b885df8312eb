"""The PostgreSQL event store: psycopg 3, several threads and processes on one database.

Ordering. Writers run in parallel, and a reader of the log never skips a late commit. A plain
sequence would not do that: numbers are handed out in the order transactions *ask*, not the
order they *commit*, so a reader could see position 11 committed while 10 is still in flight,
move past 11, and never see 10. Instead an event's position is its transaction's id
(``pg_current_xact_id()``, 64 bits, never wraps) shifted left by 20 bits, plus the event's
index within the transaction; and readers read only positions below the *horizon*, the oldest
transaction still in flight (``pg_snapshot_xmin(pg_current_snapshot())``) shifted the same way.
Every transaction below the horizon has ended, and a new one gets an id at or above it, so the
rows below the horizon are a closed set that no later commit adds to: reading it in position
order never skips. (A plain identity position with the same horizon filter is *not* safe: two
transactions may draw identities in the opposite order to their ids; the ordering test shows a
reader missing events that way.) Positions have gaps, which the protocol allows.

The price: a committed event becomes readable only once every transaction that started before
it *and holds a transaction id* has ended, in any database of the cluster.

WARNING: a long transaction that writes anything (or an idle-in-transaction session, or a
forgotten ``PREPARE TRANSACTION``) anywhere on the server holds back every reader of every
store until it ends. Set ``idle_in_transaction_session_timeout`` (and ``transaction_timeout``
on PostgreSQL 17+) on the server, and watch ``pg_stat_activity.backend_xid`` ages.

WARNING: positions come from transaction ids: a logical dump restored into another cluster
restarts them lower, so after a restore start readers from scratch or keep the old cluster's
id counter ahead (``pg_resetwal -x``). One transaction writes at most 2**20 events, and ids
must stay below 2**43 (eight trillion transactions).

Appends to one stream conflict on its ``(stream, revision)`` key: a writer whose insert loses
that race retries its whole transaction, which then sees the winner's events and applies the
expected-revision rule as usual. An append returns at its commit, without waiting for older
transactions. A read of the log through a store sees every append that store completed before
it (read your writes): each write transaction holds an advisory lock on its own id until it
ends, and a read waits on the locks of the transactions older than the store's last append
that are still in flight (re-reading the horizon every few ms while an older transaction that
is not an append runs). Another process sees an append once those older transactions end. An
append whose expectation is plainly met (an exact revision, ``NO_STREAM`` on a new stream) is
one statement in its own transaction, one round trip: the insert, only if the stream's last
revision is the one expected, and the lock on the transaction's id. Any other append (or one
that lost the race for its revision) takes two round trips (pipeline mode): ``BEGIN`` and the
stream's last revision; then the expected-revision rule, the insert and ``COMMIT``. A batch's
appends of an exact revision are, on its first try, inserts alone (binary one-row inserts
down the pipeline, no read): the ``(stream, revision)`` key and a guard on the expected
revision's row check them, and a batch whose check fails runs again reading its streams first
(:mod:`decider.stores.postgres._append`).

Schemas written by an older version (positions from an identity column under a schema-wide
advisory lock) are migrated on open: the identity is dropped, nothing is rewritten, old
positions stay valid and every new one is higher. Stop the processes of the old version first:
their appends would fail (they give no position).

Durability. ``synchronous_commit`` is PostgreSQL's setting, for this store's connections:

- ``"on"`` (default): a commit returns once its WAL is flushed to disk (and to synchronous
  standbys, if any); a committed append survives a crash of the server or the machine;
- ``"remote_apply"``, ``"remote_write"``, ``"local"``: the replication variants, as PostgreSQL
  defines them;
- ``"off"``: a commit returns before its WAL is flushed; a crash of the server may lose the last
  commits (by default up to about 0.6 s of them), but the database stays consistent.

WARNING: durability also depends on the server (``fsync`` must be on).

Plans. Every statement of the store walks an index in order or looks up keys, and its sessions
set ``enable_bitmapscan`` off: a read of the log (``position > $1 ... ORDER BY position LIMIT
n``) must walk the primary key from its position and stop at its limit. Where the planner
thinks few rows pass (a table not analyzed yet, such as a new schema's during its first burst,
or a filter it believes rare) it would rather collect every row after the position in a bitmap
and sort them for the first n: each page of a reader behind by B events then costs B rows, and
catching up costs B squared over n (measured: 36-83 ms a page of 500 against 0.4 ms, on 300,000
events never analyzed).

Subscriptions. After its commits a store sends a ``NOTIFY`` on its schema's channel, coalesced
and outside the appending transaction (:mod:`decider.stores.postgres._notify` says why); a
store's first subscription starts one thread that ``LISTEN``s and wakes the waiting
subscriptions (:mod:`decider.stores.postgres._listen`): other processes' appends arrive within a
round trip or two, and this store's own at once.

Threads and processes. Each thread has its own connection, kept for the thread's life (closed
when the thread ends or the store closes): a failed write transaction (a lost race, a conflict,
a lost lease) is rolled back on it, and only a connection that broke is replaced, logged with
its cause (:attr:`PostgresEventStore.connections_opened` counts them); each process opens its
own store. The schema and tables are created on open if
missing (or migrated), under an advisory lock, so two processes may open a new schema at once.

WARNING: open the store after forking, never before: a connection must not cross a fork.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from decider.stores._connections import ThreadConnections
from decider.stores._expectations import check_read_args, validate_append
from decider.stores.errors import StoreError, StoreNotFound
from decider.stores.leases import Lease, batch_checkpoints, batch_leases, check_ttl
from decider.stores.names import CHECKPOINT, POSTGRES, NameRules
from decider.stores.postgres import _leases as lease_rows
from decider.stores.postgres._append import (
    BatchRows,
    Contended,
    append_if_plain,
    append_one,
    check_size,
    check_written,
    one_row,
    read_ahead,
    read_first,
)
from decider.stores.postgres._connect import (
    DEFAULT_CONNECT_TIMEOUT,
    SYNCHRONOUS_COMMIT_LEVELS,
    connect_options,
    describe,
    roll_back,
    store_error,
)
from decider.stores.postgres._listen import NotifyListener
from decider.stores.postgres._notify import CommitAnnouncer
from decider.stores.postgres._snapshots import PostgresSnapshots
from decider.stores.postgres._sql import (
    INDEX_BITS,
    Read,
    Statements,
    create_partition_index,
    decode,
    partition_index_exists,
    read_all_sql,
)
from decider.stores.postgres._state import PostgresStates
from decider.stores.postgres._transactions import read_below_horizon, write_transaction
from decider.stores.protocol import (
    ALL,
    NO_STREAM,
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
from decider.stores.subscription import (
    CatchUpSubscription,
    Gist,
    LogNotifier,
    Written,
    written_by,
    written_to,
)

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "SYNCHRONOUS_COMMIT_LEVELS", "PostgresEventStore"]

_T = TypeVar("_T")
_Connection = psycopg.Connection[TupleRow]


class PostgresEventStore:
    """An event store in one schema of a PostgreSQL database, safe for threads and processes.

    Implements :class:`~decider.stores.protocol.EventStore`,
    :class:`~decider.stores.protocol.CheckpointStore`,
    :class:`~decider.stores.protocol.TransactionalStore`,
    :class:`~decider.stores.leases.LeaseStore` (a lease table, the server's clock),
    :class:`~decider.stores.protocol.SnapshotStore`,
    :class:`~decider.stores.protocol.IdLookupStore` and
    :class:`~decider.stores.protocol.StateStore`.
    Appends are atomic and run in parallel; readers never skip a late commit;
    ``synchronous_commit`` sets the durability of a commit (see the module docstring).
    ``conninfo`` is anything libpq accepts (``postgresql://user@host:5432/db?sslmode=require``
    or ``host=... dbname=...``). Opening connects, and creates the schema and its tables if
    missing; with ``create=False`` (a read-only command) it creates nothing and raises
    :class:`~decider.stores.errors.StoreNotFound` where the schema or its events table does
    not exist (a mistyped ``schema`` is then noticed, not answered with an empty store).
    """

    keeps_partition_keys: ClassVar[bool] = True
    """Each event's partition key is kept and filtered by
    (:class:`~decider.stores.protocol.KeyedStore`)."""

    name_rules: ClassVar[NameRules] = POSTGRES
    """The names this store holds (:mod:`decider.stores.names`); others raise
    :class:`~decider.stores.errors.InvalidName` before anything is written or read."""

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "public",
        synchronous_commit: str = "on",
        create: bool = True,
    ) -> None:
        level, params, self._connect_kwargs = connect_options(conninfo, schema, synchronous_commit)
        self._conninfo = conninfo
        self.schema = schema
        """The schema that holds this store's tables."""
        self.synchronous_commit = level
        """The ``synchronous_commit`` setting of this store's connections."""
        self._name = describe(params, schema)
        self._sql = Statements.for_schema(schema)
        self._snapshots = PostgresSnapshots(schema)
        self._states = PostgresStates(schema)
        self._session = (
            f"SET TIME ZONE 'UTC'; SET synchronous_commit TO {level};"
            " SET enable_bitmapscan TO off"  # the reads walk in order (see "Plans" above)
        )
        self._connections = ThreadConnections(
            self._connect,
            lambda: StoreError(f"the PostgreSQL event store {self._name} is closed"),
            reusable=_reusable,
        )
        self._notifier = LogNotifier()
        self._written = 0  # the id of this store's last write transaction (read your writes)
        self._written_lock = threading.Lock()
        self._contended = Contended(schema)
        """The streams other writers were found appending to at the same time (locked first)."""
        self._announcer = CommitAnnouncer(
            self._connect, self._sql.notify, name=f"decider-pg-notify-{schema}"
        )
        self._listener: NotifyListener | None = None
        self._listener_lock = threading.Lock()
        self._create = create
        self._indexed: dict[int, bool] = {}
        """Per partition count, whether its indexes are there (see :meth:`_read_sql`)."""
        self._indexed_lock = threading.Lock()
        try:
            with self._using() as connection:
                exists, old, keyless = one_row(connection.execute(self._sql.tables_exist))
                if not exists and not create:
                    self._check_found(connection)
                scripts = [self._sql.migrate] if old else [] if exists else [self._sql.create]
                if keyless:  # (a new schema's create has it: the script adds nothing then)
                    scripts.append(self._sql.add_partition_key)
                for script in scripts:
                    try:  # the script begins and commits its own transaction
                        connection.execute(script)
                    except BaseException:
                        roll_back(connection)
                        raise
        except BaseException:
            self.close()
            raise

    def _check_found(self, connection: _Connection) -> None:
        """:class:`StoreNotFound` unless the schema holds this store's events table (tables
        added by a later version are still created beside it)."""
        schema_found, events_found = one_row(
            connection.execute(self._sql.store_found, (self.schema,))
        )
        if not schema_found:
            missing = f"schema {self.schema!r} does not exist"
        elif not events_found:
            missing = f"schema {self.schema!r} holds no event store"
        else:
            return
        raise StoreNotFound(
            f"no PostgreSQL event store at {self._name}: {missing} (nothing was created)"
        )

    @property
    def name(self) -> str:
        """The database and schema, as a URI without a password (used in error messages)."""
        return self._name

    @property
    def connections_opened(self) -> int:
        """How many connections this store's threads have opened (one per thread for its life;
        more only where one broke): the LISTEN and NOTIFY threads' are not counted."""
        return self._connections.opened

    def __repr__(self) -> str:
        return f"PostgresEventStore({self._name!r})"

    def append(
        self, stream: str, events: Sequence[NewEvent], expected_revision: ExpectedRevision
    ) -> AppendResult:
        """Append ``events`` atomically if the stream is at ``expected_revision``.

        Raises :class:`~decider.stores.errors.WrongExpectedVersion`, writing nothing, on a mismatch;
        re-appending stored ids with the same expectation returns the stored result. The
        append is durable as ``synchronous_commit`` says once this returns.
        """
        validate_append(len(events), expected_revision)
        self.name_rules.check_append(stream, events)
        check_size(len(events))
        now = datetime.now(UTC)
        result = self._append_plain(stream, events, expected_revision, now)
        if result is None:
            result = self._write(
                lambda c, _: append_one(self._sql, c, stream, events, expected_revision, now),
                written_to(stream, events),
            )
        self._wrote(result.position)
        return result

    def _append_plain(
        self, stream: str, events: Sequence[NewEvent], expected: ExpectedRevision, now: datetime
    ) -> AppendResult | None:
        """The append as one statement (one round trip) when its expectation is plainly met;
        ``None`` when it is not, or a concurrent writer won the revision: nothing was written,
        and :meth:`_write`'s full path (idempotency, conflicts) decides."""
        with self._using() as connection:
            try:
                result = append_if_plain(self._sql, connection, stream, events, expected, now=now)
            except psycopg.errors.UniqueViolation:
                return None
        if result is not None:
            written = written_to(stream, events)
            self._notifier.notify(written)
            self._announcer.announce(Gist.of(written))
        return result

    def append_batch(
        self,
        appends: Sequence[StreamAppend],
        *,
        checkpoints: Sequence[tuple[str, int]] = (),
        leases: Sequence[Lease] = (),
    ) -> list[AppendResult]:
        """Apply every append and every checkpoint in one transaction: all of them, or none;
        with ``leases``, only while every one is still held (else
        :class:`~decider.stores.leases.LeaseLost` naming the first lost); the check holds the
        leases' rows against a takeover until the commit."""
        fences = batch_leases(leases)

        def fence(connection: _Connection) -> None:
            lease_rows.fence_all(self._sql.leases, connection, fences)

        return self._commit_batch(appends, batch_checkpoints(checkpoints), fence)

    def _commit_batch(
        self,
        appends: Sequence[StreamAppend],
        checkpoints: Sequence[tuple[str, int]],
        first: Callable[[_Connection], None],
    ) -> list[AppendResult]:
        """``first`` (a lease's fence, the state rows), every append and the checkpoint, in one
        write transaction; what :meth:`append_batch` and :meth:`commit_states` share."""
        for item in appends:
            validate_append(len(item.events), item.expected_revision)
            self.name_rules.check_append(item.stream, item.events)
        for name, _ in checkpoints:
            self.name_rules.check(CHECKPOINT, name)
        check_size(sum(len(item.events) for item in appends))
        now = datetime.now(UTC)
        tried: dict[str, int | None] = {}  # the last try's revisions read

        def body(connection: _Connection, first_try: bool) -> Callable[[], list[AppendResult]]:
            first(connection)
            # On the first try the appends of an exact revision are left to the store's
            # constraints (BatchRows, guarded); the others (and all of them on a later try) are
            # read ahead in one round trip for the whole batch. The batch also numbers the
            # events of the transaction, so two appends never draw the same position.
            batch = read_ahead(
                self._sql,
                connection,
                read_first(appends, first_try=first_try),
                self._contended,
            )
            if not first_try:  # a lost race: what moved on since the last try is contended
                self._contended.learn(tried, batch.lasts)
            tried.clear()
            tried.update(batch.lasts)
            results: list[Callable[[], AppendResult]] = []
            rows = BatchRows(self._sql, connection, batch, now)
            # In the order given: each append's events take the next indexes (positions).
            for a in appends:
                if a.stream not in batch.lasts:  # not read ahead: plain
                    after = -1 if a.expected_revision is NO_STREAM else a.expected_revision
                    assert isinstance(after, int)
                    results.append(rows.add(a.stream, a.events, after + 1, guarded=True))
                    continue
                # An idempotency check that reads sends the rows not sent yet first.
                decided = check_written(self._sql, connection, a, batch, rows.send)
                if isinstance(decided, AppendResult):
                    results.append(_stored(decided))
                else:
                    results.append(rows.add(a.stream, a.events, decided, guarded=False))
            rows.send()
            if checkpoints:
                connection.cursor().executemany(self._sql.save_checkpoint, checkpoints)
            return lambda: [result() for result in results]

        stored = self._write(body, written_by(appends))
        if stored:
            self._wrote(max(result.position for result in stored))
        return stored

    def claim_lease(self, partition: str, owner: str, ttl: float) -> Lease | None:
        """Take the lease on ``partition`` for ``ttl`` seconds of the server's clock (see
        :class:`~decider.stores.leases.LeaseStore`); ``None`` if another owner holds it."""
        check_ttl(ttl)
        with self._using() as connection:
            return lease_rows.claim(self._sql.leases, connection, partition, owner, ttl)

    def renew_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend ``lease`` by ``ttl`` seconds from now; ``LeaseLost`` if no longer held."""
        check_ttl(ttl)
        with self._using() as connection:
            return lease_rows.renew(self._sql.leases, connection, lease, ttl)

    def release_lease(self, lease: Lease) -> bool:
        """Free the partition at once; whether ``lease`` was still held."""
        with self._using() as connection:
            return lease_rows.release(self._sql.leases, connection, lease)

    def leases(self) -> list[Lease]:
        """Every partition's lease, ordered by partition."""
        with self._using() as connection:
            return lease_rows.all_leases(self._sql.leases, connection)

    def read_stream(
        self, stream: str, from_revision: int = 0, limit: int | None = None
    ) -> list[RecordedEvent]:
        """The stream's events from ``from_revision`` on; ``[]`` for a missing stream."""
        check_read_args(from_revision, limit)
        self.name_rules.check_stream(stream)
        rows = self._query(self._sql.read_stream, (stream, from_revision, limit))
        return [decode(row) for row in rows]

    def read_all(
        self,
        after_position: int | None = None,
        limit: int | None = None,
        filter: Filter = ALL,
    ) -> list[RecordedEvent]:
        """Events after ``after_position`` (exclusive) that pass ``filter``, in log order."""
        check_read_args(0, limit)
        read = self._read_sql(filter)
        after = 0 if after_position is None else after_position
        rows = self._read(read.statement, read.args(after, limit))
        return [decode(row) for row in rows]

    def subscribe(
        self, after_position: int | None = None, filter: Filter = ALL
    ) -> CatchUpSubscription:
        """A catch-up subscription after ``after_position``, woken by every append of any
        process (through LISTEN/NOTIFY; the first subscription starts the listening thread)."""
        self._check_open()
        self._start_listener()
        return CatchUpSubscription(
            read_page=lambda after, limit: self.read_all(after, limit, filter),
            head=self._head,
            head_and_page=lambda after, limit: self._head_and_page(after, limit, filter),
            notifier=self._notifier,
            after_position=after_position,
            filter=filter,
        )

    def load_checkpoint(self, name: str) -> int | None:
        """The last stored position of processor ``name``, or ``None``."""
        self.name_rules.check(CHECKPOINT, name)
        rows = self._query(self._sql.load_checkpoint, (name,))
        return int(rows[0][0]) if rows else None

    def save_checkpoint(self, name: str, position: int) -> None:
        """Store the position of processor ``name`` durably, replacing any earlier one."""
        self.name_rules.check(CHECKPOINT, name)
        self._query(self._sql.save_checkpoint, (name, position), fetch=False)

    def load_snapshot(self, stream: str) -> Snapshot | None:
        """The stored snapshot of ``stream``, or ``None``."""
        self.name_rules.check_stream(stream)
        return self._snapshots.load(self._using, stream)

    def stored_ids(self, stream: str, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Those of ``ids`` that ``stream`` holds, found through the (stream, event id) index."""
        self.name_rules.check_stream(stream)
        if not ids:
            return set()
        # Unprepared, as in an append: a long stream is read whole by a generic plan
        # (_sql.find_ids).
        rows = self._query(self._sql.find_ids, (stream, list(ids)), prepare=False)
        return {row[0] for row in rows}

    def save_snapshot(self, stream: str, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` unless the stored one is of its state version and later."""
        self.name_rules.check_stream(stream)
        self._snapshots.save(self._using, stream, snapshot)

    def load_state(self, key: str) -> StoredState | None:
        """The stored state of ``key``, or ``None``."""
        return self._states.load(self._using, key)

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
        self._states.ensure(self._using)
        fences = batch_leases(leases)

        def first(connection: _Connection) -> None:
            lease_rows.fence_all(self._sql.leases, connection, fences)
            self._states.write(connection, writes)

        self._commit_batch(appends, batch_checkpoints(checkpoints), first)

    def close(self) -> None:
        """Close every connection, stop the listening thread and end every subscription; safe
        to call twice."""
        # Subscriptions learn of the close before their reads start failing.
        self._notifier.close()
        self._connections.close()
        self._announcer.close(timeout=DEFAULT_CONNECT_TIMEOUT + 5.0)
        with self._listener_lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop(timeout=DEFAULT_CONNECT_TIMEOUT + 5.0)

    def _read_sql(self, filter: Filter) -> Read:
        """The read_all statement of ``filter``: for partitions, from their indexes where
        they are there (created on the first such read of each partition count unless this
        store was opened with ``create=False``; see :func:`create_partition_index`)."""
        partitions = filter.partitions
        if partitions is None or not (partitions.held or partitions.unknown):
            return read_all_sql(self.schema, filter)
        indexed = self._indexed.get(partitions.count)
        if indexed is None:
            indexed = self._index_partitions(partitions.count)
        return read_all_sql(self.schema, filter, indexed)

    def _index_partitions(self, count: int) -> bool:
        """Whether the indexes of ``count`` partitions are there, once created if missing."""
        with self._indexed_lock:
            indexed = self._indexed.get(count)
            if indexed is not None:
                return indexed
            with self._using() as connection:
                [(indexed,)] = connection.execute(
                    partition_index_exists(self.schema, count)
                ).fetchall()
                if not indexed and self._create:
                    try:  # the script begins and commits its own transaction
                        connection.execute(create_partition_index(self.schema, count))
                    except BaseException:
                        roll_back(connection)
                        raise
                    indexed = True
            self._indexed[count] = bool(indexed)
            return bool(indexed)

    def _head(self) -> int | None:
        [(head,)] = self._read(self._sql.head, ())
        return None if head is None else int(head)

    def _check_open(self) -> None:
        self._connections.check_open()

    def _query(
        self,
        statement: str,
        params: tuple[object, ...],
        *,
        fetch: bool = True,
        prepare: bool | None = None,
    ) -> list[Any]:
        """Run one statement in autocommit mode (its own transaction); its rows. ``prepare``:
        as psycopg's (``False``: planned for its parameters every time)."""
        with self._using() as connection:
            cursor = connection.execute(statement, params, prepare=prepare)
            return cursor.fetchall() if fetch else []

    def _write(
        self,
        body: Callable[[_Connection, bool], Callable[[], _T]],
        written: Written,
    ) -> _T:
        """Run ``body`` in a write transaction, then wake the subscriptions that read what it
        ``written`` (in the other processes too: those that may want one of its events);
        ``body`` returns how to read its result once the transaction ends.

        A transaction that loses a race for a stream's next revision (the ``(stream,
        revision)`` key) is rolled back and run again: its reads then see the winner's events,
        and the expected-revision rule decides. The statements go in pipeline mode: ``BEGIN``
        and the first read share one round trip, and the inserts and the ``COMMIT`` another.
        """
        result = write_transaction(self._using, self._connections, body, self._name)
        if written:
            self._notifier.notify(written)
            self._announcer.announce(Gist.of(written))
        return result

    def _wrote(self, position: int) -> None:
        """Note that this store wrote (or found stored) ``position``: its reads must see it."""
        xid = position >> INDEX_BITS
        with self._written_lock:
            self._written = max(self._written, xid)

    def _read(self, statement: str, params: tuple[object, ...]) -> list[Any]:
        """Run one read of the log (below the horizon); it sees every append this store
        completed before it began (read your writes).

        Once this store has written, the read first waits on the locks of the write
        transactions older than its last one that are still in flight, and checks the horizon
        has passed that one; while a transaction that holds no such lock (not an append) keeps
        it back, it looks again after a short, growing delay. All in one round trip when
        nothing is in flight.
        """
        written = self._written
        if not written:
            return self._query(statement, params)
        [rows] = read_below_horizon(self._using, self._sql, written, [(statement, params)])
        return rows

    def _head_and_page(
        self, after_position: int | None, limit: int, filter: Filter
    ) -> tuple[int | None, list[RecordedEvent]]:
        """A subscription's look at the log: the head, then a page after ``after_position``
        read after it, in one round trip (as :meth:`_read`)."""
        read = self._read_sql(filter)
        after = 0 if after_position is None else after_position
        reads = [(read.statement, read.args(after, limit))]
        [(head,)], rows = read_below_horizon(
            self._using, self._sql, self._written, reads, head=True
        )
        return (None if head is None else int(head)), [decode(row) for row in rows]

    @contextlib.contextmanager
    def _using(self) -> Iterator[_Connection]:
        """This thread's connection, held against close(), with psycopg's errors mapped.

        A connection that broke (a server restart, a killed backend) is dropped, so the next
        call connects afresh.
        """
        connection, in_use = self._connection()
        with in_use:
            self._check_open()
            try:
                yield connection
            except psycopg.Error as exc:
                if connection.closed:
                    self._drop(connection, in_use)
                raise store_error(self._name, exc) from exc

    def _connect(self) -> _Connection:
        """A new autocommit connection with the store's session settings (psycopg's errors)."""
        connection = psycopg.connect(self._conninfo, **self._connect_kwargs)
        try:
            connection.execute(self._session)
        except BaseException:
            connection.close()
            raise
        return connection

    def _connection(self) -> tuple[_Connection, threading.RLock]:
        """This thread's connection and the lock that keeps close() from closing it in use."""
        try:
            return self._connections.get()
        except psycopg.Error as exc:
            raise store_error(self._name, exc) from exc

    def _drop(self, connection: _Connection, in_use: threading.RLock) -> None:
        """Forget this thread's broken connection."""
        self._connections.drop((connection, in_use))

    def _start_listener(self) -> None:
        """Start the LISTEN thread once; it listens before this returns."""
        with self._listener_lock:
            if self._listener is not None:
                return
            self._check_open()
            listener = NotifyListener(
                self._connect,
                self._sql.channel,
                self._notifier,
                name=f"decider-pg-listen-{self.schema}",
                held_back=self._sql.held_back,
                own_pid=lambda: self._announcer.backend_pid,
            )
            try:
                listener.start()
            except psycopg.Error as exc:
                listener.stop(timeout=0)
                raise store_error(self._name, exc) from exc
            self._listener = listener


def _reusable(connection: _Connection) -> bool:
    """Whether an ended thread's connection may serve the next thread: open, and in no
    transaction (an idle session, as every statement of this store leaves it)."""
    return not connection.closed and connection.info.transaction_status == TransactionStatus.IDLE


def _stored(result: AppendResult) -> Callable[[], AppendResult]:
    """The result reader of an append found already stored."""
    return lambda: result
