"""The EventStoreDB/KurrentDB adapter: :class:`EsdbEventStore` over the client's sync API.

The client is ``kurrentdbclient`` (extra ``kurrentdb``) or ``esdbclient`` (extra ``esdb``),
whichever is installed (:mod:`decider.stores.esdb._client`); both read ``esdb://`` URIs, and
``kurrentdb://`` and ``kdb://`` (with ``+discover``) work with either.

EventStoreDB already has our model (0-based revisions, NO_STREAM / EXISTS / ANY, idempotent
re-appends by event id), so the adapter mostly translates names. The differences it covers:

- a ``$all`` read from a position includes that position: :meth:`EsdbEventStore.read_all`
  drops it, so ``after_position`` is exclusive as the protocol says;
- the server filters on the stream name *or* the event type, by regex; the adapter sends the
  more selective one and applies the rest of :class:`~decider.stores.protocol.Filter` itself;
- the client returns only a commit position after an append; the revision is computed from
  the expectation (an ``int`` or ``NO_STREAM``) or looked up by event id (``ANY``/``EXISTS``).

Positions are EventStoreDB commit positions. Checkpoints live in the stream
``decider-checkpoint-<name>`` as events of type ``$decider-checkpoint``: the ``$`` type keeps
them out of every subscription that excludes system events (ours and esdbclient's default), and
a non-``$`` stream needs no admin rights on a secured node.

Every client error, failed gRPC call and closed channel is mapped to
:mod:`decider.stores.errors` in :mod:`decider.stores.esdb._errors`; what the adapter takes from
the client's internals is in :mod:`decider.stores.esdb._client`.

Leases (a :class:`~decider.stores.leases.LeaseStore`) live in one stream per partition, written
with expected revisions (:mod:`decider.stores.esdb._leases`).

WARNING: EventStoreDB cannot append to several streams in one transaction, so this store is
not a :class:`~decider.stores.protocol.TransactionalStore` (KurrentDB 25.1 and 26.1 can:
:mod:`decider.stores.esdb._batch`), and it cannot fence a commit with its lease.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import sys
import threading
import uuid
import weakref
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from decider import streams
from decider.stores._expectations import check_read_args, validate_append
from decider.stores.errors import StoreError
from decider.stores.esdb._append_line import AppendLine
from decider.stores.esdb._client import CLIENT as _CHOSEN
from decider.stores.esdb._errors import map_error, mapped, opening_error, store_closed
from decider.stores.esdb._filters import server_filter, server_filter_is_exact
from decider.stores.esdb._leases import EsdbLeases
from decider.stores.esdb._pipeline import first_failure
from decider.stores.esdb._read_call import ReadChannel
from decider.stores.leases import Lease
from decider.stores.names import CHECKPOINT, DEFAULT, NameRules
from decider.stores.protocol import (
    ALL,
    ANY,
    EXISTS,
    NO_STREAM,
    AppendResult,
    ExpectedRevision,
    Filter,
    NewEvent,
    RecordedEvent,
    StreamAppend,
)
from decider.stores.redact import redact_uri

if TYPE_CHECKING:
    from decider.stores.esdb._persistent import EsdbConsumerGroup
    from decider.stores.esdb._subscription import EsdbSubscription

CHECKPOINT_STREAM_PREFIX = streams.CHECKPOINT_PREFIX
"""Processor ``name`` keeps its position in stream ``decider-checkpoint-<name>`` (named by the
core)."""
CHECKPOINT_EVENT_TYPE = "$decider-checkpoint"
"""The type of checkpoint events (``$``: a system event, excluded from user subscriptions)."""

CLIENT = _CHOSEN
"""The client package in use: ``kurrentdbclient`` if installed, else ``esdbclient`` (chosen in
:mod:`decider.stores.esdb._client`, when it is imported)."""

_PAGE = 1000
_STATE = CLIENT.stream_state
_STATES = {NO_STREAM: _STATE.NO_STREAM, EXISTS: _STATE.EXISTS, ANY: _STATE.ANY}


def _to_recorded(event: Any) -> RecordedEvent:
    return RecordedEvent(
        id=event.id,
        type=event.type,
        data=event.data,
        metadata=event.metadata,
        stream=event.stream_name,
        revision=event.stream_position,
        position=event.commit_position,
        recorded_at=event.recorded_at or datetime.fromtimestamp(0, UTC),
    )


def _to_new(event: NewEvent) -> Any:
    # EventStoreDB only uses the content type to decide whether projections may parse the data.
    is_json = event.data[:1] in (b"{", b"[")
    return CLIENT.new_event(
        id=event.id,
        type=event.type,
        data=event.data,
        metadata=event.metadata,
        content_type="application/json" if is_json else "application/octet-stream",
    )


def checkpoint_event(position: int) -> NewEvent:
    """The event that stores a checkpoint at ``position``."""
    return NewEvent(
        id=uuid.uuid4(),
        type=CHECKPOINT_EVENT_TYPE,
        data=json.dumps({"position": position}).encode(),
    )


class EsdbEventStore:
    """An :class:`~decider.stores.protocol.EventStore` and
    :class:`~decider.stores.protocol.CheckpointStore` on EventStoreDB.

    ``uri`` is a client connection string, e.g. ``esdb://localhost:2113?Tls=false`` (or
    ``kurrentdb://``, ``kdb://``, each also ``+discover``).
    Appends of several events are one atomic batch; re-appending the same event ids with the
    same expectation succeeds without writing (EventStoreDB's idempotency).
    """

    name_rules: ClassVar[NameRules] = DEFAULT
    """The names this store holds (:mod:`decider.stores.names`); others raise
    :class:`~decider.stores.errors.InvalidName` before anything is written or read."""

    def __init__(self, uri: str) -> None:
        try:
            self._client = CLIENT.client_class(CLIENT.client_uri(uri))
        except (ValueError, CLIENT.base_error) as exc:  # a bad URI; discovery (+discover)
            raise opening_error(uri, exc) from exc
        self._shown = redact_uri(uri)
        self._subscriptions: set[EsdbSubscription] = set()
        self._checkpoint_limited: set[str] = set()  # checkpoint streams given a $maxCount
        self._lock = threading.Lock()
        self._closed = False
        self._leases = EsdbLeases(
            self, last_event_each=self._last_event_each, limit_stream=self._limit_stream
        )
        self._line = AppendLine(self._client)
        self._reads = ReadChannel(self._client)
        _OPEN.add(self)

    def __repr__(self) -> str:
        return f"EsdbEventStore({self._shown!r})"

    def append(
        self, stream: str, events: Sequence[NewEvent], expected_revision: ExpectedRevision
    ) -> AppendResult:
        """Append ``events`` atomically if the stream is at ``expected_revision``.

        Raises :class:`~decider.stores.errors.WrongExpectedVersion` (nothing written) on a mismatch,
        :class:`~decider.stores.errors.StreamDeleted` for a tombstoned stream.
        """
        validate_append(len(events), expected_revision)
        self.name_rules.check_append(stream, events)
        self._check_open()
        # On the store's open BatchAppend call, whose answer carries the new revision (which
        # the clients' append_to_stream drops): no call set up per append (._append_line)
        return first_failure(self._line.submit([StreamAppend(stream, events, expected_revision)]))[
            0
        ]

    def append_each(self, appends: Sequence[StreamAppend]) -> list[AppendResult]:
        """Apply each append independently (a :class:`~decider.stores.protocol.PipelinedStore`),
        all of them sent at once on the store's open ``BatchAppend`` call: one round trip
        (:mod:`._append_line`)."""
        for item in appends:
            validate_append(len(item.events), item.expected_revision)
            self.name_rules.check_append(item.stream, item.events)
        self._check_open()
        return first_failure(self._line.submit(appends))

    def read_each(self, reads: Sequence[tuple[str, int]]) -> list[list[RecordedEvent]]:
        """Each ``(stream, from_revision)`` as :meth:`read_stream` reads it, every read started
        before the first answer is taken (a :class:`~decider.stores.protocol.PipelinedStore`)."""
        for stream, from_revision in reads:
            check_read_args(from_revision, None)
            self.name_rules.check_stream(stream)
        self._check_open()
        found: list[list[RecordedEvent]] = []
        with contextlib.ExitStack() as calls:
            started = []
            for stream, from_revision in reads:
                with mapped(stream):
                    call = self._client.read_stream(stream, stream_position=from_revision)
                started.append((stream, calls.enter_context(call)))
            for stream, events in started:
                try:
                    found.append([_to_recorded(e) for e in events])
                except CLIENT.not_found:
                    found.append([])
                except CLIENT.base_error as exc:
                    raise map_error(exc, stream) from exc
        return found

    def _locate(
        self, stream: str, event_id: uuid.UUID, position: int | None = None
    ) -> tuple[int, int]:
        """The revision and position of the stored event ``event_id`` (at ``position`` if
        given: an id stored twice counts where it was written last), newest first.

        Usually it is the stream's last event, so the first page holds one event; later pages
        grow, for an idempotent re-append of events written long ago.
        """
        before: int | None = None
        limit = 1
        while True:
            page = self._client.get_stream(
                stream, stream_position=before, backwards=True, limit=limit
            )
            for event in page:
                if event.id == event_id and position in (None, event.commit_position):
                    return int(event.stream_position), int(event.commit_position)
            if len(page) < limit or page[-1].stream_position == 0:
                raise StoreError(f"appended event {event_id} not found in stream {stream!r}")
            before = page[-1].stream_position - 1
            limit = min(limit * 16, _PAGE)

    def read_stream(
        self, stream: str, from_revision: int = 0, limit: int | None = None
    ) -> list[RecordedEvent]:
        """The stream's events from ``from_revision`` on, forwards; ``[]`` for a missing
        (or soft-deleted) stream; :class:`~decider.stores.errors.StreamDeleted` if tombstoned."""
        check_read_args(from_revision, limit)
        self.name_rules.check_stream(stream)
        self._check_open()
        if limit == 0:
            return []
        try:
            events = self._client.get_stream(
                stream, stream_position=from_revision, limit=sys.maxsize if limit is None else limit
            )
        except CLIENT.not_found:
            return []
        except CLIENT.base_error as exc:
            raise map_error(exc, stream) from exc
        return [_to_recorded(e) for e in events]

    def read_all(
        self,
        after_position: int | None = None,
        limit: int | None = None,
        filter: Filter = ALL,
    ) -> list[RecordedEvent]:
        """Events of ``$all`` after ``after_position`` (exclusive) that pass ``filter``."""
        check_read_args(0, limit)
        self._check_open()
        found: list[RecordedEvent] = []
        position = after_position
        arguments = server_filter(filter)
        exact = server_filter_is_exact(filter)
        while limit is None or len(found) < limit:
            # $all reads include their start position: ask one more and drop it. Where the
            # server's filter lets through events ours drops, read whole pages: a small limit
            # would otherwise take a round trip for every two events the server sends.
            want = _PAGE if limit is None else limit - len(found)
            if not exact:
                want = max(want, _PAGE)
            with mapped():
                page = list(
                    self._client.read_all(commit_position=position, limit=want + 1, **arguments)
                )
            for event in page:
                if position is not None and event.commit_position == position:
                    continue
                if filter.matches(event.stream_name, event.type):
                    found.append(_to_recorded(event))
            if len(page) < want + 1:
                break
            position = page[-1].commit_position
        return found if limit is None else found[:limit]

    def subscribe(
        self, after_position: int | None = None, filter: Filter = ALL
    ) -> EsdbSubscription:
        """A catch-up subscription to ``$all`` after ``after_position`` (exclusive), filtered
        on the server as far as EventStoreDB allows."""
        from decider.stores.esdb._subscription import EsdbSubscription

        self._check_open()
        subscription = EsdbSubscription(self._reads, after_position, filter)
        with self._lock:
            self._subscriptions = {s for s in self._subscriptions if not s.stopped}
            self._subscriptions.add(subscription)
        return subscription

    def load_checkpoint(self, name: str) -> int | None:
        """The last position saved for processor ``name``, or ``None``."""
        self.name_rules.check(CHECKPOINT, name)
        self._check_open()
        stream = streams.checkpoint_stream(name)
        try:
            events = self._client.get_stream(stream, backwards=True, limit=1)
        except CLIENT.not_found:
            return None
        except CLIENT.base_error as exc:
            raise map_error(exc, stream) from exc
        if not events:
            return None
        try:
            return int(json.loads(events[0].data)["position"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"unreadable checkpoint in stream {stream!r}") from exc

    def save_checkpoint(self, name: str, position: int) -> None:
        """Store ``position`` for processor ``name``; the last save wins, as on SQL stores.

        Two processes of one app on one node run processors of the same name, which save the
        same checkpoint: an expected-revision check would fail one of them routinely, for a
        race that is part of normal operation (both concluded the work up to their position).
        """
        self.name_rules.check(CHECKPOINT, name)
        self._check_open()
        stream = streams.checkpoint_stream(name)
        first_failure(self._line.submit([StreamAppend(stream, [checkpoint_event(position)], ANY)]))
        self._limit_checkpoint_stream(name)

    def _limit_checkpoint_stream(self, name: str) -> None:
        """Give the checkpoint stream a ``$maxCount`` (once per name and store): only the
        latest checkpoint matters, EventStoreDB may scavenge the rest."""
        with self._lock:
            if name in self._checkpoint_limited:
                return
            self._checkpoint_limited.add(name)
        self._limit_stream(streams.checkpoint_stream(name), 8)

    def _limit_stream(self, stream: str, count: int) -> None:
        """Let EventStoreDB keep only the last ``count`` events of ``stream``."""
        with mapped(stream):
            self._client.set_stream_metadata(stream, metadata={"$maxCount": count})

    def _last_event_each(self, streams: Sequence[str]) -> list[Any]:
        """The client's record of each stream's last event (``None``: no stream), every read
        started before the first answer is taken."""
        self._check_open()
        found: list[Any] = []
        with contextlib.ExitStack() as calls:
            started = []
            for stream in streams:
                with mapped(stream):
                    call = self._client.read_stream(stream, backwards=True, limit=1)
                started.append((stream, calls.enter_context(call)))
            for stream, events in started:
                try:
                    found.append(next(iter(events), None))
                except CLIENT.not_found:
                    found.append(None)
                except CLIENT.base_error as exc:
                    raise map_error(exc, stream) from exc
        return found

    def claim_lease(self, partition: str, owner: str, ttl: float) -> Lease | None:
        """Take the lease on ``partition`` for ``ttl`` seconds, or ``None`` if another owner
        holds it (a :class:`~decider.stores.leases.LeaseStore`; a lease stream per partition
        written with expected revisions, expiry by this host's clock:
        :mod:`decider.stores.esdb._leases`)."""
        return self._leases.claim(partition, owner, ttl)

    def renew_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend ``lease`` to ``ttl`` seconds from now (same epoch); ``LeaseLost`` if the
        partition no longer has this owner and epoch."""
        return self._leases.renew(lease, ttl)

    def release_lease(self, lease: Lease) -> bool:
        """Give the partition up (free at once); whether ``lease`` was still held."""
        return self._leases.release(lease)

    def leases(self) -> list[Lease]:
        """Every partition's lease, held, expired or released, ordered by partition."""
        return self._leases.all()

    def consumer_group(self, name: str, filter: Filter) -> EsdbConsumerGroup:
        """The persistent subscription to ``$all`` named ``name`` over ``filter``'s events
        (:mod:`decider.stores.esdb._persistent`); the store is a
        :class:`~decider.stores.consumer_groups.ConsumerGroupStore`."""
        from decider.stores.esdb._persistent import EsdbConsumerGroup

        return EsdbConsumerGroup(self._open_client, name, filter)

    def close(self) -> None:
        """Stop every subscription and close the connection; safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            subscriptions = list(self._subscriptions)
            self._subscriptions.clear()
        _OPEN.discard(self)
        for subscription in subscriptions:
            subscription.stop()
        self._line.close()
        self._reads.close()
        self._client.close()

    def _check_open(self) -> None:
        if self._closed:
            raise store_closed()

    def _open_client(self) -> Any:
        """The client, unless the store is closed (then :func:`store_closed`'s error)."""
        self._check_open()
        return self._client


_OPEN: weakref.WeakSet[EsdbEventStore] = weakref.WeakSet()
"""The stores not closed yet: closed at interpreter exit."""


@atexit.register
def _close_open_stores() -> None:
    """Close the stores a program left open when it ends. Left to the garbage collector at
    interpreter exit, the client's ``__del__`` closes its gRPC channel while the append
    stream's request thread still waits for requests, and the process never exits; closing
    the store first ends that stream."""
    for store in list(_OPEN):
        with contextlib.suppress(Exception):  # exiting: a store that cannot close is let go
            store.close()
