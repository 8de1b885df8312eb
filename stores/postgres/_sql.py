"""The PostgreSQL store's schema, statements, filter translation and row decoding.

Every statement names its tables with the store's schema (quoted), so a store never depends on
the connection's ``search_path``. :class:`Statements` builds them once per store.

Positions (see :mod:`decider.stores.postgres.store`, "Ordering"): an event's position is its
transaction's id shifted left by :data:`INDEX_BITS`, plus the event's index within that
transaction; readers read below :data:`HORIZON`, the first position any transaction still in
flight could write.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
import zlib
from datetime import UTC, datetime

import attrs
from psycopg import sql as pgsql

from decider.stores.postgres._leases import LeaseStatements
from decider.stores.postgres._leases import table as lease_table
from decider.stores.protocol import Filter, Partitions, RecordedEvent

LOCK_CLASS = 0x6465_6369  # "deci": the first key of the store's advisory locks
"""The first key of the advisory lock that serialises creating or migrating a schema; the second
is the schema's CRC-32. Appends take no lock."""

INDEX_BITS = 20
"""The low bits of a position: the event's index within its transaction (up to 2**20 events)."""

MAX_EVENTS_PER_TRANSACTION = 1 << INDEX_BITS
"""The most events one append or append_batch may write (the index must fit its bits)."""

_XID = "pg_current_xact_id()::text::bigint"
POSITION = f"({_XID} << {INDEX_BITS})"
"""The first position of the current transaction (assigns it an id if it has none)."""

HORIZON = f"(pg_snapshot_xmin(pg_current_snapshot())::text::bigint << {INDEX_BITS})"
"""The first position a transaction still in flight may hold: every row below it is committed
(or rolled back) for good, so a reader that reads only below it never skips a late commit."""

COLUMNS = "position, stream, revision, event_id, type, data, metadata, recorded_at, partition_key"

Row = tuple[int, str, int, uuid.UUID, str, bytes, bytes, datetime, int | None]


WAIT_CLASS = 0x6465_6378  # "decx": the first key of the locks write transactions hold
"""The first key of the advisory lock each write transaction holds on its own id (the second
key is the id's low 32 bits), for committed appends to wait on."""


STREAM_CLASS = 0x6465_6373  # "decs": the first key of the locks on contended streams
"""The first key of the advisory lock a write transaction takes on a stream that other writers
were found appending to at the same time (:func:`stream_lock_key`), before reading its last
revision: they then take turns instead of racing for its next revision."""


def stream_lock_key(schema: str, stream: str) -> int:
    """The second advisory-lock key of ``stream`` of ``schema``: a CRC-32 as a signed 32-bit
    int. Two streams whose keys collide only share a lock (their appends take turns)."""
    key = zlib.crc32(f"{schema}\0{stream}".encode())
    return key - (1 << 32) if key >= 1 << 31 else key


def _lock_key_sql(xid: str) -> str:
    """The second key of transaction ``xid``'s lock (its low 32 bits as a signed int)."""
    return f"(mod({xid}, 4294967296) - 2147483648)::int4"


# The lock a write transaction holds on its own id until it ends (position >> INDEX_BITS).
_LOCK_OWN = f"pg_advisory_xact_lock({WAIT_CLASS}, {_lock_key_sql(f'(position >> {INDEX_BITS})')})"


def lock_key(schema: str) -> int:
    """The second advisory-lock key of ``schema``: its CRC-32 as a signed 32-bit int.

    Two schemas whose keys collide only share a lock (they serialise each other's creation);
    correctness does not depend on the keys being distinct.
    """
    key = zlib.crc32(schema.encode())
    return key - (1 << 32) if key >= 1 << 31 else key


def channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel of ``schema``'s log (a hash: channel names are limited to 63
    bytes, schema names may use all of them)."""
    return "decider_log_" + hashlib.sha256(schema.encode()).hexdigest()[:20]


@attrs.frozen
class Statements:
    """Every statement of one store, with its schema's tables."""

    schema: str
    tables_exist: str
    store_found: str
    create: str
    migrate: str
    add_partition_key: str
    last_revision: str
    last_revisions: str
    lock_streams: str
    insert_one: str
    insert_many: str
    own_xid: str
    insert_row: str
    insert_after: str
    append_one_if: str
    append_if: str
    range: str
    find_ids: str
    find_many: str
    read_stream: str
    head: str
    held_back: str
    notify: str
    wait_older: str
    wait_older_head: str
    load_checkpoint: str
    save_checkpoint: str
    channel: str
    leases: LeaseStatements

    @classmethod
    def for_schema(cls, schema: str) -> Statements:
        """The statements of the store in ``schema``."""
        s = pgsql.Identifier(schema).as_string(None)
        events, checkpoints, leases = f"{s}.events", f"{s}.checkpoints", f"{s}.leases"
        lock = f"pg_advisory_xact_lock({LOCK_CLASS}, {lock_key(schema)})"
        # Run as one simple-protocol script: a failure aborts the rest, and the caller rolls
        # back. The lock keeps two processes that open the store at once from racing on the
        # catalogue (CREATE ... IF NOT EXISTS is not safe against a concurrent CREATE).
        create = f"""
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT {lock};
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {events} (
    -- (transaction id << INDEX_BITS) + index in the transaction: see decider.stores.postgres.store.
    position    bigint      PRIMARY KEY,
    stream      text        NOT NULL,
    revision    bigint      NOT NULL,
    event_id    uuid        NOT NULL,
    type        text        NOT NULL,
    data        bytea       NOT NULL,
    metadata    bytea       NOT NULL,
    recorded_at timestamptz NOT NULL,
    partition_key bigint,  -- NewEvent.partition_key (0 .. 2**32 - 1); NULL: unknown
    UNIQUE (stream, revision)  -- the revision check's index, and a last line of defence
);
-- Finds a stream's stored ids for the idempotency check of ANY / EXISTS appends.
CREATE INDEX IF NOT EXISTS events_by_stream_id ON {events} (stream, event_id);
-- A read of some of an app's partitions walks only their rows (see create_partition_index).
{_partition_indexes(events, DEFAULT_PARTITIONS)}
CREATE TABLE IF NOT EXISTS {checkpoints} (
    name     text   PRIMARY KEY,
    position bigint NOT NULL
);
{lease_table(leases)}
COMMIT;
"""
        # A schema written by a version that drew positions from an identity column under a
        # schema-wide lock: drop the identity (positions now come from transaction ids, all
        # above the old ones; checked first) and add the indexes this version reads with.
        migrate = f"""
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT {lock};
DO $migrate$
BEGIN
    IF (SELECT coalesce(max(position), 0) FROM {events}) >= {POSITION} THEN
        RAISE EXCEPTION 'cannot migrate {events}: its positions reach the new ones';
    END IF;
END
$migrate$;
ALTER TABLE {events} ALTER COLUMN position DROP IDENTITY IF EXISTS;
{lease_table(leases)}
COMMIT;
"""
        # A schema written before partition keys existed: add the column (no rewrite: a
        # nullable column without a default; every old row's key is unknown, NULL).
        add_partition_key = f"""
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT {lock};
ALTER TABLE {events} ADD COLUMN IF NOT EXISTS partition_key bigint;
COMMIT;
"""
        return cls(
            schema=schema,
            # (tables exist, the events table is of the old kind that needs migrate, it has
            # no partition_key column yet)
            tables_exist=(
                f"SELECT to_regclass({_literal(events)}) IS NOT NULL"
                f" AND to_regclass({_literal(checkpoints)}) IS NOT NULL"
                f" AND to_regclass({_literal(leases)}) IS NOT NULL,"
                " EXISTS (SELECT FROM pg_attribute WHERE"
                f" attrelid = to_regclass({_literal(events)}) AND attname = 'position'"
                " AND attidentity <> ''),"
                " NOT EXISTS (SELECT FROM pg_attribute WHERE"
                f" attrelid = to_regclass({_literal(events)}) AND attname = 'partition_key'"
                " AND NOT attisdropped)"
            ),
            # (the schema exists, its events table exists); the schema's name is a parameter
            store_found=(
                "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = %s),"
                f" to_regclass({_literal(events)}) IS NOT NULL"
            ),
            create=create,
            migrate=migrate,
            add_partition_key=add_partition_key,
            last_revision=(
                f"SELECT revision FROM {events} WHERE stream = %s ORDER BY revision DESC LIMIT 1"
            ),
            # A batch's streams in one round trip, each by a backward scan of its index.
            last_revisions=(
                "SELECT s.stream, (SELECT e.revision FROM"
                f" {events} AS e WHERE e.stream = s.stream ORDER BY e.revision DESC LIMIT 1)"
                " FROM unnest(%s::text[]) AS s (stream)"
            ),
            # The keys in the order given (ascending: two transactions never wait on each other).
            lock_streams=(
                f"SELECT count(pg_advisory_xact_lock({STREAM_CLASS}, k))"
                " FROM unnest(%s::int4[]) AS k"
            ),
            # Parameters: the event's index in the transaction, then the row.
            # Each insert also takes the lock of its transaction's id (see wait_older).
            insert_one=(
                f"WITH written AS (INSERT INTO {events}"
                " (position, stream, revision, event_id, type, data, metadata, recorded_at,"
                " partition_key)"
                f" VALUES ({POSITION} + %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING position)"
                f" SELECT position, {_LOCK_OWN} FROM written"
            ),
            # The transaction's id (assigning it one) and the lock on it (see wait_older), for
            # the rows of insert_row and insert_after.
            own_xid=(
                f"SELECT x, pg_advisory_xact_lock({WAIT_CLASS}, {_lock_key_sql('x')})"
                f" FROM (SELECT {_XID} AS x) AS t"
            ),
            # One row, binary parameters: its index in the transaction, then the row.
            insert_row=(
                f"INSERT INTO {events}"
                " (position, stream, revision, event_id, type, data, metadata, recorded_at,"
                " partition_key)"
                f" VALUES ({POSITION} + %b, %b, %b, %b, %b, %b, %b, %b, %b)"
            ),
            # One row after revision e of its stream, which must be stored: its revision is
            # drawn from e's row, NULL (refused) if there is none. Parameters: the index, the
            # stream, the stream and e again, then the row from its id on.
            insert_after=(
                f"INSERT INTO {events}"
                " (position, stream, revision, event_id, type, data, metadata, recorded_at,"
                " partition_key)"
                f" VALUES ({POSITION} + %b, %b, (SELECT p.revision + 1 FROM {events} AS p"
                " WHERE p.stream = %b AND p.revision = %b), %b, %b, %b, %b, %b, %b)"
            ),
            # Several rows go in as arrays (one statement, whatever the count) and get their
            # positions in the order given. Dumping the arrays costs more than a plain VALUES,
            # so a one-event append (the common case) uses insert_one.
            # Parameters: the first event's index in the transaction, stream, time, arrays.
            insert_many=(
                f"WITH written AS (INSERT INTO {events}"
                " (position, stream, revision, event_id, type, data, metadata, recorded_at,"
                " partition_key)"
                f" SELECT {POSITION} + %s + e.n - 1, %s, e.revision, e.event_id, e.type,"
                " e.data, e.metadata, %s, e.partition_key"
                " FROM unnest(%s::bigint[], %s::uuid[], %s::text[], %s::bytea[], %s::bytea[],"
                " %s::bigint[])"
                " WITH ORDINALITY AS e (revision, event_id, type, data, metadata, partition_key, n)"
                " RETURNING position)"
                f" SELECT position, {_LOCK_OWN} FROM (SELECT max(position) AS position"
                " FROM written) AS w"
            ),
            # A whole append in one statement (its own transaction, one round trip): the rows
            # go in only if the stream's last revision is the one expected (-1: no stream);
            # no row back means "not plainly met", and the caller takes the full path.
            # Parameters: stream, time, the arrays as for insert_many, then the stream and
            # the expected last revision again.
            # The same for one event: parameters the row as for insert_one (no index), then the
            # stream and the expected last revision.
            append_one_if=(
                f"WITH written AS (INSERT INTO {events}"
                " (position, stream, revision, event_id, type, data, metadata, recorded_at,"
                " partition_key)"
                f" SELECT {POSITION}, %s, %s, %s, %s, %s, %s, %s, %s"
                f" WHERE coalesce((SELECT revision FROM {events} WHERE stream = %s"
                " ORDER BY revision DESC LIMIT 1), -1) = %s"
                " RETURNING position)"
                f" SELECT position, {_LOCK_OWN} FROM written"
            ),
            append_if=(
                f"WITH written AS (INSERT INTO {events}"
                " (position, stream, revision, event_id, type, data, metadata, recorded_at,"
                " partition_key)"
                f" SELECT {POSITION} + e.n - 1, %s, e.revision, e.event_id, e.type,"
                " e.data, e.metadata, %s, e.partition_key"
                " FROM unnest(%s::bigint[], %s::uuid[], %s::text[], %s::bytea[], %s::bytea[],"
                " %s::bigint[])"
                " WITH ORDINALITY AS e (revision, event_id, type, data, metadata, partition_key, n)"
                f" WHERE coalesce((SELECT revision FROM {events} WHERE stream = %s"
                " ORDER BY revision DESC LIMIT 1), -1) = %s"
                " RETURNING position)"
                f" SELECT position, {_LOCK_OWN} FROM (SELECT max(position) AS position"
                " FROM written) AS w WHERE position IS NOT NULL"
            ),
            notify=f"SELECT pg_notify({_literal(channel(schema))}, %s)",
            # Waits for the appends (of any store) older than transaction %s still in flight;
            # (how many, the oldest transaction in flight when the statement began). The
            # second says whether the horizon had passed %s before any wait (see
            # read_below_horizon).
            wait_older=_wait_older(),
            # The same, then the head (as ``head``, in the same snapshot).
            wait_older_head=_wait_older(
                f", (SELECT max(position) FROM {events} WHERE position < {HORIZON})"
            ),
            range=(
                f"SELECT event_id, revision, position FROM {events}"
                " WHERE stream = %s AND revision >= %s ORDER BY revision LIMIT %s"
            ),
            # Run unprepared: a generic plan estimates any stream as short (rows / streams) and
            # scans the stream's rows by the (stream, revision) index, filtering the ids: on a
            # long shared stream (the traffic fines' ``fines``) that read grew with the log, at
            # 600 blocks a call for N=30,000. A custom plan knows the stream is long and probes
            # the (stream, event_id) index per id. Callers key the rows by id: no ORDER BY.
            find_ids=(
                f"SELECT event_id, revision, position FROM {events}"
                " WHERE stream = %s AND event_id = ANY(%s::uuid[])"
            ),
            # Several streams' ids at once: (stream, id) pairs as two parallel arrays, each
            # probed in the (stream, event_id) index for its latest revision. The LIMIT keeps
            # the probe a correlated subquery: a plain join (or a LATERAL the planner flattens
            # into one) is planned while the table is small as a hash join over a full scan,
            # and a prepared statement keeps that plan as the table grows.
            find_many=(
                "SELECT p.stream, p.event_id, e.revision, e.position"
                " FROM unnest(%s::text[], %s::uuid[]) AS p (stream, event_id)"
                " CROSS JOIN LATERAL (SELECT x.revision, x.position FROM"
                f" {events} AS x WHERE x.stream = p.stream AND x.event_id = p.event_id"
                " ORDER BY x.revision DESC LIMIT 1) AS e"
            ),
            read_stream=(
                f"SELECT {COLUMNS} FROM {events}"
                " WHERE stream = %s AND revision >= %s ORDER BY revision LIMIT %s"
            ),
            # The last readable position: a backward walk of the primary key from the horizon.
            head=f"SELECT max(position) FROM {events} WHERE position < {HORIZON}",
            # Whether a committed row waits behind a transaction still in flight.
            # (max() walks the primary key from its end; an EXISTS is planned as a full scan
            # while the table is small.)
            held_back=f"SELECT coalesce((SELECT max(position) FROM {events}) >= {HORIZON}, false)",
            load_checkpoint=f"SELECT position FROM {checkpoints} WHERE name = %s",
            save_checkpoint=(
                f"INSERT INTO {checkpoints} (name, position) VALUES (%s, %s)"
                " ON CONFLICT (name) DO UPDATE SET position = excluded.position"
            ),
            channel=channel(schema),
            leases=LeaseStatements.for_table(leases),
        )


