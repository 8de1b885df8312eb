"""The PostgreSQL store's schema, statements, filter translation and row decoding.

Every statement names its tables with the store's schema (quoted), so a store never depends on
the connection's ``search_path``. :class:`Statements` builds them once per store.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
import zlib
from datetime import UTC, datetime

import attrs
from psycopg import sql as pgsql

from decider.stores.protocol import Filter, RecordedEvent

LOCK_CLASS = 0x6465_6369  # "deci": the first key of the store's advisory locks
"""The first key of every advisory lock the store takes; the second is the schema's CRC-32."""

COLUMNS = "position, stream, revision, event_id, type, data, metadata, recorded_at"

Row = tuple[int, str, int, uuid.UUID, str, bytes, bytes, datetime]


def lock_key(schema: str) -> int:
    """The second advisory-lock key of ``schema``: its CRC-32 as a signed 32-bit int.

    Two schemas whose keys collide only share a lock (they serialise each other's appends);
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
    create: str
    lock: str
    last_revision: str
    last_revisions: str
    insert_one: str
    insert_many: str
    range: str
    find_ids: str
    find_many: str
    read_stream: str
    head: str
    load_checkpoint: str
    save_checkpoint: str
    channel: str

    @classmethod
    def for_schema(cls, schema: str) -> Statements:
        """The statements of the store in ``schema``."""
        s = pgsql.Identifier(schema).as_string(None)
        events, checkpoints = f"{s}.events", f"{s}.checkpoints"
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
    -- Assigned inside the write lock (see decider.stores.postgres), so positions follow commits.
    position    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream      text        NOT NULL,
    revision    bigint      NOT NULL,
    event_id    uuid        NOT NULL,
    type        text        NOT NULL,
    data        bytea       NOT NULL,
    metadata    bytea       NOT NULL,
    recorded_at timestamptz NOT NULL,
    UNIQUE (stream, revision)  -- the revision check's index, and a last line of defence
);
-- Finds a stream's stored ids for the idempotency check of ANY / EXISTS appends.
CREATE INDEX IF NOT EXISTS events_by_stream_id ON {events} (stream, event_id);
CREATE TABLE IF NOT EXISTS {checkpoints} (
    name     text   PRIMARY KEY,
    position bigint NOT NULL
);
COMMIT;
"""
        return cls(
            schema=schema,
            tables_exist=(
                f"SELECT to_regclass({_literal(events)}) IS NOT NULL"
                f" AND to_regclass({_literal(checkpoints)}) IS NOT NULL"
            ),
            create=create,
            lock=f"SELECT {lock}",
            last_revision=(
                f"SELECT revision FROM {events} WHERE stream = %s ORDER BY revision DESC LIMIT 1"
            ),
            # A batch's streams in one round trip, each by a backward scan of its index.
            last_revisions=(
                "SELECT s.stream, (SELECT e.revision FROM"
                f" {events} AS e WHERE e.stream = s.stream ORDER BY e.revision DESC LIMIT 1)"
                " FROM unnest(%s::text[]) AS s (stream)"
            ),
            # The NOTIFY rides along with the insert; PostgreSQL sends it at commit.
            insert_one=(
                f"WITH written AS (INSERT INTO {events}"
                " (stream, revision, event_id, type, data, metadata, recorded_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING position)"
                " SELECT position, pg_notify(%s, '') FROM written"
            ),
            # Several rows go in as arrays (one statement, whatever the count) and get their
            # positions in the order given. Dumping the arrays costs more than a plain VALUES,
            # so a one-event append (the common case) uses insert_one.
            insert_many=(
                f"WITH written AS (INSERT INTO {events}"
                " (stream, revision, event_id, type, data, metadata, recorded_at)"
                " SELECT %s, e.revision, e.event_id, e.type, e.data, e.metadata, %s"
                " FROM unnest(%s::bigint[], %s::uuid[], %s::text[], %s::bytea[], %s::bytea[])"
                " WITH ORDINALITY AS e (revision, event_id, type, data, metadata, n)"
                " ORDER BY e.n RETURNING position)"
                " SELECT max(position), pg_notify(%s, '') FROM written"
            ),
            range=(
                f"SELECT event_id, revision, position FROM {events}"
                " WHERE stream = %s AND revision >= %s ORDER BY revision LIMIT %s"
            ),
            find_ids=(
                f"SELECT event_id, revision, position FROM {events}"
                " WHERE stream = %s AND event_id = ANY(%s::uuid[]) ORDER BY revision"
            ),
            # Several streams' ids at once: (stream, id) pairs as two parallel arrays.
            find_many=(
                f"SELECT e.stream, e.event_id, e.revision, e.position FROM {events} AS e"
                " JOIN unnest(%s::text[], %s::uuid[]) AS p (stream, event_id)"
                " ON e.stream = p.stream AND e.event_id = p.event_id ORDER BY e.revision"
            ),
            read_stream=(
                f"SELECT {COLUMNS} FROM {events}"
                " WHERE stream = %s AND revision >= %s ORDER BY revision LIMIT %s"
            ),
            head=f"SELECT max(position) FROM {events}",
            load_checkpoint=f"SELECT position FROM {checkpoints} WHERE name = %s",
            save_checkpoint=(
                f"INSERT INTO {checkpoints} (name, position) VALUES (%s, %s)"
                " ON CONFLICT (name) DO UPDATE SET position = excluded.position"
            ),
            channel=channel(schema),
        )


@functools.lru_cache(maxsize=256)
def read_all_sql(schema: str, filter: Filter) -> tuple[str, tuple[object, ...]]:
    """The read_all statement for ``filter`` in ``schema``, and its filter parameters.

    Parameters: ``after_position``, then the returned ones, then ``limit`` (``NULL``: none).
    """
    clauses = ["position > %s"]
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
    where = " AND ".join(clauses)
    table = pgsql.Identifier(schema).as_string(None) + ".events"
    statement = f"SELECT {COLUMNS} FROM {table} WHERE {where} ORDER BY position LIMIT %s"
    return statement, tuple(params)


def _literal(text: str) -> str:
    return pgsql.Literal(text).as_string(None)


def _prefixes(column: str, prefixes: tuple[str, ...], params: list[object]) -> str:
    params.extend(prefixes)
    return "(" + " OR ".join(f"starts_with({column}, %s)" for _ in prefixes) + ")"


def decode(row: Row) -> RecordedEvent:
    """A stored row as a :class:`RecordedEvent` (``recorded_at`` in UTC)."""
    position, stream, revision, event_id, event_type, data, metadata, recorded_at = row
    return RecordedEvent(
        id=event_id,
        type=event_type,
        data=bytes(data),
        metadata=bytes(metadata),
        stream=stream,
        revision=revision,
        position=position,
        recorded_at=recorded_at.astimezone(UTC),
    )
