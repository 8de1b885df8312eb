"""The PostgreSQL store's append, inside a write transaction (no lock: a concurrent writer of the
same stream makes the insert fail on the ``(stream, revision)`` key, and the store retries the
transaction, which then sees the winner's events). A stream found raced for that way is
*contended* from then on (:class:`Contended`): a transaction takes its advisory lock before
reading it, so its writers take turns instead of racing (a lost race redoes a whole batch, in
the client and in the server).

One stream's append reads the stream's last revision, takes the fast path when the expectation
is plainly met (the exact revision, or ``NO_STREAM`` on a missing stream) and otherwise applies
the shared idempotency rule (:mod:`decider.stores._expectations`), then inserts. A batch, on
its first try, reads nothing for its appends of an exact revision (or ``NO_STREAM``): the
table's constraints check them (:func:`insert_plain`), and one that is not met aborts the
transaction, which is run again with every append read first. The others (and all of them on
a second try) are read ahead (:func:`read_ahead`): every stream's last revision, and which ids
of its ``ANY`` / ``EXISTS`` appends are stored, in two round trips whatever its size, so the
inserts go down the pipeline without waiting for each other.
"""

from __future__ import annotations

import collections
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

import attrs
import psycopg
from psycopg.rows import TupleRow

from decider.stores._expectations import Stored, plan_append
from decider.stores.postgres._sql import (
    INDEX_BITS,
    MAX_EVENTS_PER_TRANSACTION,
    Statements,
    stream_lock_key,
)
from decider.stores.protocol import (
    ANY,
    EXISTS,
    NO_STREAM,
    AppendResult,
    ExpectedRevision,
    NewEvent,
    StreamAppend,
)

Connection = psycopg.Connection[TupleRow]


@attrs.define
class Batch:
    """What a batch's transaction read ahead, kept up to date as its appends write."""

    lasts: dict[str, int | None]
    """Each stream's last revision (``None``: no stream)."""
    stored_ids: dict[str, dict[uuid.UUID, Stored]]
    """For the streams of appends without a revision: which of their ids were stored."""
    written: set[tuple[str, uuid.UUID]] = attrs.Factory(set)
    """The (stream, id) pairs this batch has written so far."""
    index: int = 0
    """The index in the transaction of the next event written (the low bits of its position)."""


CONTENDED_KEPT = 256
"""How many contended streams a store remembers (the oldest found is forgotten first)."""


class Contended:
    """The streams of a store that its write transactions were found racing other writers for
    (a lost race: :meth:`learn`), whose advisory locks a transaction takes before reading them
    (:func:`read_ahead`). A stream no two writers append to at once costs nothing; one that
    they do (a stream every process of a group copies results to) costs one lost race, then
    a lock per transaction that appends to it."""

    def __init__(self, schema: str) -> None:
        self._schema = schema
        self._keys: dict[str, int] = {}
        self._lock = threading.Lock()

    def keys(self, streams: Sequence[str]) -> list[int]:
        """The lock keys of ``streams`` that are contended, ascending (the order every
        transaction takes them in, so two never wait on each other)."""
        keys = self._keys
        if not keys:
            return []
        return sorted({key for stream in streams if (key := keys.get(stream)) is not None})

    def learn(self, before: Mapping[str, int | None], after: Mapping[str, int | None]) -> None:
        """A transaction that read ``before`` (each stream's last revision) lost a race and,
        tried again, read ``after``: the streams that moved on between were written by another
        writer meanwhile, and are contended from now on."""
        moved = [s for s, last in after.items() if s in before and before[s] != last]
        if not moved:
            return
        with self._lock:
            for stream in moved:
                self._keys.pop(stream, None)
                self._keys[stream] = stream_lock_key(self._schema, stream)
            while len(self._keys) > CONTENDED_KEPT:
                del self._keys[next(iter(self._keys))]


def read_ahead(
    sql: Statements,
    connection: Connection,
    appends: Sequence[StreamAppend],
    contended: Contended | None = None,
) -> Batch:
    """What a batch's appends need to know, read in two round trips whatever their number:
    every stream's last revision, and which of the ids of the appends that name no revision
    (``ANY``, ``EXISTS``) are stored already. The inserts then go down the pipeline without
    waiting for each other. The streams that are ``contended`` are locked first (in the same
    round trip), so what is read of them holds until the commit."""
    if not appends:
        return Batch({}, {})
    streams = list(dict.fromkeys(a.stream for a in appends))
    locks = [] if contended is None else contended.keys(streams)
    if locks:
        connection.execute(sql.lock_streams, (locks,))
    lasts: dict[str, int | None] = dict(
        connection.execute(sql.last_revisions, (streams,)).fetchall()
    )
    no_revision = [
        a for a in appends if a.expected_revision is ANY or a.expected_revision is EXISTS
    ]
    # A stream missing now holds no ids but the ones this batch writes (see _plan's find_ids):
    # its appends need no look-up either, however many the batch has.
    stored: dict[str, dict[uuid.UUID, Stored]] = {a.stream: {} for a in no_revision}
    probe = [
        (a.stream, e.id) for a in no_revision if lasts.get(a.stream) is not None for e in a.events
    ]
    if probe:
        rows = connection.execute(
            sql.find_many, ([s for s, _ in probe], [i for _, i in probe])
        ).fetchall()
        # One row per pair, at its latest revision (an id stored twice counts there).
        for stream, i, revision, position in rows:
            stored[stream][i] = (i, revision, position)
    return Batch(lasts, stored)


