"""EventStoreDB leases: one lease stream per partition, written with expected revisions.

Partition ``p``'s lease lives in stream ``decider-lease-<p>``: every claim, renewal and release
appends one ``$decider-lease`` event recording the owner (``null``: released), the epoch and
the expiry. Each write first reads the stream's last event and its revision, decides with the
rule of :func:`decider.stores.leases.claimed`, and appends *expecting that revision*: of two
processes that race for a partition, one append fails its expected revision and that process
reads again and decides again (it then sees the winner's lease). So the stream is the
serialisation point that a row lock is on PostgreSQL.

Fencing (:class:`~decider.stores.esdb._batch.TransactionalEsdbEventStore` only): a fenced
``append_batch`` adds to its atomic ``AppendSession`` one more event on the lease stream, a
copy of the lease as it stands, expecting the revision at which the lease was last read as held
by this owner and epoch. A takeover or release appends to that stream, so a commit racing with
it fails as a whole (nothing written) and is reported as
:class:`~decider.stores.leases.LeaseLost`; a renewal by the same owner also moves the revision,
and the commit then reads the lease again and retries.

Expiry is judged by the clock of the host that claims (``datetime.now(UTC)``), stored as Unix
seconds: EventStoreDB offers no clock to read. Hosts that share a node's partitions must keep
their clocks in step (NTP) to well within the lease's time to live.

Every partition claimed once is listed in stream ``decider-leaseindex`` (its first claim
appends its name there), which :meth:`EsdbLeases.all` reads, then the last event of every lease
stream, all reads started before the first answer is taken; lease streams get a ``$maxCount`` so the
server may scavenge old renewals.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from decider import streams
from decider.stores.errors import StoreError, WrongExpectedVersion
from decider.stores.leases import Lease, LeaseLost, check_ttl, claimed, holds
from decider.stores.names import NameRules
from decider.stores.protocol import (
    ANY,
    NO_STREAM,
    AppendResult,
    ExpectedRevision,
    NewEvent,
    RecordedEvent,
)

LEASE_STREAM_PREFIX = streams.LEASE_PREFIX
"""Partition ``p``'s lease lives in stream ``decider-lease-<p>`` (named by the core)."""
LEASE_INDEX_STREAM = streams.LEASE_INDEX_STREAM
"""The names of every partition ever claimed, one event each (duplicates possible)."""
LEASE_EVENT_TYPE = "$decider-lease"
"""The type of lease events (``$``: a system event, outside user subscriptions)."""
_INDEX_EVENT_TYPE = "$decider-lease-partition"
_INDEX_IDS = uuid.UUID("0b7f5c7e-52a1-4c36-9f0e-3c2d1a8e6b11")
_RACES = 20  # lost races in a row before giving up (each means another writer progressed)
_RELEASED = datetime(1970, 1, 1, tzinfo=UTC)

Read = tuple[Lease | None, int | None]
"""A partition's lease as read and the lease stream's revision (``None``: no stream)."""


def lease_stream(partition: str) -> str:
    """The stream that holds ``partition``'s lease."""
    return streams.lease_stream(partition)


def lease_event(lease: Lease) -> NewEvent:
    """The event that records ``lease``."""
    data = {
        "partition": lease.partition,
        "owner": lease.owner,
        "epoch": lease.epoch,
        "expires_at": lease.expires_at.timestamp(),
    }
    return NewEvent(id=uuid.uuid4(), type=LEASE_EVENT_TYPE, data=json.dumps(data).encode())


class Streams(Protocol):
    """What the leases use of their store: its name rules, its reads and its appends."""

    @property
    def name_rules(self) -> NameRules: ...

    def read_stream(
        self, stream: str, from_revision: int = 0, limit: int | None = None
    ) -> list[RecordedEvent]: ...

    def append(
        self, stream: str, events: Sequence[NewEvent], expected_revision: ExpectedRevision
    ) -> AppendResult: ...


