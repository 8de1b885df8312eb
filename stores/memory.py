"""The in-memory event store: the reference implementation of the protocol.

Its behaviour is the specification the other stores are compared with (the contract suite's
stateful test drives a store and a :class:`MemoryEventStore` with the same operations).
"""

from __future__ import annotations

import bisect
import threading
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import attrs

from decider.stores._expectations import Stored, check_read_args, plan_append, validate_append
from decider.stores._snapshots import replaces
from decider.stores.errors import StoreError
from decider.stores.leases import (
    Lease,
    LeaseLost,
    batch_checkpoints,
    batch_leases,
    check_ttl,
    claimed,
    holds,
)
from decider.stores.names import CHECKPOINT, DEFAULT, NameRules
from decider.stores.protocol import (
    ALL,
    ANY,
    NO_STREAM,
    AppendResult,
    ExpectedRevision,
    Filter,
    NewEvent,
    RecordedEvent,
    Snapshot,
    StreamAppend,
)
from decider.stores.subscription import CatchUpSubscription, LogNotifier, written_by, written_to


class MemoryEventStore:
    """A thread-safe event store held in a process's memory.

    Implements :class:`~decider.stores.protocol.EventStore`,
    :class:`~decider.stores.protocol.CheckpointStore`,
    :class:`~decider.stores.protocol.TransactionalStore`,
    :class:`~decider.stores.leases.LeaseStore` (leases of this process only),
    :class:`~decider.stores.protocol.SnapshotStore` and
    :class:`~decider.stores.protocol.IdLookupStore`. Appends are atomic and serialised by one
    lock; positions start at 1 and increase by one per event. Subscriptions wake on every
    append (no polling).

    WARNING: nothing is durable; the log lives as long as the object.
    """

    keeps_partition_keys: ClassVar[bool] = True
    """Each event's partition key is kept and filtered by
    (:class:`~decider.stores.protocol.KeyedStore`)."""

    name_rules: ClassVar[NameRules] = DEFAULT
    """The names this store holds (:mod:`decider.stores.names`); others raise
    :class:`~decider.stores.errors.InvalidName` before anything is written or read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._log: list[RecordedEvent] = []
        self._streams: dict[str, list[RecordedEvent]] = {}
        self._ids: dict[str, dict[uuid.UUID, RecordedEvent]] = {}
        self._checkpoints: dict[str, int] = {}
        self._leases: dict[str, Lease] = {}
        self._snapshots: dict[str, Snapshot] = {}
        self._notifier = LogNotifier()
        self._closed = False

    def append(
        self, stream: str, events: Sequence[NewEvent], expected_revision: ExpectedRevision
    ) -> AppendResult:
        """Append ``events`` atomically if the stream is at ``expected_revision``.

        Raises :class:`~decider.stores.errors.WrongExpectedVersion`, writing nothing, on a mismatch;
        re-appending stored ids with the same expectation returns the stored result.
        """
        validate_append(len(events), expected_revision)
        self.name_rules.check_append(stream, events)
        with self._lock:
            self._check_open()
            result = self._append_locked(stream, events, expected_revision)
        self._notifier.notify(written_to(stream, events))
        return result

    def append_batch(
        self,
        appends: Sequence[StreamAppend],
        *,
        checkpoints: Sequence[tuple[str, int]] = (),
        leases: Sequence[Lease] = (),
    ) -> list[AppendResult]:
        """Apply every append and every checkpoint atomically: all of them, or none; with
        ``leases``, only while every one is still held (else
        :class:`~decider.stores.leases.LeaseLost` naming the first lost)."""
        saved = batch_checkpoints(checkpoints)
        fences = batch_leases(leases)
        for item in appends:
            validate_append(len(item.events), item.expected_revision)
            self.name_rules.check_append(item.stream, item.events)
        for name, _ in saved:
            self.name_rules.check(CHECKPOINT, name)
        with self._lock:
            self._check_open()
            for fence in fences:
                if not holds(current := self._leases.get(fence.partition), fence):
                    raise LeaseLost(fence, current)
            log_length = len(self._log)
            results: list[AppendResult] = []
            now = datetime.now(UTC)  # one commit: one time for all of its events
            try:
                for item in appends:
                    results.append(
                        self._append_locked(item.stream, item.events, item.expected_revision, now)
                    )
            except BaseException:
                self._undo(log_length)
                raise
            for name, position in saved:
                self._checkpoints[name] = position
        self._notifier.notify(written_by(appends))
        return results

    def claim_lease(self, partition: str, owner: str, ttl: float) -> Lease | None:
        """Take the lease on ``partition`` for ``ttl`` seconds (see
        :class:`~decider.stores.leases.LeaseStore`); ``None`` if another owner holds it."""
        check_ttl(ttl)
        with self._lock:
            self._check_open()
            granted = claimed(self._leases.get(partition), partition, owner, ttl, _clock())
            if granted is not None:
                self._leases[partition] = granted
            return granted

    def renew_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend ``lease`` by ``ttl`` seconds from now; ``LeaseLost`` if no longer held."""
        check_ttl(ttl)
        with self._lock:
            self._check_open()
            current = self._leases.get(lease.partition)
            if not holds(current, lease):
                raise LeaseLost(lease, current)
            renewed = attrs.evolve(lease, expires_at=_clock() + timedelta(seconds=ttl))
            self._leases[lease.partition] = renewed
            return renewed

    def release_lease(self, lease: Lease) -> bool:
        """Free the partition at once; whether ``lease`` was still held."""
        with self._lock:
            self._check_open()
            if not holds(self._leases.get(lease.partition), lease):
                return False
            self._leases[lease.partition] = attrs.evolve(
                lease, owner=None, expires_at=datetime.min.replace(tzinfo=UTC)
            )
            return True

    def leases(self) -> list[Lease]:
        """Every partition's lease, ordered by partition."""
        with self._lock:
            self._check_open()
            return [self._leases[p] for p in sorted(self._leases)]

    def read_stream(
        self, stream: str, from_revision: int = 0, limit: int | None = None
    ) -> list[RecordedEvent]:
        """The stream's events from ``from_revision`` on; ``[]`` for a missing stream."""
        check_read_args(from_revision, limit)
        self.name_rules.check_stream(stream)
        with self._lock:
            self._check_open()
            events = self._streams.get(stream, [])
            end = None if limit is None else from_revision + limit
            return events[from_revision:end]

    def read_all(
        self,
        after_position: int | None = None,
        limit: int | None = None,
        filter: Filter = ALL,
    ) -> list[RecordedEvent]:
        """Events after ``after_position`` (exclusive) that pass ``filter``, in log order."""
        check_read_args(0, limit)
        with self._lock:
            self._check_open()
            start = 0
            if after_position is not None:
                start = bisect.bisect_right(self._log, after_position, key=lambda e: e.position)
            # By index (Filter.select): islice(log, start) would step through the first
            # ``start`` events on every call, a cost that grew with the log on every page a
            # subscription read.
            return filter.select(self._log, start, limit)

    def subscribe(
        self, after_position: int | None = None, filter: Filter = ALL
    ) -> CatchUpSubscription:
        """A catch-up subscription after ``after_position``, woken by every append."""
        self._check_open()
        return CatchUpSubscription(
            read_page=lambda after, limit: self.read_all(after, limit, filter),
            head=self._head,
            notifier=self._notifier,
            after_position=after_position,
            filter=filter,
        )

    def load_checkpoint(self, name: str) -> int | None:
        """The last stored position of processor ``name``, or ``None``."""
        self.name_rules.check(CHECKPOINT, name)
        with self._lock:
            self._check_open()
            return self._checkpoints.get(name)

    def save_checkpoint(self, name: str, position: int) -> None:
        """Store the position of processor ``name``, replacing any earlier one."""
        self.name_rules.check(CHECKPOINT, name)
        with self._lock:
            self._check_open()
            self._checkpoints[name] = position

    def load_snapshot(self, stream: str) -> Snapshot | None:
        """The stored snapshot of ``stream``, or ``None``."""
        self.name_rules.check_stream(stream)
        with self._lock:
            self._check_open()
            return self._snapshots.get(stream)

    def stored_ids(self, stream: str, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Those of ``ids`` that ``stream`` holds."""
        self.name_rules.check_stream(stream)
        with self._lock:
            self._check_open()
            by_id = self._ids.get(stream, {})
            return {i for i in ids if i in by_id}

    def save_snapshot(self, stream: str, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` unless the stored one is of its state version and later."""
        self.name_rules.check_stream(stream)
        with self._lock:
            self._check_open()
            stored = self._snapshots.get(stream)
            if stored is None or replaces(snapshot, stored):
                self._snapshots[stream] = snapshot

    def close(self) -> None:
        """Wake every subscription so it ends; later calls raise :class:`StoreError`."""
        self._notifier.close()
        with self._lock:
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the memory event store is closed")

    def _head(self) -> int | None:
        with self._lock:
            return self._log[-1].position if self._log else None

    def _append_locked(
        self,
        stream: str,
        events: Sequence[NewEvent],
        expected: ExpectedRevision,
        now: datetime | None = None,
    ) -> AppendResult:
        stored = self._streams.get(stream)
        last = stored[-1].revision if stored else None
        # The common append needs no plan: an exact revision (or NO_STREAM) that is the
        # stream's, or ANY on a stream that does not exist yet. Anything else may be a
        # re-append of stored events, or a conflict: plan_append tells which.
        if expected is ANY or expected is NO_STREAM:
            writes = last is None
        else:
            writes = type(expected) is int and expected == last
        if not writes:
            already = self._plan(stream, events, expected, last)
            if already is not None:
                return already
        if now is None:
            now = datetime.now(UTC)
        log = self._log
        next_position = log[-1].position + 1 if log else 1
        revision = -1 if last is None else last
        if stored is None:
            stored = self._streams[stream] = []
            stream_ids = self._ids[stream] = {}
        else:
            stream_ids = self._ids[stream]
        for offset, event in enumerate(events, start=1):
            recorded = RecordedEvent(
                event.id,
                event.type,
                event.data,
                event.metadata,
                stream,
                revision + offset,
                next_position + offset - 1,
                now,
                partition_key=event.partition_key,
            )
            log.append(recorded)
            stored.append(recorded)
            stream_ids[event.id] = recorded  # a repeated id counts at its latest revision
        return AppendResult(
            next_expected_revision=revision + len(events), position=log[-1].position
        )

    def _plan(
        self,
        stream: str,
        events: Sequence[NewEvent],
        expected: ExpectedRevision,
        last: int | None,
    ) -> AppendResult | None:
        """:func:`~decider.stores._expectations.plan_append` of an append to ``stream`` (whose
        last revision is ``last``): ``None`` to write it, its stored result if it is stored
        already; raises :class:`~decider.stores.errors.WrongExpectedVersion` on a conflict."""
        stored = self._streams.get(stream, [])
        by_id = self._ids.get(stream, {})

        def read_range(first: int, count: int) -> list[Stored]:
            return [(e.id, e.revision, e.position) for e in stored[first : first + count]]

        def find_ids(ids: Sequence[uuid.UUID]) -> Mapping[uuid.UUID, Stored]:
            return {
                i: (by_id[i].id, by_id[i].revision, by_id[i].position) for i in ids if i in by_id
            }

        return plan_append(
            stream,
            expected,
            last,
            [e.id for e in events],
            read_range=read_range,
            find_ids=find_ids,
        )

    def _undo(self, log_length: int) -> None:
        """Remove every event past ``log_length``: the rollback of a failed batch."""
        touched = {event.stream for event in self._log[log_length:]}
        for event in reversed(self._log[log_length:]):
            self._streams[event.stream].pop()
        del self._log[log_length:]
        for stream in touched:
            if self._streams[stream]:
                self._ids[stream] = {e.id: e for e in self._streams[stream]}
            else:
                del self._streams[stream]
                del self._ids[stream]


def _clock() -> datetime:
    """The leases' clock: the host's, in UTC."""
    return datetime.now(UTC)