DEFAULT_PARTITIONS = 16
"""The partition count whose indexes a new schema is created with (an app's default); those of
another count are created on the first read of it (:func:`create_partition_index`)."""

MERGE_SHARE = 2
"""A partitioned read merges per-partition index ranges (see :func:`read_all_sql`) when it holds
fewer than ``count / MERGE_SHARE`` of the partitions; with more, one walk of the primary key
drops fewer rows than it keeps, and is cheaper than the merge."""


def partition_index(count: int) -> str:
    """The name of the index that serves the partitioned reads of ``count`` partitions."""
    return f"events_by_partition_{count}"


def partition_index_exists(schema: str, count: int) -> str:
    """The statement: whether the valid index of ``count`` partitions and that of the events
    of unknown key are both in ``schema``."""
    s = pgsql.Identifier(schema).as_string(None)
    found = [
        "EXISTS (SELECT FROM pg_index WHERE indisvalid AND"
        f" indexrelid = to_regclass({_literal(f'{s}.{name}')}))"
        for name in (partition_index(count), "events_unkeyed")
    ]
    return "SELECT " + " AND ".join(found)


def create_partition_index(schema: str, count: int) -> str:
    """The script that creates the indexes that let a read of some of ``count`` partitions walk
    only their rows: ``(partition_key % count, position)`` over the keyed rows, and
    ``position`` over the rows of unknown key.

    A new schema is created with those of :data:`DEFAULT_PARTITIONS`. This script is a plain
    ``CREATE INDEX`` (one transaction, under the schema's lock): it holds off appends while it
    builds, a scan of the table on an old schema. (``CREATE INDEX CONCURRENTLY`` of the same
    definitions and names, run ahead by hand, avoids that.)"""
    s = pgsql.Identifier(schema).as_string(None)
    lock = f"pg_advisory_xact_lock({LOCK_CLASS}, {lock_key(schema)})"
    return f"""
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT {lock};
{_partition_indexes(f"{s}.events", count)}
COMMIT;
"""


