"""The test server's engine: one global log, per-stream indexes, EventStoreDB's write rules.

Everything here is plain Python with no gRPC: the servicers translate requests into calls on
:class:`EventLog` and its results (or exceptions) back into protobuf messages.

The write rules are a port of EventStoreDB's ``IndexWriter.CheckCommit`` (v24.10): the
expected-version check, idempotent re-appends (by event id for ``ANY``/``STREAM_EXISTS``, by
position for exact revisions and ``NO_STREAM``), soft deletion (metadata ``$tb``) with
"undelete" on the next write, and tombstones. Positions are byte-offset-like: strictly
increasing per record, with gaps, and commit position equals prepare position.
"""

from __future__ import annotations

import enum
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

ANY = -2
NO_STREAM = -1
STREAM_EXISTS = -4
DELETED_STREAM = 2**63 - 1
"""EventStoreDB's expected-version constants, and the revision of a tombstone record."""

MAX_APPEND_SIZE = 1024 * 1024
"""EventStoreDB's default maximum size of one append (data plus metadata of its events)."""

_RECORD_OVERHEAD = 96  # makes positions look like byte offsets: gaps between records


def _ticks_now() -> int:
    """.NET ticks (100 ns) since the Unix epoch, EventStoreDB's ``created`` metadata."""
    return time.time_ns() // 100


@dataclass(frozen=True, slots=True)
class Proposed:
    """An event a client proposes to write."""

    id: str
    type: str
    content_type: str
    data: bytes
    metadata: bytes


@dataclass(slots=True, eq=False)
class Record:
    """One event of the log. ``revision`` is ``DELETED_STREAM`` for a tombstone."""

    position: int
    stream: str
    revision: int
    id: str
    type: str
    content_type: str
    data: bytes
    metadata: bytes
    created: int
    # The servicer caches the record's protobuf form here: building it is the main cost of a read.
    wire: Any = field(default=None, repr=False)


class StreamIndex:
    """One stream's events by revision, and the revisions of its event ids."""

    __slots__ = ("ids", "meta", "records", "tombstoned")

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.ids: dict[str, int] = {}
        self.tombstoned = False
        self.meta: dict[str, Any] = {}  # the parsed last event of "$$<stream>"

    @property
    def last(self) -> int:
        """The last revision, ``NO_STREAM`` if empty, ``DELETED_STREAM`` if tombstoned."""
        return DELETED_STREAM if self.tombstoned else len(self.records) - 1


class WrongVersion(Exception):
    """The expected-version check failed; ``current`` is the stream's last revision (-1: none)."""

    def __init__(self, stream: str, expected: int, current: int) -> None:
        self.stream = stream
        self.expected = expected
        self.current = current
        super().__init__(f"stream {stream!r}: expected {expected}, current {current}")


class Deleted(Exception):
    """The stream is tombstoned (or soft-deleted, for a ``STREAM_EXISTS`` check)."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        super().__init__(f"Event stream '{stream}' is deleted.")


class TooLarge(Exception):
    """The append is larger than :data:`MAX_APPEND_SIZE`."""


class Expired(Exception):
    """The caller's deadline passed before the write: nothing was written."""


@dataclass(frozen=True, slots=True)
class WriteResult:
    """A successful (or idempotent) write: last revision and position, ``None`` if nothing."""

    current_revision: int | None
    position: int | None


class _Decision(enum.Enum):
    OK = "ok"
    IDEMPOTENT = "idempotent"


def metastream_of(stream: str) -> str:
    """The name of a stream's metadata stream."""
    return "$$" + stream


