"""One stream's append inside a SQLite write transaction: the insert, which the store's
constraints check, and the slow path of an expectation not plainly met (idempotency or
conflict), which reads the stream.

An exact revision ``e`` (or ``NO_STREAM``, ``e = -1``) is checked by the insert itself, with no
query first: the ``(stream, revision)`` key refuses revision ``e + 1`` when the stream is further
on, and the first event's insert is guarded by the existence of revision ``e`` when the stream
is not so far. Revisions have no gaps, so the two together say the stream ends at ``e``. Only
when the insert refuses (a conflict, or the same ids re-appended) is the stream's last
revision read and the shared rule applied (:mod:`decider.stores._expectations`). One event
appended with ``ANY`` (or ``EXISTS``) is one statement too: the insert takes the stream's next
revision and writes nothing if the stream holds the event's id (or, for ``EXISTS``, is
missing); then the same slow path decides. Several
events go in as one statement whose last row id is the last event's position: one writer
holds the lock, so ``AUTOINCREMENT`` gives the rows consecutive positions. A batch's run of
appends with exact revisions (or ``NO_STREAM``) to distinct streams, and of single events
appended with ``ANY`` (a router's copies to one stream), is three statements at most: one read
of every guard, one of the ``ANY`` streams' ends and ids, one insert of every row; if one says
no, each append goes alone, as above, and finds out why (:func:`append_all`).
"""

from __future__ import annotations

import functools
import sqlite3
import uuid
from collections.abc import Mapping, Sequence

from decider.stores._expectations import Stored, plan_append
from decider.stores.protocol import (
    ANY,
    EXISTS,
    NO_STREAM,
    AppendResult,
    ExpectedRevision,
    NewEvent,
    StreamAppend,
)
from decider.stores.sqlite import _sql as sql

IDS_PER_QUERY = 500
"""Event ids looked up in one statement (SQLite caps a statement's parameters)."""

ROWS_PER_INSERT = 500
"""Events written by one statement (8 parameters each: SQLite caps a statement's parameters)."""


def append_all(
    connection: sqlite3.Connection, appends: Sequence[StreamAppend], now: str
) -> list[AppendResult]:
    """Check and write a batch's appends, in order, inside the caller's write transaction.

    Consecutive appends go in together (:func:`_append_run`) when each is either an exact
    revision (or ``NO_STREAM``) to a stream no other append of the run writes, or one event
    appended with ``ANY`` (several may go to one stream: a router's copies; when the batch
    has more than one such), no two with the same stream and id: one statement checks every
    guard, one reads the ``ANY`` streams' ends, one inserts every row. Any other append, or a
    run that does not plainly hold, goes by :func:`append_one`.
    """
    results: list[AppendResult] = []
    run: list[StreamAppend] = []
    rows = 0
    exact: set[str] = set()  # the streams of the run's exact appends
    anys: set[tuple[str, uuid.UUID]] = set()  # the streams and ids of its ANY appends
    any_streams: set[str] = set()
    # One ANY append alone is one statement by append_one; in a run it costs a read more.
    any_runs = sum([a.expected_revision is ANY and len(a.events) == 1 for a in appends]) > 1
    for item in appends:
        expected, count, stream = item.expected_revision, len(item.events), item.stream
        if (type(expected) is int or expected is NO_STREAM) and count <= ROWS_PER_INSERT:
            joins = stream not in exact and stream not in any_streams
            one: tuple[str, uuid.UUID] | None = None
        elif any_runs and expected is ANY and count == 1:
            one = (stream, item.events[0].id)
            joins = stream not in exact and one not in anys
        else:
            results += _append_run(connection, run, now)  # the run so far goes in first
            run, rows, exact, anys, any_streams = [], 0, set(), set(), set()
            results.append(append_one(connection, stream, item.events, expected, now))
            continue
        if not joins or rows + count > ROWS_PER_INSERT:
            results += _append_run(connection, run, now)
            run, rows, exact, anys, any_streams = [], 0, set(), set(), set()
        run.append(item)
        rows += count
        if one is None:
            exact.add(stream)
        else:
            anys.add(one)
            any_streams.add(stream)
    results += _append_run(connection, run, now)
    return results