def _partition_indexes(events: str, count: int) -> str:
    return (
        f"CREATE INDEX IF NOT EXISTS {partition_index(count)}"
        f" ON {events} ((partition_key % {count}), position) WHERE partition_key IS NOT NULL;\n"
        f"CREATE INDEX IF NOT EXISTS events_unkeyed ON {events} (position)"
        " WHERE partition_key IS NULL;"
    )


@attrs.frozen
class Read:
    """A read_all statement and how to fill in its parameters."""

    statement: str
    params: tuple[object, ...]
    """The filter's parameters, between ``after_position`` and ``limit``."""
    branches: int = 0
    """0: one walk of the primary key; else the number of merged ranges, each of which takes
    the parameters, followed by the outer ``limit``."""

    def args(self, after: int, limit: int | None) -> tuple[object, ...]:
        """The statement's parameters for a page after ``after`` of at most ``limit``."""
        one = (after, *self.params, limit)
        if not self.branches:
            return one
        return one * self.branches + (limit,)


@functools.lru_cache(maxsize=256)
def read_all_sql(schema: str, filter: Filter, indexed: bool = False) -> Read:
    """The read_all statement for ``filter`` in ``schema``, and its filter parameters.

    Parameters: ``after_position``, then the filter's, then ``limit`` (``NULL``: none); see
    :meth:`Read.args`. With ``indexed`` (the indexes of :func:`create_partition_index` of the
    filter's count exist) and a minority of the partitions held, the read is a ``UNION ALL``
    of one range per partition held (and one of the rows of unknown key; only that one for a
    read of unknown keys alone, as a workflow router's), each in position
    order from its index, under an outer ``ORDER BY position LIMIT``: the planner merges them
    (Merge Append) and stops at the limit, so it reads only the rows of the partitions held.
    The rows, their order and the limit are those of the plain walk.
    """
    clauses = ["position > %s", f"position < {HORIZON}"]
    params: list[object] = []
    if not filter.include_system:
        clauses.append("NOT starts_with(stream, '$') AND NOT starts_with(type, '$')")
    if filter.stream_prefixes:
        clauses.append(_prefixes("stream", filter.stream_prefixes, params))
    if filter.event_types or filter.event_type_prefixes:
        options = []
        if filter.event_types:
            options.append("type = ANY(%s::text[])")
            params.append(list(filter.event_types))
        if filter.event_type_prefixes:
            options.append(_prefixes("type", filter.event_type_prefixes, params))
        clauses.append("(" + " OR ".join(options) + ")")
    table = pgsql.Identifier(schema).as_string(None) + ".events"
    partitions = filter.partitions
    if (
        indexed
        and partitions is not None
        and (partitions.held or partitions.unknown)
        and len(partitions.held) * MERGE_SHARE < partitions.count
    ):
        where = " AND ".join(clauses)
        ranges = [f"(partition_key %% {partitions.count}) = {n}" for n in sorted(partitions.held)]
        if partitions.unknown:
            ranges.append("partition_key IS NULL")
        branches = [
            f"(SELECT {COLUMNS} FROM {table} WHERE {r} AND {where} ORDER BY position LIMIT %s)"
            for r in ranges
        ]
        statement = (
            f"SELECT {COLUMNS} FROM ({' UNION ALL '.join(branches)}) AS page"
            " ORDER BY position LIMIT %s"
        )
        return Read(statement, tuple(params), len(branches))
    if partitions is not None:
        clauses.append(_partitions(partitions))
    where = " AND ".join(clauses)
    statement = f"SELECT {COLUMNS} FROM {table} WHERE {where} ORDER BY position LIMIT %s"
    return Read(statement, tuple(params))


