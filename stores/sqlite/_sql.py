"""The SQLite store's schema, statements, filter translation and row decoding."""

from __future__ import annotations

import functools
import uuid
from datetime import UTC, datetime

from decider.stores.protocol import Filter, Partitions, RecordedEvent

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    -- AUTOINCREMENT: a position is never reused, even after the newest rows are deleted.
    position    INTEGER PRIMARY KEY AUTOINCREMENT,
    stream      TEXT    NOT NULL,
    revision    INTEGER NOT NULL,
    event_id    BLOB    NOT NULL,
    type        TEXT    NOT NULL,
    data        BLOB    NOT NULL,
    metadata    BLOB    NOT NULL,
    recorded_at TEXT    NOT NULL,   -- ISO 8601, always UTC (+00:00)
    partition_key INTEGER,          -- NewEvent.partition_key; NULL: unknown (see MIGRATE)
    UNIQUE (stream, revision)       -- the revision check's index, and a last line of defence
);
-- Finds a stream's stored ids for the idempotency check of ANY / EXISTS appends. Event ids
-- are random (uuid5): an index keyed by the id alone takes every insert to a random page, and
-- once it outgrows a batch each commit rewrites most of it, so the writes per event grew with
-- the log. Keyed by stream, a batch's inserts share pages; and a stream's first event (all of
-- a one-event stream, such as a handler's results) is left to the (stream, revision) index.
CREATE INDEX IF NOT EXISTS events_by_stream_id ON events (stream, event_id) WHERE revision > 0;
-- Files written before the index above have the id-only one: it is replaced.
DROP INDEX IF EXISTS events_by_id;
CREATE TABLE IF NOT EXISTS checkpoints (
    name     TEXT PRIMARY KEY,
    position INTEGER NOT NULL
) WITHOUT ROWID;
-- What each commit of events wrote, in brief (see GISTS_SINCE): the other processes' watch reads
-- these few rows instead of summing up the commits' events. Only recent ones are kept.
CREATE TABLE IF NOT EXISTS commit_gists (
    last    INTEGER PRIMARY KEY,  -- the commit's last position
    first   INTEGER NOT NULL,     -- the log's head before it (0: empty); its rows are past this
    modulo  INTEGER NOT NULL,     -- the gist's keys are the partition keys modulo this (0: as is)
    gist    TEXT    NOT NULL      -- Gist.text(); '': not kept (too long)
);
"""

COLUMNS = "position, stream, revision, event_id, type, data, metadata, recorded_at, partition_key"

HAS_PARTITION_KEY = "SELECT 1 FROM pragma_table_info('events') WHERE name = 'partition_key'"
MIGRATE = "ALTER TABLE events ADD COLUMN partition_key INTEGER"
"""A file written before partition keys existed gets the column, every old row's NULL (an
unknown partition, which every partitioned reader reads and routes itself)."""

LAST_REVISION = "SELECT revision FROM events WHERE stream = ? ORDER BY revision DESC LIMIT 1"
INSERT = (
    "INSERT INTO events"
    " (stream, revision, event_id, type, data, metadata, recorded_at, partition_key)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
# One row, only if the stream holds the revision before it (parameters: the row, the stream
# and that revision).
INSERT_AFTER = (
    "INSERT INTO events"
    " (stream, revision, event_id, type, data, metadata, recorded_at, partition_key)"
    " SELECT ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS"
    " (SELECT 1 FROM events WHERE stream = ? AND revision = ?)"
)
# One event of an ANY append, after the stream's last revision, only if the stream does not
# hold its id (parameters: stream, id, type, data, metadata, time, partition key); the row's
# position and revision back, none if the id is stored (the caller's slow path decides).
# Ids are looked up as find_ids_sql does (revision 0 by revision: the id index leaves it out).
_INSERT_NEW_ID = (
    "INSERT INTO events"
    " (stream, revision, event_id, type, data, metadata, recorded_at, partition_key)"
    " SELECT ?1, coalesce((SELECT revision FROM events WHERE stream = ?1"
    " ORDER BY revision DESC LIMIT 1), -1) + 1, ?2, ?3, ?4, ?5, ?6, ?7"
    " WHERE NOT EXISTS (SELECT 1 FROM events INDEXED BY events_by_stream_id"
    " WHERE stream = ?1 AND event_id = ?2 AND revision > 0)"
    " AND NOT EXISTS (SELECT 1 FROM events WHERE stream = ?1 AND revision = 0 AND event_id = ?2)"
)
INSERT_NEW_ID_ANY = _INSERT_NEW_ID + " RETURNING position, revision"
INSERT_NEW_ID_EXISTS = (
    _INSERT_NEW_ID + " AND EXISTS (SELECT 1 FROM events WHERE stream = ?1)"
    " RETURNING position, revision"
)
"""The same for an EXISTS append: only if the stream exists too."""
RANGE = (
    "SELECT event_id, revision, position FROM events"
    " WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?"
)
READ_STREAM = (
    f"SELECT {COLUMNS} FROM events WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?"
)
HEAD = "SELECT max(position) FROM events"
WRITTEN_BETWEEN = (
    "SELECT type, partition_key % ?, max(position) FROM events"
    " WHERE position > ? AND position <= ? GROUP BY 1, 2"
)
"""What was written after a position up to another, in brief: each type and partition (of
the count given; ``NULL``: no key) with its last position."""
GIST_LIMIT = 7900
"""The longest gist kept, in characters (a commit of many instances' keys); a longer one is kept
as ``''``, and a look sums that commit's rows up in the database (:data:`WRITTEN_BETWEEN`)."""
INSERT_GIST = "INSERT OR REPLACE INTO commit_gists (last, first, modulo, gist) VALUES (?, ?, ?, ?)"
PRUNE_GISTS = "DELETE FROM commit_gists WHERE last <= ?"
GISTS_SINCE = (
    "SELECT first, last, modulo, gist FROM commit_gists WHERE last > ?"
    " UNION ALL SELECT NULL, max(position), NULL, NULL FROM events"
)
"""The gists of the commits after a position, and the log's head (the row whose ``first`` is
``NULL``; its ``last`` is the head), in one read."""
LOAD_CHECKPOINT = "SELECT position FROM checkpoints WHERE name = ?"
SAVE_CHECKPOINT = (
    "INSERT INTO checkpoints (name, position) VALUES (?, ?)"
    " ON CONFLICT (name) DO UPDATE SET position = excluded.position"
)

Row = tuple[int, str, int, bytes, str, bytes, bytes, str, int | None]


@functools.lru_cache(maxsize=512)
def find_ids_sql(count: int) -> str:
    """The query for the stream's stored events among ``count`` ids.

    Parameters: the ``count`` ids, then the stream. Revision 0 is looked up by revision (the
    id index leaves it out). ``INDEXED BY``: without statistics SQLite would rather scan the
    whole stream through the (stream, revision) index.
    """
    ids = ", ".join(f"?{number}" for number in range(1, count + 1))
    stream = f"?{count + 1}"
    return (
        "SELECT event_id, revision, position FROM events INDEXED BY events_by_stream_id"
        f" WHERE stream = {stream} AND event_id IN ({ids}) AND revision > 0"
        " UNION ALL SELECT event_id, revision, position FROM events"
        f" WHERE stream = {stream} AND revision = 0 AND event_id IN ({ids})"
    )


@functools.lru_cache(maxsize=256)
def read_all_sql(filter: Filter) -> tuple[str, tuple[object, ...]]:
    """The read_all statement for ``filter`` and its filter parameters (after the position).

    Parameters: ``after_position``, then the returned ones, then ``limit``. No index serves the
    clauses: the read walks the rowid from its position and SQLite tests each row, so the test
    that drops most rows comes first (the partitions, then the types), and the system check is
    two comparisons of each text with the range of ``'$'``, not a function call.
    """
    clauses = ["position > ?"]
    params: list[object] = []
    if filter.partitions is not None:
        clauses.append(_partitions(filter.partitions))
    if filter.event_types or filter.event_type_prefixes:
        options = []
        if filter.event_types:
            options.append(f"type IN ({', '.join('?' * len(filter.event_types))})")
            params.extend(filter.event_types)
        if filter.event_type_prefixes:
            options.append(_prefixes("type", filter.event_type_prefixes, params))
        clauses.append("(" + " OR ".join(options) + ")")
    if filter.stream_prefixes:
        clauses.append(_prefixes("stream", filter.stream_prefixes, params))
    if not filter.include_system:
        # Not a system name: not in ['$', '%'), the texts that begin with '$' (binary order).
        clauses.append("NOT (stream >= '$' AND stream < '%') AND NOT (type >= '$' AND type < '%')")
    where = " AND ".join(clauses)
    return f"SELECT {COLUMNS} FROM events WHERE {where} ORDER BY position LIMIT ?", tuple(params)


def _prefixes(column: str, prefixes: tuple[str, ...], params: list[object]) -> str:
    """The clause that passes the texts of ``column`` that start with one of ``prefixes``:
    each a range of two comparisons (``p <= text < p'``, ``p'`` being ``p`` with its last
    character the next one: in the binary order of UTF-8, the texts in it are those that start
    with ``p``), not a call of ``substr`` on every row the read walks; ``substr`` where there is
    no next character (an empty prefix passes every text)."""
    parts = []
    for prefix in prefixes:
        after = _after_prefix(prefix)
        if after is None:
            parts.append(f"substr({column}, 1, ?) = ?")
            params.extend((len(prefix), prefix))
        else:
            parts.append(f"({column} >= ? AND {column} < ?)")
            params.extend((prefix, after))
    return "(" + " OR ".join(parts) + ")"


def _after_prefix(prefix: str) -> str | None:
    """The least text above every text that starts with ``prefix`` (in the binary order of
    UTF-8, which is the order of code points); ``None`` if there is none to write (an empty
    prefix, or a last character whose next one is a surrogate or past the last code point).

    >>> _after_prefix("Sent:")
    'Sent;'
    >>> _after_prefix("") is None and _after_prefix("a\ud7ff") is None
    True
    """
    if not prefix:
        return None
    following = ord(prefix[-1]) + 1
    if 0xD800 <= following <= 0xDFFF or following > 0x10FFFF:
        return None
    return prefix[:-1] + chr(following)


_UUID = uuid.UUID
_new = object.__new__
_set = object.__setattr__  # UUID objects are immutable: its own __init__ sets them this way
_SAFE_UNKNOWN = uuid.SafeUUID.unknown


def uuid_from_bytes(raw: bytes) -> uuid.UUID:
    """``uuid.UUID(bytes=raw)``, made without ``UUID.__init__``'s layers of checks (one for
    every event read); its ``ValueError`` where ``raw`` is not 16 bytes.

    >>> raw = bytes(range(16))
    >>> uuid_from_bytes(raw) == uuid.UUID(bytes=raw)
    True
    """
    if type(raw) is not bytes or len(raw) != 16:
        return uuid.UUID(bytes=raw)
    made = _new(_UUID)
    _set(made, "int", int.from_bytes(raw, "big"))
    _set(made, "is_safe", _SAFE_UNKNOWN)
    return made


def _partitions(partitions: Partitions) -> str:
    """The clause that passes the rows of ``partitions`` (and of unknown partition if
    ``partitions.unknown``). The
    numbers are ints checked by :class:`Partitions`, so they are written into the statement
    (one statement per holding, cached). No index serves it: the read walks the rowid from its
    position and the clause drops the other partitions' rows inside SQLite, never decoded."""
    if not partitions.held:
        return "partition_key IS NULL" if partitions.unknown else "0"
    held = ", ".join(str(n) for n in sorted(partitions.held))
    if not partitions.unknown:
        return f"partition_key % {partitions.count} IN ({held})"
    return f"(partition_key IS NULL OR partition_key % {partitions.count} IN ({held}))"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def decode_rows(rows: list[Row]) -> list[RecordedEvent]:
    """Stored rows as :class:`RecordedEvent` objects. The rows of one commit share their
    ``recorded_at``: each run of the same text is parsed once (the objects are immutable)."""
    decoded = []
    text: str | None = None
    when = _EPOCH
    for position, stream, revision, event_id, event_type, data, metadata, recorded_at, key in rows:
        if recorded_at != text:
            text, when = recorded_at, datetime.fromisoformat(recorded_at)
        decoded.append(
            RecordedEvent(
                id=uuid_from_bytes(event_id),
                type=event_type,
                data=data,
                metadata=metadata,
                stream=stream,
                revision=revision,
                position=position,
                recorded_at=when,
                partition_key=key,
            )
        )
    return decoded