def _parse_meta(data: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(data)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


class EventLog:
    """The global log with EventStoreDB's append, delete and tombstone semantics.

    Thread-safe: one lock guards the log; :attr:`changed` (a condition on that lock) is
    notified after every write and on :meth:`close`, so readers wait without polling.
    ``sink`` receives every batch of new records (under the lock, in log order): the file
    persistence hook.
    """

    def __init__(
        self,
        sink: Callable[[Sequence[Record]], None] | None = None,
        max_append_size: int = MAX_APPEND_SIZE,
    ) -> None:
        self.changed = threading.Condition(threading.Lock())
        self.records: list[Record] = []
        self.positions: list[int] = []
        self.streams: dict[str, StreamIndex] = {}
        self.by_type: dict[str, list[int]] = {}
        self.by_stream: dict[str, list[int]] = {}
        """Indexes into :attr:`records` per event type and per stream (tombstones included), in
        log order: a filtered ``$all`` read visits the names its filter passes, not every
        record (the answer is the same; only a real node's scan is slower)."""
        self.closed = False
        self.subscriptions = 0
        """How many subscription calls are running (they end promptly once cancelled)."""
        self._sink = sink
        self._next_position = 0
        self.max_append_size = max_append_size

    # ----------------------------------------------------------------------------- loading

    def load(self, records: Iterable[Record]) -> None:
        """Index records read back from a file (positions must increase); no sink call."""
        with self.changed:
            for record in records:
                if self.positions and record.position <= self.positions[-1]:
                    raise ValueError(f"position {record.position} does not increase the log")
                self._publish([record])

    def add_system_events(self) -> None:
        """Write what a starting EventStoreDB node writes: an epoch and settings, all ``$``."""
        node = uuid.uuid4().hex
        epoch = json.dumps({"epochNumber": len(self.records), "leaderInstanceId": node}).encode()
        with self.changed:
            self._commit(
                [
                    self._new("$epoch-information", None, "$epoch-information", epoch),
                    self._new(
                        metastream_of("$scavenges"), None, "$metadata", b'{"$maxAge":2592000}'
                    ),
                    self._new("$settings", None, "$update-default-acl", b'{"$userStreamAcl":{}}'),
                ]
            )

    # ------------------------------------------------------------------------------ writes

    def append(
        self,
        stream: str,
        expected: int,
        events: Sequence[Proposed],
        proceed: Callable[[], bool] = lambda: True,
    ) -> WriteResult:
        """Append ``events`` if ``expected`` holds; idempotent re-appends write nothing.

        Raises :class:`WrongVersion`, :class:`Deleted`, :class:`TooLarge`, or
        :class:`Expired` when ``proceed()`` is false just before the write.
        """
        size = sum(len(e.data) + len(e.metadata) for e in events)
        if size > self.max_append_size:
            raise TooLarge(f"Maximum Append Size of {self.max_append_size} Exceeded.")
        with self.changed:
            decision, soft_deleted, last = self._check(stream, expected, [e.id for e in events])
            if not proceed():
                raise Expired()
            index = self.streams.get(stream)
            if decision is _Decision.IDEMPOTENT:
                assert index is not None
                return WriteResult(last, index.records[last].position)
            if not events:
                return WriteResult(None if last < 0 else last, None)
            new, result = self.new_records(stream, events, soft_deleted, last)
            self._commit(new)
            return result

    def new_records(
        self, stream: str, events: Sequence[Proposed], soft_deleted: bool, last: int
    ) -> tuple[list[Record], WriteResult]:
        """The records that write ``events`` after revision ``last`` (with the metadata record
        that undeletes a soft-deleted stream), positioned but not committed: call under the
        lock, then :meth:`commit` them."""
        first_revision = last + 1
        new = [
            Record(
                self._take_position(stream, e.type, len(e.data) + len(e.metadata)),
                stream,
                first_revision + i,
                e.id,
                e.type,
                e.content_type,
                e.data,
                e.metadata,
                _ticks_now(),
            )
            for i, e in enumerate(events)
        ]
        result = WriteResult(new[-1].revision, new[-1].position)
        return new + self._undelete_records(stream, soft_deleted, first_revision, events), result

    def check(self, stream: str, expected: int, ids: Sequence[str]) -> tuple[bool, bool, int]:
        """The expected-version check of :meth:`append` without writing: (idempotent,
        soft-deleted, revision) or raises :class:`WrongVersion` / :class:`Deleted`. The
        revision is the stream's last for a write, the last matched one if idempotent. Call
        under the lock."""
        decision, soft_deleted, revision = self._check(stream, expected, ids)
        return decision is _Decision.IDEMPOTENT, soft_deleted, revision

    def commit(self, new: list[Record]) -> None:
        """Publish records made by :meth:`new_records` as one atomic write. Call under the lock."""
        self._commit(new)

    def delete(self, stream: str, expected: int, proceed: Callable[[], bool]) -> int:
        """Soft-delete: set ``$tb`` to "deleted" in the stream's metadata; returns its position.

        A stream with neither events nor metadata raises :class:`WrongVersion` (current -1),
        which EventStoreDB clients report as "not found".
        """
        with self.changed:
            self._check(stream, expected, [str(uuid.uuid4())])
            index = self.streams.get(stream)
            meta_index = self.streams.get(metastream_of(stream))
            if (index is None or not index.records) and (
                meta_index is None or not meta_index.records
            ):
                raise WrongVersion(stream, expected, NO_STREAM)
            if not proceed():
                raise Expired()
            meta_last = meta_index.last if meta_index else NO_STREAM
            data = json.dumps({"$tb": DELETED_STREAM}).encode()
            record = self._new(metastream_of(stream), meta_last + 1, "$metadata", data)
            self._commit([record])
            return record.position

    def tombstone(self, stream: str, expected: int, proceed: Callable[[], bool]) -> int:
        """Hard-delete: write ``$streamDeleted``; the stream can never be used again."""
        with self.changed:
            self._check(stream, expected, [str(uuid.uuid4())])
            if not proceed():
                raise Expired()
            record = self._new(stream, DELETED_STREAM, "$streamDeleted", b"")
            self._commit([record])
            return record.position

    def close(self) -> None:
        """Wake every waiting reader for good."""
        with self.changed:
            self.closed = True
            self.changed.notify_all()

    # ------------------------------------------------------------------------------ reads

    def stream(self, name: str) -> StreamIndex | None:
        """The stream's index, ``None`` if it was never written. Call under the lock."""
        return self.streams.get(name)

    def is_tombstoned(self, name: str) -> bool:
        """Whether reads of ``name`` fail as deleted (it, or the stream it is metadata of)."""
        index = self.streams.get(name)
        if index is not None and index.tombstoned:
            return True
        if name.startswith("$$"):
            owner = self.streams.get(name[2:])
            return owner is not None and owner.tombstoned
        return False

    def visible_from(self, name: str) -> int | None:
        """The first revision a stream read may return, ``None`` when the stream reads as
        missing (never written, or soft-deleted). Applies ``$tb``, ``$maxCount``, ``$maxAge``.
        Call under the lock."""
        index = self.streams.get(name)
        if index is None or not index.records:
            return None
        meta = index.meta
        truncate_before = meta.get("$tb")
        if truncate_before == DELETED_STREAM:
            return None
        start = truncate_before if isinstance(truncate_before, int) else 0
        max_count = meta.get("$maxCount")
        if name.startswith("$$") and not isinstance(max_count, int):
            max_count = 1  # EventStoreDB keeps one event of a metadata stream by default
        if isinstance(max_count, int) and max_count > 0:
            start = max(start, len(index.records) - max_count)
        max_age = meta.get("$maxAge")
        if isinstance(max_age, int) and max_age > 0:
            oldest = _ticks_now() - max_age * 10_000_000
            while start < len(index.records) and index.records[start].created < oldest:
                start += 1
        return max(start, 0)

    # --------------------------------------------------------------------------- internals

    def _check(self, stream: str, expected: int, ids: Sequence[str]) -> tuple[_Decision, bool, int]:
        """Port of ``IndexWriter.CheckCommit``: (decision, soft-deleted, revision) or raises.

        The revision is the stream's last one for OK, the last matched one for IDEMPOTENT.
        """
        index = self.streams.get(stream)
        if index is None or (not index.records and not index.tombstoned):
            if expected in (ANY, NO_STREAM):
                # metadata may exist (and say "deleted") before the stream's first event
                soft_deleted = index is not None and index.meta.get("$tb") == DELETED_STREAM
                return _Decision.OK, soft_deleted, NO_STREAM
            raise WrongVersion(stream, expected, NO_STREAM)
        if index.tombstoned:
            raise Deleted(stream)
        current = index.last
        soft_deleted = index.meta.get("$tb") == DELETED_STREAM
        if expected == STREAM_EXISTS and soft_deleted:
            raise Deleted(stream)
        if expected in (ANY, STREAM_EXISTS):
            matched: int | None = None
            for event_id in ids:
                revision = index.ids.get(event_id)
                if revision is None:
                    if matched is None:
                        return _Decision.OK, soft_deleted, current
                    raise WrongVersion(stream, expected, current)  # partial overlap
                matched = revision
            if matched is None:
                return _Decision.OK, soft_deleted, current
            return _Decision.IDEMPOTENT, soft_deleted, matched
        if expected < current:
            revision = expected
            for n, event_id in enumerate(ids):
                revision += 1
                if revision <= current and index.records[revision].id == event_id:
                    continue
                if n == 0 and expected == NO_STREAM and soft_deleted:
                    return _Decision.OK, True, current
                raise WrongVersion(stream, expected, current)
            if not ids:
                raise WrongVersion(stream, expected, current)
            return _Decision.IDEMPOTENT, soft_deleted, revision
        if expected > current:
            raise WrongVersion(stream, expected, current)
        return _Decision.OK, soft_deleted, current

    def _undelete_records(
        self, stream: str, soft_deleted: bool, first_revision: int, events: Sequence[Proposed]
    ) -> list[Record]:
        """The ``$metadata`` records that bring a soft-deleted stream back to life.

        Writing to a soft-deleted stream keeps its old events hidden (``$tb`` = the first new
        revision); writing metadata to a soft-deleted stream's metastream does the same.
        """
        if soft_deleted:
            index = self.streams.get(stream)
            meta = dict(index.meta) if index else {}
            meta["$tb"] = first_revision
            return [self._metadata_record(stream, meta, 0)]
        if stream.startswith("$$") and events:
            owner_name = stream[2:]
            owner = self.streams.get(owner_name)
            new_meta = _parse_meta(events[-1].data)
            if (
                owner is not None
                and not owner.tombstoned
                and owner.meta.get("$tb") == DELETED_STREAM
                and new_meta.get("$tb") != DELETED_STREAM
            ):
                new_meta["$tb"] = len(owner.records)
                return [self._metadata_record(owner_name, new_meta, len(events))]
        return []

    def _metadata_record(self, owner: str, meta: dict[str, Any], pending: int) -> Record:
        """A ``$metadata`` record for ``owner``; ``pending`` events of this commit already go
        to the metastream (they are not indexed yet)."""
        name = metastream_of(owner)
        index = self.streams.get(name)
        revision = (index.last if index else NO_STREAM) + 1 + pending
        return self._new(name, revision, "$metadata", json.dumps(meta).encode())

    def resolve_link(self, link: Record) -> Record | None:
        """The event a ``$>`` link (data ``"<revision>@<stream>"``) points to, if readable."""
        with self.changed:
            return self.resolve_link_locked(link)

    def resolve_link_locked(self, link: Record) -> Record | None:
        """:meth:`resolve_link` for a caller that holds the lock."""
        revision_text, _, target = link.data.decode("utf-8", "replace").partition("@")
        index = self.streams.get(target)
        start = self.visible_from(target)
        if index is None or index.tombstoned or start is None or not revision_text.isdigit():
            return None
        revision = int(revision_text)
        return index.records[revision] if start <= revision < len(index.records) else None

    def _new(self, stream: str, revision: int | None, event_type: str, data: bytes) -> Record:
        index = self.streams.get(stream)
        if revision is None:
            revision = (index.last if index else NO_STREAM) + 1
        return Record(
            self._take_position(stream, event_type, len(data)),
            stream,
            revision,
            str(uuid.uuid4()),
            event_type,
            "application/json",
            data,
            b"",
            _ticks_now(),
        )

    def _take_position(self, stream: str, event_type: str, size: int) -> int:
        position = self._next_position
        self._next_position += _RECORD_OVERHEAD + len(stream) + len(event_type) + size
        return position

    def _commit(self, new: list[Record]) -> None:
        self._publish(new)
        if self._sink is not None:
            self._sink(new)
        self.changed.notify_all()

    def _publish(self, new: Sequence[Record]) -> None:
        """Index ``new`` records; each list grows by one ``extend``, so a lock-free reader sees
        a commit whole or not at all (streams first, then the global log)."""
        by_stream: dict[str, list[Record]] = {}
        for record in new:
            by_stream.setdefault(record.stream, []).append(record)
        for name, records in by_stream.items():
            index = self.streams.get(name)
            if index is None:
                index = self.streams[name] = StreamIndex()
            events = [r for r in records if r.revision != DELETED_STREAM]
            for record in events:
                index.ids[record.id] = record.revision
            index.records.extend(events)
            if len(events) < len(records):
                index.tombstoned = True
            if name.startswith("$$") and events:  # a metastream's last event is the metadata
                owner = self.streams.get(name[2:])
                if owner is None:
                    owner = self.streams[name[2:]] = StreamIndex()
                owner.meta = _parse_meta(events[-1].data)
        # positions before records: a reader bounded by len(records) finds every position
        self.positions.extend(r.position for r in new)
        base = len(self.records)
        self.records.extend(new)
        for offset, record in enumerate(new):
            self.by_type.setdefault(record.type, []).append(base + offset)
            self.by_stream.setdefault(record.stream, []).append(base + offset)
        last = new[-1]
        self._next_position = max(
            self._next_position,
            last.position
            + _RECORD_OVERHEAD
            + len(last.stream)
            + len(last.type)
            + len(last.data)
            + len(last.metadata),
        )
