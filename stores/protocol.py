"""The event store protocol: EventStoreDB's model, on every backend.

Numbering is EventStoreDB's everywhere:

- stream revisions count from 0, contiguous within a stream;
- an append names the revision it expects: an ``int`` (the stream's last revision),
  :data:`NO_STREAM`, :data:`EXISTS` or :data:`ANY`;
- the global position is an opaque ``int`` that strictly increases along the log and may
  have gaps. ``after_position=None`` means "from the beginning of the log".

A stream that was never written reads as empty (``[]``): no store raises for a missing
stream on read.

Optional abilities are separate protocols (:class:`CheckpointStore`, :class:`TransactionalStore`,
:class:`PipelinedStore`, :class:`SnapshotStore`, :class:`IdLookupStore`, :class:`StateStore`),
never methods that raise ``NotImplementedError``.
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Protocol, TypeAlias, runtime_checkable

import attrs

from decider.stores.leases import Lease


class StreamState(enum.Enum):
    """Expected revisions that are not a number."""

    NO_STREAM = "no_stream"
    """The stream must not exist yet."""
    EXISTS = "exists"
    """The stream must hold at least one event."""
    ANY = "any"
    """No check at all."""

    def __str__(self) -> str:
        return self.name


NO_STREAM = StreamState.NO_STREAM
"""Expect that the stream does not exist yet (:attr:`StreamState.NO_STREAM`)."""
EXISTS = StreamState.EXISTS
"""Expect that the stream holds at least one event (:attr:`StreamState.EXISTS`)."""
ANY = StreamState.ANY
"""Expect nothing of the stream (:attr:`StreamState.ANY`)."""

ExpectedRevision: TypeAlias = int | StreamState
"""What an append expects of the stream: its last revision, or a :class:`StreamState`."""


@attrs.frozen
class NewEvent:
    """An event to append. ``id`` makes a retried append recognisable as the same write.

    ``partition_key`` (a 32-bit unsigned int, or ``None``: unknown) says which partition of
    its app's work the event belongs to: partition ``partition_key % P`` of ``P``. An appender
    that knows it passes it (an app: ``crc32`` of the instance stream the event is for, see
    :func:`decider.processors.group.partitions.stream_key`); stores that keep keys store it with
    the event and filter reads by it (:class:`Partitions`). Every store checks it when the
    event is appended (:func:`check_partition_key`, a ``ValueError`` before anything is
    written), not here: the processors make one for each event they write.
    """

    id: uuid.UUID
    type: str
    data: bytes
    metadata: bytes = b""
    partition_key: int | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class RecordedEvent:
    """An event as stored: where it is (stream, revision, global position) and what it holds."""

    id: uuid.UUID
    type: str
    data: bytes
    metadata: bytes
    stream: str
    revision: int
    position: int
    recorded_at: datetime
    partition_key: int | None = attrs.field(default=None, kw_only=True)
    """The partition key the event was appended with (:attr:`NewEvent.partition_key`);
    ``None`` if none was given, or the store keeps none (EventStoreDB)."""


MAX_PARTITION_KEY = 2**32 - 1
"""The largest partition key (keys are 32-bit unsigned: a ``crc32``)."""


def check_partition_key(key: int | None) -> None:
    """Raise ``ValueError`` unless ``key`` is ``None`` or an int from 0 to
    :data:`MAX_PARTITION_KEY`."""
    if key is not None and (
        isinstance(key, bool) or not isinstance(key, int) or not 0 <= key <= MAX_PARTITION_KEY
    ):
        raise ValueError(f"a partition key must be None or an int from 0 to 2**32 - 1, got {key!r}")


@attrs.frozen
class Partitions:
    """Some of the ``count`` partitions of an app's work: those numbered in ``held``.

    An event is of partition ``partition_key % count``. An event whose key is unknown
    (``None``: appended without one) may be of any partition: it passes when ``unknown`` is set
    (the default), and the reader finds out its partition itself. A store that keeps no keys
    (not a :class:`KeyedStore`: EventStoreDB) cannot tell, and passes every event.

    >>> Partitions(count=4, held=frozenset({1})).passes(5)
    True
    >>> Partitions(count=4, held=frozenset({1})).passes(6)
    False
    >>> Partitions(count=4, held=frozenset({1})).passes(None)
    True
    >>> Partitions(count=4, held=frozenset(), unknown=True).passes(1)
    False
    """

    count: int
    held: frozenset[int]
    unknown: bool = True
    """Whether events of unknown key pass."""

    def __attrs_post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ValueError(f"a partition count must be a positive int, got {self.count!r}")
        wrong = [n for n in self.held if not (isinstance(n, int) and 0 <= n < self.count)]
        if wrong:
            raise ValueError(f"partitions {sorted(wrong)} are not among 0..{self.count - 1}")

    def passes(self, key: int | None) -> bool:
        """Whether an event with partition key ``key`` may be of a partition held."""
        if key is None:
            return self.unknown
        return key % self.count in self.held


@attrs.frozen
class AppendResult:
    """The outcome of an append.

    ``next_expected_revision`` is the stream's last revision after the append (what the next
    append expects); ``position`` is the global position of the last event written (for an
    idempotent re-append: of the last event already stored).
    """

    next_expected_revision: int
    position: int


@attrs.frozen
class CaughtUp:
    """Yielded by a subscription once it has delivered all history up to ``position``.

    ``position`` is the last position considered (``None`` if the log is empty); events after
    it are live.
    """

    position: int | None


@attrs.frozen
class Filter:
    """Which events of the global log a reader wants.

    An event matches when its stream starts with one of ``stream_prefixes`` (or that tuple is
    empty) and its type is one of ``event_types`` or starts with one of
    ``event_type_prefixes`` (or both are empty). System events (type or stream starting with
    ``$``) are excluded unless ``include_system`` is set. With ``partitions``, an event must
    also be of a partition held, or of an unknown one (:meth:`Partitions.passes`); a store
    that keeps no partition keys (EventStoreDB) records every event's as unknown, so the
    filter passes them all there.
    """

    stream_prefixes: tuple[str, ...] = ()
    event_types: tuple[str, ...] = ()
    event_type_prefixes: tuple[str, ...] = ()
    include_system: bool = False
    partitions: Partitions | None = None

    def matches(self, stream: str, event_type: str) -> bool:
        """Whether an event of this stream and type passes the filter.

        >>> Filter(stream_prefixes=("order-",)).matches("order-1", "Placed")
        True
        >>> Filter(event_types=("Placed",)).matches("order-1", "Shipped")
        False
        """
        if not self.include_system and stream.startswith("$"):
            return False
        if self.stream_prefixes and not stream.startswith(self.stream_prefixes):
            return False
        return self.takes_type(event_type)

    def takes_type(self, event_type: str) -> bool:
        """Whether an event of this type passes the filter in some stream.

        >>> Filter(stream_prefixes=("order-",), event_types=("Placed",)).takes_type("Placed")
        True
        >>> Filter(event_type_prefixes=("Order",)).takes_type("Shipped")
        False
        """
        if not self.include_system and event_type.startswith("$"):
            return False
        if self.event_types or self.event_type_prefixes:
            return event_type in self.event_types or (
                bool(self.event_type_prefixes) and event_type.startswith(self.event_type_prefixes)
            )
        return True

    def passes(self, event: RecordedEvent) -> bool:
        """Whether ``event`` passes the filter: :meth:`matches`, and its partition key
        (:meth:`Partitions.passes`)."""
        if self.partitions is not None and not self.partitions.passes(event.partition_key):
            return False
        return self.matches(event.stream, event.type)

    def select(
        self, events: Sequence[RecordedEvent], start: int = 0, limit: int | None = None
    ) -> list[RecordedEvent]:
        """The events of ``events[start:]`` that pass the filter (:meth:`passes`), in order, at
        most ``limit`` of them: the same answer as testing each with :meth:`passes`, with the
        filter's fields read once, not once per event (a store that filters in Python reads
        every event of the log through here)."""
        partitions = self.partitions
        system = self.include_system
        streams = self.stream_prefixes
        types = self.event_types
        type_prefixes = self.event_type_prefixes
        any_type = not types and not type_prefixes
        found: list[RecordedEvent] = []
        if limit is not None and limit <= 0:
            return found
        for index in range(start, len(events)):
            event = events[index]
            if partitions is not None and not partitions.passes(event.partition_key):
                continue
            stream, event_type = event.stream, event.type
            if not system and (stream.startswith("$") or event_type.startswith("$")):
                continue
            if streams and not stream.startswith(streams):
                continue
            if (
                any_type
                or event_type in types
                or (type_prefixes and event_type.startswith(type_prefixes))
            ):
                found.append(event)
                if limit is not None and len(found) >= limit:
                    break
        return found

    def type_regex(self) -> str | None:
        """The event-type part as one regular expression, for servers that filter by regex."""
        parts = [re.escape(t) + "$" for t in self.event_types]
        parts += [re.escape(p) for p in self.event_type_prefixes]
        return "^(?:" + "|".join(parts) + ")" if parts else None


ALL = Filter()
"""The filter that passes every non-system event."""


@attrs.frozen
class StreamAppend:
    """One stream's part of a transactional multi-stream append."""

    stream: str
    events: Sequence[NewEvent]
    expected_revision: ExpectedRevision


