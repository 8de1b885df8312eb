"""KurrentDB's multi-stream atomic append (the v2 ``AppendSession``) on the test server's log.

Semantics of KurrentDB 25.1+ (``StorageWriterService`` multi-stream writes): every stream's
expected-revision check runs first, each the v1 check with that stream's own event ids; if any
fails, nothing is written. On success every record goes into the log as one contiguous write,
in request order. Idempotency is v1's, per stream: if *every* stream's events are already
stored, the reply is success with the original revisions and nothing is written; a mix is a
failure, reported on the first already-written stream as a revision conflict (26.1's answer;
25.1 answered a server error there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from decider.stores.esdb_testserver.log import (
    NO_STREAM,
    Deleted,
    EventLog,
    Expired,
    Proposed,
    Record,
    TooLarge,
    WriteResult,
    WrongVersion,
)

MAX_APPEND_SIZE = 256 * 1024 * 1024
"""KurrentDB 25.1's default ``MaxAppendSize`` for one session (the chunk size)."""


@dataclass(frozen=True, slots=True)
class StreamPart:
    """One stream's part of a multi-stream append."""

    stream: str
    expected: int
    events: Sequence[Proposed]


@dataclass(frozen=True, slots=True)
class SessionResult:
    """Each part's last revision (in request order) and the session's commit position."""

    revisions: list[int]
    position: int


def append_session(
    log: EventLog, parts: Sequence[StreamPart], proceed: Callable[[], bool] = lambda: True
) -> SessionResult:
    """Write every part atomically, or nothing.

    Raises :class:`Deleted` (naming the first failed stream) when a failed stream is tombstoned
    or soft-deleted and expected to exist, else :class:`WrongVersion` for the first failed
    stream (its ``current`` is the stream's last revision, -1 if none); :class:`TooLarge` past
    :data:`MAX_APPEND_SIZE`; :class:`Expired` when ``proceed()`` is false before the write.
    """
    size = sum(len(e.data) + len(e.metadata) + len(e.type) for p in parts for e in p.events)
    if size > MAX_APPEND_SIZE:
        raise TooLarge(f"Append transaction size {size} exceeds {MAX_APPEND_SIZE}.")
    with log.changed:
        checks: list[tuple[bool, bool, int]] = []
        failures: list[WrongVersion | Deleted] = []
        for part in parts:
            try:
                checks.append(log.check(part.stream, part.expected, [e.id for e in part.events]))
            except (WrongVersion, Deleted) as failure:
                failures.append(failure)
        if failures:
            if any(isinstance(f, Deleted) for f in failures):
                raise Deleted(failures[0].stream)
            first = failures[0]
            assert isinstance(first, WrongVersion)
            raise WrongVersion(first.stream, first.expected, _last(log, first.stream))
        idempotent = [c[0] for c in checks]
        if all(idempotent):
            # every part is stored already: the original revisions and position
            revisions = [revision for _, _, revision in checks]
            positions = [
                log.streams[part.stream].records[revision].position
                for part, revision in zip(parts, revisions, strict=True)
            ]
            return SessionResult(revisions=revisions, position=max(positions))
        if any(idempotent):
            part = parts[idempotent.index(True)]
            raise WrongVersion(part.stream, part.expected, _last(log, part.stream))
        if not proceed():
            raise Expired()
        new: list[Record] = []
        results: list[WriteResult] = []
        for part, (_, soft_deleted, last) in zip(parts, checks, strict=True):
            records, result = log.new_records(part.stream, part.events, soft_deleted, last)
            new += records
            results.append(result)
        log.commit(new)
        return SessionResult(
            revisions=[r.current_revision or 0 for r in results],
            position=max(r.position or 0 for r in results),
        )


def _last(log: EventLog, stream: str) -> int:
    index = log.stream(stream)
    if index is None or not index.records:
        return NO_STREAM
    return len(index.records) - 1