class EsdbLeases:
    """The lease operations of one :class:`~decider.stores.esdb.EsdbEventStore`.

    ``last_event_each`` gives the client's record of each stream's last event (``None``: no
    stream), ``limit_stream`` keeps only a stream's last events: the store's own calls.
    It remembers, per partition, the revision at which this store last found or wrote a lease
    (what a fenced commit expects); a stale memory only costs a read and a retry.
    """

    def __init__(
        self,
        store: Streams,
        *,
        last_event_each: Callable[[Sequence[str]], list[Any]],
        limit_stream: Callable[[str, int], None],
    ) -> None:
        self._store = store
        self._last_event_each = last_event_each
        self._limit_stream = limit_stream
        self._lock = threading.Lock()
        self._known: dict[str, tuple[Lease, int]] = {}
        self._limited: set[str] = set()

    def claim(self, partition: str, owner: str, ttl: float) -> Lease | None:
        """:meth:`~decider.stores.leases.LeaseStore.claim_lease` (see the module docstring)."""
        check_ttl(ttl)
        self._store.name_rules.check_stream(lease_stream(partition))
        for _ in range(_RACES):
            current, revision = self.read(partition)
            granted = claimed(current, partition, owner, ttl, _now())
            if granted is None:
                return None
            if revision is None:
                self._index(partition)
            if self._write(granted, revision):
                return granted
        raise StoreError(f"lease on partition {partition!r}: too many concurrent writers")

    def renew(self, lease: Lease, ttl: float) -> Lease:
        """:meth:`~decider.stores.leases.LeaseStore.renew_lease`."""
        check_ttl(ttl)
        for _ in range(_RACES):
            current, revision = self.read(lease.partition)
            if not holds(current, lease):
                raise LeaseLost(lease, current)
            renewed = Lease(lease.partition, lease.owner, lease.epoch, _now() + _seconds(ttl))
            if self._write(renewed, revision):
                return renewed
        raise StoreError(f"lease on partition {lease.partition!r}: too many concurrent writers")

    def release(self, lease: Lease) -> bool:
        """:meth:`~decider.stores.leases.LeaseStore.release_lease`."""
        for _ in range(_RACES):
            current, revision = self.read(lease.partition)
            if not holds(current, lease):
                return False
            if self._write(Lease(lease.partition, None, lease.epoch, _RELEASED), revision):
                return True
        raise StoreError(f"lease on partition {lease.partition!r}: too many concurrent writers")

    def all(self) -> list[Lease]:
        """Every partition's lease, ordered by partition."""
        names = {
            str(json.loads(e.data)["partition"])
            for e in self._store.read_stream(LEASE_INDEX_STREAM)
        }
        ordered = sorted(names)
        last = self._last_event_each([lease_stream(name) for name in ordered])
        found = (
            self._parse(lease_stream(name), event)[0]
            for name, event in zip(ordered, last, strict=True)
        )
        return [lease for lease in found if lease is not None]

    def read(self, partition: str) -> Read:
        """The partition's lease and its stream's revision, read from the server."""
        stream = lease_stream(partition)
        [event] = self._last_event_each([stream])
        return self._parse(stream, event)

    def _parse(self, stream: str, event: Any) -> Read:
        if event is None:
            return None, None
        try:
            data = json.loads(event.data)
            lease = Lease(
                str(data["partition"]),
                None if data["owner"] is None else str(data["owner"]),
                int(data["epoch"]),
                datetime.fromtimestamp(float(data["expires_at"]), UTC),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"unreadable lease in stream {stream!r}") from exc
        revision = int(event.stream_position)
        self._remember(lease, revision)
        return lease, revision

    def fence(self, lease: Lease, *, fresh: bool) -> tuple[str, NewEvent, int]:
        """The request a fenced commit adds: the lease stream, a copy of the lease as it
        stands, and the revision it expects. ``fresh``: read the lease again first.

        Raises :class:`~decider.stores.leases.LeaseLost` if the lease is not held.
        """
        with self._lock:
            known = None if fresh else self._known.get(lease.partition)
        if known is None or not holds(known[0], lease):
            current, revision = self.read(lease.partition)
            if not holds(current, lease) or current is None or revision is None:
                raise LeaseLost(lease, current)
            known = (current, revision)
        held, revision = known
        return lease_stream(lease.partition), lease_event(held), revision

    def committed(self, lease: Lease, revision: int) -> None:
        """A fenced commit wrote the lease stream at ``revision`` (one past what it expected)."""
        with self._lock:
            known = self._known.get(lease.partition)
            if known is not None and known[1] == revision - 1:
                self._known[lease.partition] = (known[0], revision)

    def lost(self, lease: Lease) -> LeaseLost:
        """The :class:`LeaseLost` for ``lease`` as the lease stands now."""
        return LeaseLost(lease, self.read(lease.partition)[0])

    def _write(self, lease: Lease, revision: int | None) -> bool:
        """Append ``lease`` expecting ``revision``; whether it won the race."""
        stream = lease_stream(lease.partition)
        expected: ExpectedRevision = NO_STREAM if revision is None else revision
        try:
            result = self._store.append(stream, [lease_event(lease)], expected)
        except WrongExpectedVersion:
            return False
        self._remember(lease, result.next_expected_revision)
        self._limit(stream)
        return True

    def _remember(self, lease: Lease, revision: int) -> None:
        with self._lock:
            known = self._known.get(lease.partition)
            if known is None or known[1] <= revision:
                self._known[lease.partition] = (lease, revision)

    def _index(self, partition: str) -> None:
        """List ``partition`` in the index stream (before its lease stream is created)."""
        event = NewEvent(
            id=uuid.uuid5(_INDEX_IDS, partition),
            type=_INDEX_EVENT_TYPE,
            data=json.dumps({"partition": partition}).encode(),
        )
        self._store.append(LEASE_INDEX_STREAM, [event], ANY)

    def _limit(self, stream: str) -> None:
        with self._lock:
            if stream in self._limited:
                return
            self._limited.add(stream)
        self._limit_stream(stream, 8)


def _seconds(ttl: float) -> timedelta:
    return timedelta(seconds=ttl)


def _now() -> datetime:
    return datetime.now(UTC)
