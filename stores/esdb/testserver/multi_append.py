"""KurrentDB's multi-stream atomic appends (the v2 ``AppendSession`` of 25.1, ``AppendRecords``
of 26.1) on the test server's log.

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

from decider.stores.esdb.testserver.log import (
    ANY,
    DELETED_STREAM,
    NO_STREAM,
    STREAM_EXISTS,
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


DELETED = -5
TOMBSTONED = -6
"""AppendRecords' expected (and actual) states beside the v1 ones: soft-deleted, tombstoned."""


@dataclass(frozen=True, slots=True)
class Check:
    """One ``StreamStateCheck`` of an ``AppendRecords`` call."""

    stream: str
    expected: int


@dataclass(frozen=True, slots=True)
class Violation:
    """A check that failed: its index among the call's streams and the stream's state."""

    index: int
    stream: str
    expected: int
    actual: int


class ChecksFailed(Exception):
    """``AppendRecords``' checks did not hold (every failed one is listed); nothing written."""

    def __init__(self, violations: Sequence[Violation]) -> None:
        self.violations = list(violations)
        super().__init__("Append failed due to consistency violations.")


@dataclass(frozen=True, slots=True)
class RecordsResult:
    """Each written stream's last revision (first-appearance order) and the commit position."""

    revisions: list[tuple[str, int]]
    position: int


def append_records(
    log: EventLog,
    records: Sequence[tuple[str, Proposed]],
    checks: Sequence[Check],
    proceed: Callable[[], bool] = lambda: True,
) -> RecordsResult:
    """KurrentDB 26.1's ``AppendRecords``: write ``records`` (each naming its stream, in this
    order in the log) atomically once every check holds, or nothing.

    The server's streams are the checked ones in the checks' order, then the streams written
    without a check (expected: any). Each is checked as v1 checks an append, with the ids of
    the records written to it; a check of a stream not written only compares its state
    (a revision, missing, exists, deleted or tombstoned). Raises :class:`ChecksFailed` with
    every violation; if every written stream holds its records already, the original
    revisions and position are returned and nothing is written, whatever the checks of the
    streams not written say (a mix is a violation of each stream already written);
    :class:`TooLarge` past :data:`MAX_APPEND_SIZE`; :class:`Expired` when ``proceed()`` is
    false before the write.
    """
    size = sum(len(e.data) + len(e.metadata) + len(e.type) for _, e in records)
    if size > MAX_APPEND_SIZE:
        raise TooLarge(f"Append transaction size {size} exceeds {MAX_APPEND_SIZE}.")
    written: dict[str, list[Proposed]] = {}
    for stream, event in records:
        written.setdefault(stream, []).append(event)
    expected = {check.stream: check.expected for check in checks}
    order = [check.stream for check in checks]
    order += [stream for stream in written if stream not in expected]
    with log.changed:
        outcomes, violations = _check_all(log, order, expected, written)
        idempotent = [stream for stream, outcome in outcomes.items() if outcome[0]]
        # a retry: every written stream holds its records (a failed check of a stream only
        # checked does not matter, as in KurrentDB: the reply must be the original one)
        if len(idempotent) == len(written):
            revisions = [(stream, outcomes[stream][2]) for stream in written]
            position = max(
                log.streams[stream].records[revision].position for stream, revision in revisions
            )
            return RecordsResult(revisions, position)
        for stream in idempotent:
            wanted = expected.get(stream, ANY)
            violations.append(
                Violation(order.index(stream), stream, wanted, _state(log, stream, wanted))
            )
        if violations:
            raise ChecksFailed(sorted(violations, key=lambda v: v.index))
        if not proceed():
            raise Expired()
        return _write(log, records, outcomes)


def _check_all(
    log: EventLog, order: list[str], expected: dict[str, int], written: dict[str, list[Proposed]]
) -> tuple[dict[str, tuple[bool, bool, int]], list[Violation]]:
    """Each written stream's v1 check (idempotent, soft-deleted, revision), and every
    violation, in the order of the server's streams. Call under the lock."""
    violations: list[Violation] = []
    outcomes: dict[str, tuple[bool, bool, int]] = {}
    for index, stream in enumerate(order):
        wanted = expected.get(stream, ANY)
        events = written.get(stream)
        failed = Violation(index, stream, wanted, _state(log, stream, wanted))
        if events is None:
            if not _holds(log, stream, wanted):
                violations.append(failed)
            continue
        if wanted == TOMBSTONED:  # nothing is written to a stream expected tombstoned
            violations.append(failed)
            continue
        try:
            # DELETED checks as ANY does (a retry is idempotent), then wants it soft-deleted
            outcome = log.check(
                stream, ANY if wanted == DELETED else wanted, [e.id for e in events]
            )
        except (WrongVersion, Deleted):
            violations.append(failed)
            continue
        idempotent, soft_deleted, _ = outcome
        if wanted == DELETED and not idempotent and not soft_deleted:
            violations.append(failed)
            continue
        outcomes[stream] = outcome
    return outcomes, violations


def _write(
    log: EventLog,
    records: Sequence[tuple[str, Proposed]],
    outcomes: dict[str, tuple[bool, bool, int]],
) -> RecordsResult:
    """Write ``records`` in their order, one run of a stream's consecutive records at a time,
    as one commit. Call under the lock."""
    new: list[Record] = []
    last = {stream: outcome[2] for stream, outcome in outcomes.items()}
    soft_deleted = {stream for stream, outcome in outcomes.items() if outcome[1]}
    results: dict[str, WriteResult] = {}
    start = 0
    while start < len(records):
        stream = records[start][0]
        end = start
        while end < len(records) and records[end][0] == stream:
            end += 1
        events = [event for _, event in records[start:end]]
        made, result = log.new_records(stream, events, stream in soft_deleted, last[stream])
        soft_deleted.discard(stream)  # undeleted by its first run
        last[stream] = result.current_revision or 0
        results[stream] = result
        new += made
        start = end
    log.commit(new)
    return RecordsResult(
        [(stream, result.current_revision or 0) for stream, result in results.items()],
        max(r.position or 0 for r in results.values()),
    )


def _state(log: EventLog, stream: str, expected: int) -> int:
    """A stream's state as a failed check reports it (KurrentDB 26.1): tombstoned; deleted
    only when it is soft-deleted and was expected to exist; else its last revision (a
    soft-deleted stream's too), -1 if it has none."""
    index = log.stream(stream)
    if index is not None and index.tombstoned:
        return TOMBSTONED
    if expected == STREAM_EXISTS and index is not None and index.meta.get("$tb") == DELETED_STREAM:
        return DELETED
    if index is None or not index.records:
        return NO_STREAM
    return len(index.records) - 1


def _holds(log: EventLog, stream: str, expected: int) -> bool:
    """Whether a check of a stream not written holds: KurrentDB's check of a write with no
    events, where a tombstoned or soft-deleted stream counts as no stream and a soft-deleted
    one also as its last revision."""
    index = log.stream(stream)
    if index is not None and index.tombstoned:
        return expected in (ANY, NO_STREAM, TOMBSTONED)
    soft_deleted = index is not None and index.meta.get("$tb") == DELETED_STREAM
    last = len(index.records) - 1 if index is not None else NO_STREAM
    if expected == ANY:
        return True
    if expected == NO_STREAM:
        return last == NO_STREAM or soft_deleted
    if expected == STREAM_EXISTS:
        return last >= 0 and not soft_deleted
    if expected == DELETED:
        return soft_deleted
    return expected == last
