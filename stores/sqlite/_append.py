"""One stream's append inside a SQLite write transaction: the revision check, the slow path
of an expectation not plainly met (idempotency or conflict), and the rows written."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Mapping, Sequence

from decider.stores._expectations import Stored, plan_append
from decider.stores.protocol import NO_STREAM, AppendResult, ExpectedRevision, NewEvent
from decider.stores.sqlite import _sql as sql

IDS_PER_QUERY = 500
"""Event ids looked up in one statement (SQLite caps a statement's parameters)."""


def append_one(
    connection: sqlite3.Connection,
    stream: str,
    events: Sequence[NewEvent],
    expected: ExpectedRevision,
    now: str,
) -> AppendResult:
    """Check and write one stream's append inside the caller's write transaction."""
    row = connection.execute(sql.LAST_REVISION, (stream,)).fetchone()
    last: int | None = None if row is None else row[0]
    if not (expected == last if type(expected) is int else expected is NO_STREAM and last is None):
        already = _plan(connection, stream, events, expected, last)
        if already is not None:
            return already
    first = 0 if last is None else last + 1
    rows = [
        (stream, first + i, e.id.bytes, e.type, e.data, e.metadata, now)
        for i, e in enumerate(events)
    ]
    if len(rows) == 1:
        position = connection.execute(sql.INSERT, rows[0]).lastrowid
    else:
        # One writer holds the lock, so AUTOINCREMENT gives these rows consecutive positions.
        connection.executemany(sql.INSERT, rows)
        (position,) = connection.execute("SELECT last_insert_rowid()").fetchone()
    assert position is not None
    return AppendResult(next_expected_revision=first + len(rows) - 1, position=position)


def _plan(
    connection: sqlite3.Connection,
    stream: str,
    events: Sequence[NewEvent],
    expected: ExpectedRevision,
    last: int | None,
) -> AppendResult | None:
    """The slow path of an append whose expectation is not plainly met: idempotency or conflict."""

    def read_range(first: int, count: int) -> list[Stored]:
        rows = connection.execute(sql.RANGE, (stream, first, count)).fetchall()
        return [(uuid.UUID(bytes=i), revision, position) for i, revision, position in rows]

    def find_ids(ids: Sequence[uuid.UUID]) -> Mapping[uuid.UUID, Stored]:
        rows = []
        for start in range(0, len(ids), IDS_PER_QUERY):  # SQLite caps a statement's parameters
            chunk = ids[start : start + IDS_PER_QUERY]
            rows += connection.execute(
                sql.find_ids_sql(len(chunk)), (*(i.bytes for i in chunk), stream)
            ).fetchall()
        found = {}
        # An id stored twice (possible with explicit revisions) counts at its latest revision,
        # as in EventStoreDB.
        for raw, revision, position in sorted(rows, key=lambda r: r[1]):
            event_id = uuid.UUID(bytes=raw)
            found[event_id] = (event_id, revision, position)
        return found

    return plan_append(
        stream, expected, last, [e.id for e in events], read_range=read_range, find_ids=find_ids
    )