def read_first(appends: Sequence[StreamAppend], *, first_try: bool) -> list[StreamAppend]:
    """The appends of a batch whose streams :func:`read_ahead` reads: on a batch's first try,
    all but those of an exact revision or ``NO_STREAM`` to a stream no other append names
    (:class:`BatchRows` writes them unread, guarded); on a later try, all of them."""
    if not first_try:
        return list(appends)
    counts = collections.Counter(a.stream for a in appends)
    return [
        a
        for a in appends
        if counts[a.stream] > 1
        or not (type(a.expected_revision) is int or a.expected_revision is NO_STREAM)
    ]


class BatchRows:
    """The rows a batch's transaction writes, sent as (at most) two ``executemany`` of one-row
    inserts with binary parameters (prepared once; no arrays to build or dump); their
    positions are the transaction's id, read once with the lock on it, and each row's index
    in the transaction (:attr:`Batch.index`).

    A row added ``guarded`` is the first of an append of an exact revision ``e`` that nothing
    read (:func:`read_first`): the store's constraints check it. Revision ``e + 1`` taken
    (the stream is further on, or the same ids were appended): the ``(stream, revision)`` key
    refuses it, ``UniqueViolation``. Revision ``e`` missing (the stream is not so far): its
    revision is drawn from revision ``e``'s row, so it is ``NULL``, ``NotNullViolation``.
    Revisions have no gaps, so the two together say the stream ends at ``e``. Either aborts
    the transaction, which is run again reading the streams first
    (:func:`~decider.stores.postgres._transactions.write_transaction`), where the shared rule
    decides: idempotent success or a conflict.
    """

    def __init__(
        self, sql: Statements, connection: Connection, batch: Batch, now: datetime
    ) -> None:
        self._sql = sql
        self._connection = connection
        self._batch = batch
        self._now = now
        self._own: psycopg.Cursor[TupleRow] | None = None
        self._first_position: int | None = None
        self._rows: list[tuple[object, ...]] = []
        self._guarded: list[tuple[object, ...]] = []

    def add(
        self, stream: str, events: Sequence[NewEvent], first: int, *, guarded: bool
    ) -> Callable[[], AppendResult]:
        """Write ``events`` at revisions ``first`` on (``guarded``: see the class); how to read
        the append's result once the transaction has ended."""
        if self._own is None:  # the transaction's id and lock, once it writes a row
            self._own = self._connection.execute(self._sql.own_xid)
        index = self._batch.index
        now = self._now
        rows = self._rows
        if guarded and first > 0:
            e = events[0]
            self._guarded.append(
                (
                    index,
                    stream,
                    stream,
                    first - 1,
                    e.id,
                    e.type,
                    e.data,
                    e.metadata,
                    now,
                    e.partition_key,
                )
            )
            skip = 1
        else:
            skip = 0
        for k in range(skip, len(events)):
            e = events[k]
            key = e.partition_key
            rows.append((index + k, stream, first + k, e.id, e.type, e.data, e.metadata, now, key))
        self._batch.index = index + len(events)
        revision, at = first + len(events) - 1, index + len(events) - 1
        return lambda: AppendResult(next_expected_revision=revision, position=self._position(at))

    def send(self) -> None:
        """Send the rows added since the last send (down the pipeline: nothing waits for
        them)."""
        if not (self._guarded or self._rows):
            return
        cursor = self._connection.cursor()
        if self._guarded:
            cursor.executemany(self._sql.insert_after, self._guarded)
            self._guarded = []
        if self._rows:
            cursor.executemany(self._sql.insert_row, self._rows)
            self._rows = []

    def _position(self, index: int) -> int:
        if self._first_position is None:
            assert self._own is not None
            self._first_position = one_row(self._own)[0] << INDEX_BITS
        return self._first_position + index


def check_written(
    sql: Statements,
    connection: Connection,
    append: StreamAppend,
    batch: Batch,
    before_read: Callable[[], None],
) -> AppendResult | int:
    """Decide a batch's append by what the batch read ahead (:func:`read_ahead`): its stored
    result when it is already written (idempotent success), else the first revision to
    write it at (the batch is kept up to date as if written); raises ``WrongExpectedVersion``
    on a conflict. ``before_read`` runs before any statement the decision reads with (it
    sends the batch's rows not sent yet, which the read must see); most decisions read
    nothing."""
    stream, events, expected = append.stream, append.events, append.expected_revision
    last = batch.lasts[stream]
    if type(expected) is int:
        plainly_met = expected == last
    else:
        plainly_met = expected is NO_STREAM and last is None
    if not plainly_met:
        already = _plan(
            sql, connection, stream, events, expected, last, batch=batch, before_read=before_read
        )
        if already is not None:
            return already
    first = 0 if last is None else last + 1
    batch.lasts[stream] = first + len(events) - 1
    batch.written.update((stream, e.id) for e in events)
    return first


