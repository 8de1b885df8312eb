"""The PostgreSQL event store: psycopg 3, several threads and processes on one database.

Ordering. A position comes from an identity column, and a plain sequence hands out numbers in
the order transactions *ask*, not the order they *commit*: a reader could see position 11
committed while 10 is still in flight, move its cursor past 11, and never see 10. So every write
transaction first takes a transaction-level advisory lock (``pg_advisory_xact_lock``, keyed by
the schema) and draws its positions inside it. PostgreSQL releases the lock only after the
commit is visible, so positions strictly increase in commit order and a reader never sees a gap
that is filled later. Gaps do exist (a rolled-back append burns its positions), which the
protocol allows.

The cost: appends to one schema are serialised, across every process, for the length of their
transaction (a few statements and the commit's WAL flush; no client think time happens inside
it). Reads never take the lock. With ``synchronous_commit=on`` the flush dominates, and
PostgreSQL's group commit cannot batch flushes of appends that wait for each other, so one
schema takes about one append per WAL flush, however many writers there are. An append is five
statements in two round trips (pipeline mode): ``BEGIN``, the lock and the stream's last
revision; then the insert (with its ``NOTIFY``) and ``COMMIT``. Use a schema per independent
log if that rate is too low.

Durability. ``synchronous_commit`` is PostgreSQL's setting, for this store's connections:

- ``"on"`` (default): a commit returns once its WAL is flushed to disk (and to synchronous
  standbys, if any); a committed append survives a crash of the server or the machine;
- ``"remote_apply"``, ``"remote_write"``, ``"local"``: the replication variants, as PostgreSQL
  defines them;
- ``"off"``: a commit returns before its WAL is flushed; a crash of the server may lose the last
  commits (by default up to about 0.6 s of them), but the database stays consistent.

WARNING: durability also depends on the server (``fsync`` must be on).

Subscriptions. Every append sends a ``NOTIFY`` on its schema's channel (delivered at commit);
a store's first subscription starts one thread that ``LISTEN``s and wakes the waiting
subscriptions (:mod:`decider.stores._postgres_listen`): other processes' appends arrive within a
round
trip, with no polling, and this store's own at once.

Threads and processes. Each thread has its own connection (closed when the thread ends or the
store closes); each process opens its own store. The schema and tables are created on open if
missing, under the same advisory lock, so two processes may open a new schema at once.

WARNING: open the store after forking, never before: a connection must not cross a fork.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

import psycopg
from psycopg import conninfo as pgconninfo
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from decider.stores._connections import ThreadConnections
from decider.stores._expectations import check_read_args, validate_append
from decider.stores._postgres_append import append_one, one_row, read_ahead
from decider.stores._postgres_listen import NotifyListener
from decider.stores._postgres_snapshots import PostgresSnapshots
from decider.stores._postgres_sql import Statements, decode, read_all_sql
from decider.stores._postgres_state import PostgresStates
from decider.stores.errors import PermanentStoreError, StoreError, StoreUnavailable
from decider.stores.names import CHECKPOINT, POSTGRES, NameRules
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
from decider.stores.subscription import CatchUpSubscription, LogNotifier

_T = TypeVar("_T")
_Connection = psycopg.Connection[TupleRow]

SYNCHRONOUS_COMMIT_LEVELS = ("on", "off", "local", "remote_write", "remote_apply")
"""The accepted values of ``synchronous_commit`` (PostgreSQL's setting of that name)."""

DEFAULT_CONNECT_TIMEOUT = 10
"""Seconds a connection attempt may take when the conninfo does not say (``connect_timeout``)."""

_MAX_SCHEMA_BYTES = 63  # PostgreSQL's identifier limit (NAMEDATALEN - 1)
# Pipeline mode needs libpq 14+ (psycopg[binary] bundles one); without it the same statements
# go one round trip each.
_PIPELINE = psycopg.Pipeline.is_supported()


class PostgresEventStore:
    """An event store in one schema of a PostgreSQL database, safe for threads and processes.

    Implements :class:`~decider.stores.protocol.EventStore`,
    :class:`~decider.stores.protocol.CheckpointStore`
    and :class:`~decider.stores.protocol.TransactionalStore`. Appends are atomic and serialised by
    an
    advisory lock; positions strictly increase in commit order; ``synchronous_commit`` sets the
    durability of a commit (see the module docstring). ``conninfo`` is anything libpq accepts
    (``postgresql://user@host:5432/db?sslmode=require`` or ``host=... dbname=...``). Opening
    connects, and creates the schema and its tables if missing.
    """

    name_rules: ClassVar[NameRules] = POSTGRES
    """The names this store holds (:mod:`decider.stores.names`); others raise
    :class:`~decider.stores.errors.InvalidName` before anything is written or read."""

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "public",
        synchronous_commit: str = "on",
    ) -> None:
        level = synchronous_commit.lower()
        if level not in SYNCHRONOUS_COMMIT_LEVELS:
            raise ValueError(
                f"synchronous_commit must be one of {', '.join(SYNCHRONOUS_COMMIT_LEVELS)},"
                f" got {synchronous_commit!r}"
            )
        if not schema or len(schema.encode()) > _MAX_SCHEMA_BYTES or "\x00" in schema:
            raise ValueError(f"schema must be a name of 1 to 63 bytes, got {schema!r}")
        try:
            params = pgconninfo.conninfo_to_dict(conninfo)
        except psycopg.Error as exc:
            reason = " ".join(str(exc).split())
            raise ValueError(f"malformed PostgreSQL conninfo: {reason}") from None
        ports = str(params.get("port") or "").split(",")
        if not all(p.strip().isdigit() for p in ports if p.strip()):
            raise ValueError(f"port must be a number, got {params['port']!r}")
        self._conninfo = conninfo
        self._connect_kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params:
            self._connect_kwargs["connect_timeout"] = DEFAULT_CONNECT_TIMEOUT
        if "application_name" not in params:
            self._connect_kwargs["application_name"] = "decider"
        self.schema = schema
        """The schema that holds this store's tables."""
        self.synchronous_commit = level
        """The ``synchronous_commit`` setting of this store's connections."""
        self._name = _describe(params, schema)
        self._sql = Statements.for_schema(schema)
        self._snapshots = PostgresSnapshots(schema)
        self._states = PostgresStates(schema)
        self._session = f"SET TIME ZONE 'UTC'; SET synchronous_commit TO {level}"
        self._connections = ThreadConnections(
            self._connect, lambda: StoreError(f"the PostgreSQL event store {self._name} is closed")
        )
        self._notifier = LogNotifier()
        self._listener: NotifyListener | None = None
        self._listener_lock = threading.Lock()
        try:
            with self._using() as connection:
                (exists,) = one_row(connection.execute(self._sql.tables_exist))
                if not exists:
                    try:  # the script begins and commits its own transaction
                        connection.execute(self._sql.create)
                    except BaseException:
                        _roll_back(connection)
                        raise
        except BaseException:
            self.close()
            raise

    @property
    def name(self) -> str:
        """The database and schema, as a URI without a password (used in error messages)."""
        return self._name

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
        now = datetime.now(UTC)
        return self._write(
            lambda c: append_one(self._sql, c, stream, events, expected_revision, now)
        )

    def append_batch(
        self,
        appends: Sequence[StreamAppend],
        checkpoint: tuple[str, int] | None = None,
    ) -> list[AppendResult]:
        """Apply every append and the checkpoint in one transaction: all of them, or none."""
        for item in appends:
            validate_append(len(item.events), item.expected_revision)
            self.name_rules.check_append(item.stream, item.events)
        if checkpoint is not None:
            self.name_rules.check(CHECKPOINT, checkpoint[0])
        now = datetime.now(UTC)

        def body(connection: _Connection) -> Callable[[], list[AppendResult]]:
            batch = read_ahead(self._sql, connection, appends)
            results = [
                append_one(
                    self._sql, connection, a.stream, a.events, a.expected_revision, now, batch=batch
                )
                for a in appends
            ]
            if checkpoint is not None:
                connection.execute(self._sql.save_checkpoint, checkpoint)
            return lambda: [result() for result in results]

        return self._write(body)

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
        statement, params = read_all_sql(self.schema, filter)
        after = 0 if after_position is None else after_position
        rows = self._query(statement, (after, *params, limit))
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
            notifier=self._notifier,
            after_position=after_position,
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
        checkpoint: tuple[str, int] | None = None,
    ) -> None:
        """Write every state (version-checked), append and the checkpoint in one transaction."""
        for item in appends:
            validate_append(len(item.events), item.expected_revision)
            self.name_rules.check_append(item.stream, item.events)
        self._states.ensure(self._using)
        now = datetime.now(UTC)

        def body(connection: _Connection) -> Callable[[], list[AppendResult]]:
            self._states.write(connection, writes)
            results = [
                append_one(self._sql, connection, a.stream, a.events, a.expected_revision, now)
                for a in appends
            ]
            if checkpoint is not None:
                connection.execute(self._sql.save_checkpoint, checkpoint)
            return lambda: [result() for result in results]

        self._write(body)

    def close(self) -> None:
        """Close every connection, stop the listening thread and end every subscription; safe
        to call twice."""
        # Subscriptions learn of the close before their reads start failing.
        self._notifier.close()
        self._connections.close()
        with self._listener_lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop(timeout=DEFAULT_CONNECT_TIMEOUT + 5.0)

    def _head(self) -> int | None:
        [(head,)] = self._query(self._sql.head, ())
        return None if head is None else int(head)

    def _check_open(self) -> None:
        self._connections.check_open()

    def _query(
        self, statement: str, params: tuple[object, ...], *, fetch: bool = True
    ) -> list[Any]:
        """Run one statement in autocommit mode (its own transaction); its rows."""
        with self._using() as connection:
            cursor = connection.execute(statement, params)
            return cursor.fetchall() if fetch else []

    def _write(self, body: Callable[[_Connection], Callable[[], _T]]) -> _T:
        """Run ``body`` in a write transaction that holds the schema's append lock, then wake
        the subscriptions; ``body`` returns how to read its result once the transaction ends.

        The lock is taken before ``body`` reads anything, so the revision it reads still holds
        when it inserts, and its positions follow every earlier commit (module docstring). The
        statements go in pipeline mode: ``BEGIN``, the lock and the first read share one round
        trip, and the inserts and the ``COMMIT`` another (one round trip each with a libpq
        older than 14).
        """
        with self._using() as connection:
            try:
                with connection.pipeline() if _PIPELINE else contextlib.nullcontext():
                    connection.execute("BEGIN")
                    connection.execute(self._sql.lock)
                    finish = body(connection)
                    connection.execute("COMMIT")
            except BaseException:
                _roll_back(connection)
                raise
            result = finish()
        self._notifier.notify()
        return result

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
                raise _store_error(self._name, exc) from exc

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
            raise _store_error(self._name, exc) from exc

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
            )
            try:
                listener.start()
            except psycopg.Error as exc:
                listener.stop(timeout=0)
                raise _store_error(self._name, exc) from exc
            self._listener = listener