class Subscription(Protocol):
    """A catch-up subscription to the global log.

    It delivers the history after the start position, then one :class:`CaughtUp`, then live
    events as they are appended, in log order. It never ends by itself: :meth:`stop` (safe from
    any thread) ends it, and iteration then finishes. Waiting for live events uses no CPU to
    speak of.
    """

    def __iter__(self) -> Iterator[RecordedEvent | CaughtUp]: ...

    def poll(self, timeout: float | None) -> RecordedEvent | CaughtUp | None:
        """The next item, waiting up to ``timeout`` seconds; ``None`` on timeout or once stopped."""
        ...

    def stop(self) -> None:
        """End the subscription; a blocked :meth:`poll` or iteration returns promptly."""
        ...

    def wake(self) -> None:
        """Make a blocked :meth:`poll` return ``None`` at once without ending the subscription
        (or the next one, if none is blocked now): the consumer's other work is ready. Safe
        from any thread; how a processor waits for its own work without polling."""
        ...

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called (or the store closed under it)."""
        ...


@runtime_checkable
class EventStore(Protocol):
    """Streams with optimistic revision checks, and one global log over them all."""

    def append(
        self, stream: str, events: Sequence[NewEvent], expected_revision: ExpectedRevision
    ) -> AppendResult:
        """Append ``events`` atomically if the stream is at ``expected_revision``.

        Raises :class:`~decider.stores.errors.WrongExpectedVersion` on a mismatch, writing nothing.
        Re-appending events whose ids are already stored at the same place, with the same
        expected revision, succeeds and writes nothing (idempotent append); a partial overlap
        is a conflict.
        """
        ...

    def read_stream(
        self, stream: str, from_revision: int = 0, limit: int | None = None
    ) -> list[RecordedEvent]:
        """The stream's events from ``from_revision`` on, forwards; ``[]`` for a missing stream."""
        ...

    def read_all(
        self,
        after_position: int | None = None,
        limit: int | None = None,
        filter: Filter = ALL,
    ) -> list[RecordedEvent]:
        """Events of the global log after ``after_position`` (exclusive) that pass ``filter``."""
        ...

    def subscribe(self, after_position: int | None = None, filter: Filter = ALL) -> Subscription:
        """A catch-up subscription starting after ``after_position`` (exclusive)."""
        ...

    def close(self) -> None:
        """Release connections and wake every subscription so it can stop."""
        ...