def _append_run(
    connection: sqlite3.Connection, run: Sequence[StreamAppend], now: str
) -> list[AppendResult]:
    """A run of :func:`append_all` (at most :data:`ROWS_PER_INSERT` rows): the guards of its
    exact appends (each stream holds the revision before its first row) read in one
    statement, the ends of its ``ANY`` appends' streams (and whether one holds its event's
    id) in another, then every row inserted in one, whose last row id is the last row's
    position (one writer holds the lock: consecutive positions). If a guard does not hold, an
    id is stored, or the insert is refused (the ``(stream, revision)`` key: nothing of it is
    written), each append goes by :func:`append_one`, which finds out why."""
    if len(run) < 2:
        return _one_by_one(connection, run, now)
    # The revision each append goes after: an exact one's; -1 for NO_STREAM, and for ANY until
    # its stream's end is read.
    afters = [x if type(x := a.expected_revision) is int else -1 for a in run]
    guards = [
        (a.stream, after)
        for a, after in zip(run, afters, strict=True)
        if after >= 0 and a.expected_revision is not ANY
    ]
    ends: dict[str, int] | None = {}
    anys = [(a.stream, a.events[0].id) for a in run if a.expected_revision is ANY]
    if anys:
        ends = _any_ends(connection, anys)
    position: int | None = None
    if ends is not None and (not guards or _guards_hold(connection, guards)):
        values: list[object] = []
        extend = values.extend
        for index, a in enumerate(run):
            stream = a.stream
            if a.expected_revision is ANY:
                after = ends[stream]
                ends[stream] = after + 1
                afters[index] = after  # the revision the event goes after
            else:
                after = afters[index]
            for i, e in enumerate(a.events, start=after + 1):
                key = e.partition_key
                extend(
                    (stream, i, e.id.int.to_bytes(16, "big"), e.type, e.data, e.metadata, now, key)
                )
        try:
            position = connection.execute(_insert_sql(len(values) // 8), values).lastrowid
        except sqlite3.IntegrityError:  # a stream is further on (or the ids are stored)
            position = None
    if position is None:
        return _one_by_one(connection, run, now)
    results: list[AppendResult] = []
    for a, after in zip(reversed(run), reversed(afters), strict=True):
        results.append(
            AppendResult(next_expected_revision=after + len(a.events), position=position)
        )
        position -= len(a.events)
    results.reverse()
    return results


def _one_by_one(
    connection: sqlite3.Connection, run: Sequence[StreamAppend], now: str
) -> list[AppendResult]:
    """Each of ``run`` by :func:`append_one`, in order."""
    return [append_one(connection, a.stream, a.events, a.expected_revision, now) for a in run]


def _any_ends(
    connection: sqlite3.Connection, anys: Sequence[tuple[str, uuid.UUID]]
) -> dict[str, int] | None:
    """The last revision of each stream of ``anys`` (-1: none), read in one statement; ``None``
    if a stream holds its event's id (that append is recognised, or refused, by
    :func:`append_one`)."""
    rows = connection.execute(
        _ends_sql(len(anys)), [v for stream, i in anys for v in (stream, i.int.to_bytes(16, "big"))]
    ).fetchall()
    ends: dict[str, int] = {}
    for stream, last, stored in rows:
        if stored:
            return None
        ends[stream] = -1 if last is None else last
    return ends


@functools.lru_cache(maxsize=64)
def _ends_sql(count: int) -> str:
    """Each of ``count`` ``(stream, id)`` pairs: the stream, its last revision and whether it
    holds the id (looked up as :data:`~decider.stores.sqlite._sql.INSERT_NEW_ID_ANY` does)."""
    pairs = ", ".join(["(?, ?)"] * count)
    return (
        "SELECT g.column1, (SELECT revision FROM events WHERE stream = g.column1"
        " ORDER BY revision DESC LIMIT 1),"
        " EXISTS (SELECT 1 FROM events INDEXED BY events_by_stream_id"
        " WHERE stream = g.column1 AND event_id = g.column2 AND revision > 0)"
        " OR EXISTS (SELECT 1 FROM events WHERE stream = g.column1 AND revision = 0"
        " AND event_id = g.column2)"
        f" FROM (VALUES {pairs}) AS g"
    )


def _guards_hold(connection: sqlite3.Connection, guards: Sequence[tuple[str, int]]) -> bool:
    """Whether each ``(stream, revision)`` of ``guards`` (distinct streams) is stored."""
    [(found,)] = connection.execute(
        _guards_sql(len(guards)), [v for guard in guards for v in guard]
    ).fetchall()
    return bool(found == len(guards))


@functools.lru_cache(maxsize=64)
def _guards_sql(count: int) -> str:
    """How many of ``count`` ``(stream, revision)`` pairs are stored (each by the key)."""
    pairs = ", ".join(["(?, ?)"] * count)
    return (
        f"SELECT count(*) FROM (VALUES {pairs}) AS g WHERE EXISTS"
        " (SELECT 1 FROM events WHERE stream = g.column1 AND revision = g.column2)"
    )


def append_one(
    connection: sqlite3.Connection,
    stream: str,
    events: Sequence[NewEvent],
    expected: ExpectedRevision,
    now: str,
) -> AppendResult:
    """Check and write one stream's append inside the caller's write transaction."""
    if len(events) == 1 and (expected is ANY or expected is EXISTS):
        # One statement: written after the stream's end unless the stream holds the id (or,
        # for EXISTS, the stream is missing); then the slow path below decides.
        [e] = events
        statement = sql.INSERT_NEW_ID_ANY if expected is ANY else sql.INSERT_NEW_ID_EXISTS
        raw = e.id.int.to_bytes(16, "big")
        values = (stream, raw, e.type, e.data, e.metadata, now, e.partition_key)
        written = connection.execute(statement, values).fetchall()
        if written:
            [(position, revision)] = written
            return AppendResult(next_expected_revision=revision, position=position)
    elif type(expected) is int or expected is NO_STREAM:
        after = -1 if expected is NO_STREAM else expected
        assert isinstance(after, int)
        try:
            position = _insert(connection, stream, events, after + 1, now)
        except sqlite3.IntegrityError:  # the (stream, revision) key: the stream is further on
            position = None
        if position is not None:
            return AppendResult(next_expected_revision=after + len(events), position=position)
    row = connection.execute(sql.LAST_REVISION, (stream,)).fetchone()
    last: int | None = None if row is None else row[0]
    already = _plan(connection, stream, events, expected, last)
    if already is not None:
        return already
    first = 0 if last is None else last + 1
    position = _insert(connection, stream, events, first, now, guarded=False)
    assert position is not None
    return AppendResult(next_expected_revision=first + len(events) - 1, position=position)


def _insert(
    connection: sqlite3.Connection,
    stream: str,
    events: Sequence[NewEvent],
    first: int,
    now: str,
    *,
    guarded: bool = True,
) -> int | None:
    """Write ``events`` at revisions ``first`` on; the last one's position, or ``None`` (nothing
    written) when ``guarded`` and revision ``first - 1`` is not stored (``first > 0``).

    Raises ``sqlite3.IntegrityError`` (nothing written) when revision ``first`` is taken.
    """
    rows = [
        (
            stream,
            first + i,
            e.id.int.to_bytes(16, "big"),
            e.type,
            e.data,
            e.metadata,
            now,
            e.partition_key,
        )
        for i, e in enumerate(events)
    ]
    if guarded and first > 0:
        cursor = connection.execute(sql.INSERT_AFTER, (*rows[0], stream, first - 1))
        if cursor.rowcount != 1:
            return None
        rows = rows[1:]
    for start in range(0, len(rows), ROWS_PER_INSERT):
        part = rows[start : start + ROWS_PER_INSERT]
        cursor = connection.execute(_insert_sql(len(part)), [v for r in part for v in r])
    position: int | None = cursor.lastrowid
    return position


@functools.lru_cache(maxsize=64)
def _insert_sql(count: int) -> str:
    """The insert of ``count`` rows in one statement."""
    return sql.INSERT + ", (?, ?, ?, ?, ?, ?, ?, ?)" * (count - 1)


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