def _roll_back(connection: _Connection) -> None:
    """End a failed transaction, if one is open (a broken connection has none to end)."""
    if not connection.closed and connection.info.transaction_status in (
        TransactionStatus.INTRANS,
        TransactionStatus.INERROR,
    ):
        with contextlib.suppress(psycopg.Error):
            connection.execute("ROLLBACK")


def _store_error(name: str, exc: psycopg.Error) -> StoreError:
    """The one place where psycopg's errors become the store's.

    Data the server can never take (a NUL in text, an index row over the size limit, a value
    out of range) is a :class:`PermanentStoreError`; failures to connect, lost connections,
    timeouts, cancellations, deadlocks and serialisation failures may pass:
    :class:`StoreUnavailable`; anything else is a :class:`StoreError`. All name the database
    without its password.
    """
    # libpq spreads a message over lines (a hint on the next one): keep errors to one line.
    reason = " ".join(str(exc).split()) or type(exc).__name__
    # ProgramLimitExceeded (an index row too big) is an OperationalError: test it first.
    if isinstance(exc, psycopg.DataError | psycopg.errors.ProgramLimitExceeded):
        return PermanentStoreError(f"PostgreSQL {name} cannot store this: {reason}")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return StoreUnavailable(f"PostgreSQL {name} is unavailable: {reason}")
    return StoreError(f"PostgreSQL {name}: {reason}")


def _describe(params: Mapping[str, Any], schema: str) -> str:
    """``postgresql://user@host:port/dbname?schema=...``, from the parts given (no password)."""
    user = params.get("user")
    host = params.get("host") or params.get("hostaddr") or ""
    port = params.get("port")
    dbname = params.get("dbname") or ""
    where = (f"{user}@" if user else "") + host + (f":{port}" if port else "")
    suffix = "" if schema == "public" else f"?schema={schema}"
    return f"postgresql://{where}/{dbname}{suffix}"