def _wait_older(more: str = "") -> str:
    """The statement that waits on the appends older than transaction ``%s`` still in flight
    and reads the oldest transaction in flight as it began, then ``more`` columns."""
    wait = (
        f"SELECT count(pg_advisory_xact_lock_shared({WAIT_CLASS}, {_lock_key_sql('x')}))"
        " FROM (SELECT x::text::bigint AS x"
        " FROM pg_snapshot_xip(pg_current_snapshot()) AS u (x)) AS t"
        " WHERE x < %s"
    )
    return f"SELECT ({wait}), pg_snapshot_xmin(pg_current_snapshot())::text::bigint{more}"


def _literal(text: str) -> str:
    return pgsql.Literal(text).as_string(None)


def _prefixes(column: str, prefixes: tuple[str, ...], params: list[object]) -> str:
    params.extend(prefixes)
    return "(" + " OR ".join(f"starts_with({column}, %s)" for _ in prefixes) + ")"


def _partitions(partitions: Partitions) -> str:
    """The clause that passes the rows of ``partitions`` (and of unknown partition if
    ``partitions.unknown``). The
    numbers are ints checked by :class:`Partitions`, so they are written into the statement
    (one statement per holding, cached). The read walks the primary key from its position
    and drops the other partitions' rows in the server, never sent or decoded (the reads that
    hold half of the partitions or more, or whose indexes are not there)."""
    if not partitions.held:
        return "partition_key IS NULL" if partitions.unknown else "FALSE"
    if partitions.unknown and len(partitions.held) == partitions.count:
        return "TRUE"  # every partition and the unknown keys: every row
    held = ", ".join(str(n) for n in sorted(partitions.held))
    # mod(), not %: no partition index matches it, so the planner keeps the walk (it took a
    # bitmap scan of the indexes and a sort on a new table, which cost more).
    if not partitions.unknown:
        return f"mod(partition_key, {partitions.count}) IN ({held})"
    return f"(partition_key IS NULL OR mod(partition_key, {partitions.count}) IN ({held}))"


def decode(row: Row) -> RecordedEvent:
    """A stored row as a :class:`RecordedEvent` (``recorded_at`` in UTC)."""
    position, stream, revision, event_id, event_type, data, metadata, recorded_at, key = row
    return RecordedEvent(
        id=event_id,
        type=event_type,
        data=bytes(data),
        metadata=bytes(metadata),
        stream=stream,
        revision=revision,
        position=position,
        recorded_at=recorded_at.astimezone(UTC),
        partition_key=key,
    )