@runtime_checkable
class KeyedStore(Protocol):
    """A store that keeps each event's partition key (:attr:`NewEvent.partition_key`) and
    answers a :class:`Partitions` filter by it, in the store (an index or the query): reads
    of some partitions are not sent the others' events."""

    keeps_partition_keys: bool
    """Always true: what makes the store recognisable as one."""


@runtime_checkable
class CheckpointStore(Protocol):
    """Durable positions of named processors."""

    def load_checkpoint(self, name: str) -> int | None:
        """The last stored position of processor ``name``, or ``None`` if it never stored one."""
        ...

    def save_checkpoint(self, name: str, position: int) -> None:
        """Store the position of processor ``name``."""
        ...


@runtime_checkable
class TransactionalStore(Protocol):
    """A store that can append to several streams and store a checkpoint in one transaction."""

    def append_batch(
        self,
        appends: Sequence[StreamAppend],
        *,
        checkpoints: Sequence[tuple[str, int]] = (),
        leases: Sequence[Lease] = (),
    ) -> Sequence[AppendResult]:
        """Apply every append and every checkpoint atomically: all of them, or none.

        Raises :class:`~decider.stores.errors.WrongExpectedVersion` (naming the first stream that
        failed its check) and writes nothing if any expected revision does not hold. Each
        append is idempotent as in :meth:`EventStore.append`. With ``leases`` (stores that are
        also a :class:`~decider.stores.leases.LeaseStore`), the same transaction checks that
        each partition still has its lease's owner and epoch, and otherwise raises
        :class:`~decider.stores.leases.LeaseLost` naming the first lost (in the order given)
        and writes nothing (fencing). So one commit may carry the work of several partitions,
        each with its checkpoint and under its lease. A name in ``checkpoints`` twice at two
        positions, or two epochs of one partition in ``leases``, is a ``ValueError``. The results
        are in the appends' order; a store may look them up when they are first read (the
        store must then still be open).
        """
        ...