def check_size(count: int) -> None:
    """Refuse a transaction of more events than a position can index."""
    if count > MAX_EVENTS_PER_TRANSACTION:
        raise ValueError(
            f"one transaction may write at most {MAX_EVENTS_PER_TRANSACTION} events, got {count}"
        )


def append_one(  # noqa: PLR0917
    sql: Statements,
    connection: Connection,
    stream: str,
    events: Sequence[NewEvent],
    expected: ExpectedRevision,
    now: datetime,
) -> Callable[[], AppendResult]:
    """Check and write one stream's append (not a batch's: see :class:`BatchRows`) inside the
    caller's write transaction; how to read its result once the transaction has ended."""
    row = connection.execute(sql.last_revision, (stream,)).fetchone()
    last: int | None = None if row is None else row[0]
    if type(expected) is int:
        plainly_met = expected == last
    else:
        plainly_met = expected is NO_STREAM and last is None
    if not plainly_met:
        already = _plan(sql, connection, stream, events, expected, last, batch=None)
        if already is not None:
            return lambda: already
    first = 0 if last is None else last + 1
    revision = first + len(events) - 1
    index = 0
    if len(events) == 1:
        [e] = events
        values = (index, stream, first, e.id, e.type, e.data, e.metadata, now, e.partition_key)
        written = connection.execute(sql.insert_one, values)
    else:
        written = connection.execute(
            sql.insert_many,
            (
                index,
                stream,
                now,
                list(range(first, first + len(events))),
                [e.id for e in events],
                [e.type for e in events],
                [e.data for e in events],
                [e.metadata for e in events],
                [e.partition_key for e in events],
            ),
        )
    return lambda: AppendResult(next_expected_revision=revision, position=one_row(written)[0])


def append_if_plain(
    sql: Statements,
    connection: Connection,
    stream: str,
    events: Sequence[NewEvent],
    expected: ExpectedRevision,
    *,
    now: datetime,
) -> AppendResult | None:
    """The whole append in one statement, in autocommit mode (one round trip, its own
    transaction), if its expectation is plainly met (the exact revision, or ``NO_STREAM`` on a
    missing stream); ``None`` (nothing written) otherwise, for the caller's full path.

    Raises ``psycopg.errors.UniqueViolation`` when a concurrent writer took the revision
    first: nothing is written, and the full path decides (idempotent or a conflict).
    """
    if type(expected) is int:
        last = expected
    elif expected is NO_STREAM:
        last = -1
    else:
        return None
    first = last + 1
    if len(events) == 1:
        [e] = events
        key = e.partition_key
        values = (stream, first, e.id, e.type, e.data, e.metadata, now, key, stream, last)
        rows = connection.execute(sql.append_one_if, values).fetchall()
    else:
        params = (
            stream,
            now,
            list(range(first, first + len(events))),
            [e.id for e in events],
            [e.type for e in events],
            [e.data for e in events],
            [e.metadata for e in events],
            [e.partition_key for e in events],
            stream,
            last,
        )
        rows = connection.execute(sql.append_if, params).fetchall()
    if not rows:
        return None
    return AppendResult(next_expected_revision=last + len(events), position=rows[0][0])


def _plan(  # noqa: PLR0917
    sql: Statements,
    connection: Connection,
    stream: str,
    events: Sequence[NewEvent],
    expected: ExpectedRevision,
    last: int | None,
    *,
    batch: Batch | None,
    before_read: Callable[[], None] = lambda: None,
) -> AppendResult | None:
    """The slow path of an append whose expectation is not plainly met: idempotency or
    conflict."""
    known = None if batch is None else batch.stored_ids.get(stream)

    def read_range(first: int, count: int) -> list[Stored]:
        before_read()
        rows = connection.execute(sql.range, (stream, first, count)).fetchall()
        return [(i, revision, position) for i, revision, position in rows]

    def find_ids(ids: Sequence[uuid.UUID]) -> Mapping[uuid.UUID, Stored]:
        # What the batch read ahead holds, unless the batch itself wrote one of the ids.
        if (
            known is not None
            and batch is not None
            and not any((stream, i) in batch.written for i in ids)
        ):
            return {i: known[i] for i in ids if i in known}
        # Planned for this stream each time (not prepared): a generic plan takes every stream
        # for a short one and reads a long shared stream whole (see _sql.find_ids).
        before_read()
        rows = connection.execute(sql.find_ids, (stream, list(ids)), prepare=False).fetchall()
        # One row per id, at its latest revision (an id stored twice counts there).
        found: dict[uuid.UUID, Stored] = {}
        for i, revision, position in rows:
            if i not in found or revision > found[i][1]:
                found[i] = (i, revision, position)
        return found

    return plan_append(
        stream, expected, last, [e.id for e in events], read_range=read_range, find_ids=find_ids
    )


def one_row(cursor: psycopg.Cursor[TupleRow]) -> TupleRow:
    """The single row of a statement that returns exactly one."""
    [row] = cursor.fetchall()
    return row