@runtime_checkable
class PipelinedStore(Protocol):
    """A store that can have several independent appends, or reads, in flight at once (no
    transaction): a processor's batch that spans streams then costs one round trip, not one
    per stream."""

    def append_each(self, appends: Sequence[StreamAppend]) -> list[AppendResult]:
        """Apply each append as :meth:`EventStore.append` would, independently: each is atomic
        and idempotent on its own, appends to one stream keep their order, and a failure of
        one undoes none of the others. Waits for every answer, then raises the first failure
        in the appends' order (the others may be written), else returns the results in order.
        """
        ...

    def read_each(self, reads: Sequence[tuple[str, int]]) -> list[list[RecordedEvent]]:
        """For each ``(stream, from_revision)``, what :meth:`EventStore.read_stream` returns,
        the reads in flight at once."""
        ...


@attrs.frozen
class Snapshot:
    """A stream's fold cached as bytes: ``data`` reflects the stream up to ``revision``
    (its last event folded in), in the shape ``state_version`` names."""

    revision: int
    state_version: str
    data: bytes


@runtime_checkable
class SnapshotStore(Protocol):
    """A store that keeps the latest snapshot of each stream beside it.

    A snapshot is a cache: losing one costs a longer fold, never correctness. It is written
    outside the transaction of the events it reflects, after they are committed.
    """

    def load_snapshot(self, stream: str) -> Snapshot | None:
        """The stored snapshot of ``stream``, or ``None``."""
        ...

    def save_snapshot(self, stream: str, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` as ``stream``'s, unless the stored one is of the same
        ``state_version`` and a later revision (a slow writer never moves it back)."""
        ...


@runtime_checkable
class IdLookupStore(Protocol):
    """A store that answers by an index which event ids a stream holds (the lookup its
    idempotent appends already make), without reading the stream.

    Processors ask it whether an input was already recorded in an instance's stream: the
    event ids they write are derived from the input's message id (:func:`decider.event_id`),
    so the set of handled inputs need not be kept in memory or in a snapshot.
    """

    def stored_ids(self, stream: str, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Those of ``ids`` that ``stream`` holds; an empty set for a missing stream."""
        ...


@attrs.frozen
class StoredState:
    """A state-stored instance's row: its ``version`` (0: none yet) and its encoded ``data``."""

    version: int
    data: bytes


@attrs.frozen
class StateWrite:
    """A new state for ``key``, written only if its stored version is ``expected_version``
    (0: no row yet); the row's version becomes ``version``."""

    key: str
    expected_version: int
    version: int
    data: bytes


@runtime_checkable
class StateStore(Protocol):
    """A store that keeps rows of state beside its streams, written with its appends in one
    transaction (the state-stored workflow variant: the new state and the outbox together)."""

    def load_state(self, key: str) -> StoredState | None:
        """The stored state of ``key``, or ``None``."""
        ...

    def commit_states(
        self,
        states: Sequence[StateWrite],
        appends: Sequence[StreamAppend],
        *,
        checkpoints: Sequence[tuple[str, int]] = (),
        leases: Sequence[Lease] = (),
    ) -> None:
        """Write every state, every append and the checkpoints atomically: all, or none.

        Raises :class:`~decider.stores.errors.WrongExpectedVersion` (naming the key) and writes
        nothing if a state's stored version is not its ``expected_version``, or if an append's
        expected revision does not hold. Leases fence the commit as in
        :meth:`TransactionalStore.append_batch` (:class:`~decider.stores.leases.LeaseLost`,
        nothing written, if one is no longer held).
        """
        ...
