"""Atomic batches on KurrentDB 25.1+: :class:`TransactionalEsdbEventStore` and how to open one.

KurrentDB's v2 calls append to several streams in one atomic write, each stream with its own
expected revision: 26.1's unary ``AppendRecords`` (one message for the whole batch, made by the
store itself: :mod:`._esdb_records`, so with either client) and 25.1's client-streaming
``AppendSession`` (``kurrentdbclient``'s ``multi_append_to_stream``). Where the server's
``ServerFeatures`` lists one the client can use, :func:`open_esdb_store` returns a
:class:`TransactionalEsdbEventStore`: the processors then commit a batch's instance appends and
their checkpoint together, as on SQLite and PostgreSQL. Otherwise (EventStoreDB 24.10 or older,
or 25.1 with ``esdbclient``) it returns a plain :class:`EsdbEventStore`, which is no
:class:`~decider.stores.protocol.TransactionalStore`, so the processors append stream by stream
and then save the checkpoint.

How a batch maps onto one atomic write (a "session" below, whichever call carries it):

- a session takes each stream once: appends to a stream that occurs more than once are merged
  into one request after reading that stream, deciding each append's idempotency as the
  reference store does, and expecting the revision read (a concurrent writer is a conflict);
- the checkpoint is one more request, to the checkpoint stream with ``ANY`` (the last save
  wins, as in :meth:`EsdbEventStore.save_checkpoint`), placed last;
- the client returns only the session's commit position, so each append's revision and
  position are read back in one backwards ``$all`` read from that position (the session's
  records are contiguous there), by event id.

With a lease (``append_batch(..., lease=)``), the session holds one more request: a copy of the
lease to its stream, expecting the revision where this owner holds it, so a takeover fails the
whole commit (:mod:`decider.stores._esdb_leases`).

WARNING: v2 records carry metadata as string properties: a batch with an event whose metadata
is not empty or a JSON object of strings (the codec's always is) is appended stream by stream,
not atomically. Records written by a session read back through v1 with the properties as a JSON
object plus ``$schema.name`` and ``$schema.format`` keys, as KurrentDB returns them.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, overload

from decider.stores._esdb_records import NotProperties, append_records
from decider.stores._expectations import Stored, plan_append, validate_append
from decider.stores.errors import StoreError, WrongExpectedVersion
from decider.stores.esdb import (
    _STATES,
    CHECKPOINT_STREAM_PREFIX,
    CLIENT,
    EsdbEventStore,
    _to_new,
    checkpoint_event,
    map_error,
)
from decider.stores.leases import Lease
from decider.stores.names import CHECKPOINT
from decider.stores.protocol import (
    ANY,
    NO_STREAM,
    AppendResult,
    ExpectedRevision,
    NewEvent,
    StreamAppend,
)

_V2_SERVICE = "kurrentdb.protocol.v2.streams.streamsservice"
_APPEND_SESSION = (_V2_SERVICE, "appendsession")
_APPEND_RECORDS = (_V2_SERVICE, "appendrecords")
_FEATURES = "/event_store.client.server_features.ServerFeatures/GetSupportedMethods"
_CHECKPOINT_IDS = uuid.UUID("6f0d8a53-3f0e-4d5c-9a57-8f1f6c2b7e21")
_READ_BACK_SLACK = 16  # records a session may add besides ours (undeleting metadata)
_Request = tuple[str, list[NewEvent], ExpectedRevision]
_LEASE_RACES = 20  # fenced commits retried after our own renewals moved the lease stream


def open_esdb_store(uri: str, *, multi_stream_append: bool = True) -> EsdbEventStore:
    """The store for ``uri``: transactional where client and server can append atomically to
    several streams (``multi_stream_append=False`` never asks), plain otherwise.

    KurrentDB 26.1's ``AppendRecords`` is called on the client's channel with this package's
    own messages, so it serves either client; 25.1's ``AppendSession`` goes through
    ``kurrentdbclient``'s ``multi_append_to_stream``."""
    store = EsdbEventStore(uri)
    if not multi_stream_append:
        return store
    methods = server_methods(store)
    records = _APPEND_RECORDS in methods
    if not records and (CLIENT.new_events is None or _APPEND_SESSION not in methods):
        return store
    store.close()
    return TransactionalEsdbEventStore(uri, append_records=records)


def server_methods(store: EsdbEventStore) -> frozenset[tuple[str, str]]:
    """The (service, method) pairs the server's ``ServerFeatures`` lists, lowercased; none if
    the probe fails (an EventStoreDB older than 22.10 answers UNIMPLEMENTED)."""
    from decider.stores.esdb_testserver._proto import serverfeatures_pb2

    client: Any = store._client
    try:
        channel = client._connection._grpc_channel
        call = channel.unary_unary(
            _FEATURES,
            request_serializer=lambda _: b"",
            response_deserializer=serverfeatures_pb2.SupportedMethods.FromString,
        )
        supported = call(
            None,
            timeout=5.0,
            metadata=client._call_metadata,
            credentials=client._call_credentials,
        )
    except Exception:
        return frozenset()
    return frozenset((m.service_name, m.method_name) for m in supported.methods)


def supports_append_session(store: EsdbEventStore) -> bool:
    """Whether the client has ``multi_append_to_stream`` and the server's ``ServerFeatures``
    lists ``AppendSession``."""
    return CLIENT.new_events is not None and _APPEND_SESSION in server_methods(store)


def supports_append_records(store: EsdbEventStore) -> bool:
    """Whether the server's ``ServerFeatures`` lists 26.1's ``AppendRecords`` (either client
    can then append atomically: the store makes the call itself)."""
    return _APPEND_RECORDS in server_methods(store)


class TransactionalEsdbEventStore(EsdbEventStore):
    """An :class:`EsdbEventStore` that is also a
    :class:`~decider.stores.protocol.TransactionalStore`, through KurrentDB's ``AppendSession``.

    Open it with :func:`open_esdb_store`, which checks that the server can; with
    ``append_records`` a batch is one ``AppendRecords`` call (KurrentDB 26.1), else one
    ``AppendSession`` (25.1).
    """

    def __init__(self, uri: str, *, append_records: bool = False) -> None:
        super().__init__(uri)
        self._send = self._records if append_records else self._session

    def append_batch(
        self,
        appends: Sequence[StreamAppend],
        checkpoint: tuple[str, int] | None = None,
        *,
        lease: Lease | None = None,
    ) -> Sequence[AppendResult]:
        """Apply every append and the checkpoint atomically: all of them, or none.

        Raises :class:`~decider.stores.errors.WrongExpectedVersion` (naming the first stream
        that failed its check) and writes nothing if any expected revision does not hold.
        With a ``lease``, the session also appends a copy of the lease to its stream, expecting
        the revision at which this owner holds it: if another owner took it over (or it was
        released), nothing is written and :class:`~decider.stores.leases.LeaseLost` is raised
        (:mod:`decider.stores._esdb_leases`).
        The results are read back from the log when first looked at (:class:`_Results`).
        """
        for item in appends:
            validate_append(len(item.events), item.expected_revision)
            self.name_rules.check_append(item.stream, item.events)
        if checkpoint is not None:
            self.name_rules.check(CHECKPOINT, checkpoint[0])
        self._check_open()
        if lease is None:
            return self._append_batch(appends, checkpoint, None)
        fresh = False
        for _ in range(_LEASE_RACES):
            stream, event, revision = self._leases.fence(lease, fresh=fresh)
            try:
                results = self._append_batch(appends, checkpoint, (stream, [event], revision))
            except WrongExpectedVersion as conflict:
                # the lease stream moved (a takeover, a release, or our own renewal), or an
                # instance stream conflicts: a lost lease is the answer in either case
                self._leases.fence(lease, fresh=True)
                if conflict.stream != stream:
                    raise
                fresh = True
                continue
            self._leases.committed(lease, revision + 1)
            return results
        raise StoreError(f"lease on partition {lease.partition!r}: too many concurrent writers")

    def _append_batch(
        self,
        appends: Sequence[StreamAppend],
        checkpoint: tuple[str, int] | None,
        fence: _Request | None,
    ) -> Sequence[AppendResult]:
        # AppendRecords' request is refused before anything is sent (NotProperties): no
        # metadata is parsed twice on that path
        if self._send is self._session and not all(
            _properties_only(e.metadata) for item in appends for e in item.events
        ):
            return self._not_atomic(appends, checkpoint, fence)
        try:
            return self._atomic(appends, checkpoint, fence)
        except NotProperties:
            return self._not_atomic(appends, checkpoint, fence)

    def _not_atomic(
        self,
        appends: Sequence[StreamAppend],
        checkpoint: tuple[str, int] | None,
        fence: _Request | None,
    ) -> list[AppendResult]:
        if fence is not None:  # not atomic: the lease is checked first, then the rest
            self.append(*fence)
        return self._one_by_one(appends, checkpoint)

    def _atomic(
        self,
        appends: Sequence[StreamAppend],
        checkpoint: tuple[str, int] | None,
        fence: _Request | None,
    ) -> Sequence[AppendResult]:
        # the appends' plan, then the checkpoint and the fence (the same in every plan)
        tail: list[_Request] = []
        if checkpoint is not None:
            tail.append(self._checkpoint_request(appends, *checkpoint, fence))
        if fence is not None:
            tail.append(fence)
        requests, known, guessed = self._plan(appends, careful=False)
        requests.extend(tail)
        try:
            try:
                position = self._send(requests, appends) if requests else None
            except WrongExpectedVersion as conflict:
                if not guessed or (fence is not None and conflict.stream == fence[0]):
                    raise
                # a merged ANY request mixed stored and new events: plan it event by event
                requests, known, _ = self._plan(appends, careful=True)
                requests.extend(tail)
                position = self._send(requests, appends) if requests else None
        except WrongExpectedVersion as conflict:
            if fence is not None and conflict.stream == fence[0]:
                raise  # the lease moved: the caller reads it again
            # KurrentDB takes a session whose every stream is already written as idempotent,
            # but a mix (a retried append beside a new checkpoint) as a conflict, where the
            # reference store lets each append be idempotent on its own: drop the appends that
            # are stored already (a real conflict is raised here) and send the rest once more.
            requests = self._unwritten(requests, appends)
            position = self._send(requests, appends) if requests else None
        if checkpoint is not None:
            self._limit_checkpoint_stream(checkpoint[0])
        count = sum(len(r[1]) for r in requests)

        def resolve() -> list[AppendResult]:
            found = {} if position is None else self._read_back(position, count)
            return [self._result(appends[i], known[i], found) for i in range(len(appends))]

        return _Results(len(appends), resolve)

    def _plan(
        self, appends: Sequence[StreamAppend], *, careful: bool
    ) -> tuple[list[_Request], dict[int, AppendResult | uuid.UUID], bool]:
        """One request per stream, and per append its result or its last event id; whether a
        request merged ``ANY`` appends without reading the stream (a guess: see below)."""
        requests: list[_Request] = []
        known: dict[int, AppendResult | uuid.UUID] = {}  # per append: result, or its last id
        guessed = False
        by_stream: dict[str, list[int]] = {}
        for index, item in enumerate(appends):
            by_stream.setdefault(item.stream, []).append(index)
        for stream, indexes in by_stream.items():
            items = [appends[i] for i in indexes]
            if len(indexes) == 1:
                item = items[0]
                requests.append((stream, list(item.events), item.expected_revision))
                known[indexes[0]] = item.events[-1].id
            elif not careful and _all_new_any(items):
                # Several ANY appends of distinct events (a processor's fines, one shared
                # stream): one ANY request, no read of a stream that may be long. If some were
                # stored already, KurrentDB refuses the mix and the caller plans carefully.
                requests.append((stream, [e for item in items for e in item.events], ANY))
                known.update((i, appends[i].events[-1].id) for i in indexes)
                guessed = True
            else:
                merged = self._merge(stream, items)
                if merged[0]:
                    requests.append((stream, merged[0], merged[1]))
                known.update(zip(indexes, merged[2], strict=True))
        return requests, known, guessed

    @staticmethod
    def _checkpoint_request(
        appends: Sequence[StreamAppend],
        name: str,
        checkpoint_position: int,
        fence: _Request | None = None,
    ) -> _Request:
        # the id follows from the batch: a batch sent again (its first try's answer was
        # lost) is then wholly idempotent, not a mix of old appends and a new checkpoint,
        # which KurrentDB would refuse as a conflict. A fenced batch's id follows from its
        # fence event too (new in every commit): otherwise an owner that takes a partition
        # over and moves its checkpoint to where the last owner left it (no appends) would
        # send the stored checkpoint event beside its new fence event, a mix refused on every
        # retry.
        events = [e for item in appends for e in item.events]
        if fence is not None:
            events.extend(fence[1])
        batch_key = b"".join(e.id.bytes for e in events)  # not str(): a UUID's is slow
        event = checkpoint_event(checkpoint_position)
        event = NewEvent(
            id=_derived_id(f"{name}:{checkpoint_position}:".encode() + batch_key),
            type=event.type,
            data=event.data,
        )
        return (CHECKPOINT_STREAM_PREFIX + name, [event], ANY)

    def _session(
        self,
        requests: list[tuple[str, list[NewEvent], ExpectedRevision]],
        appends: Sequence[StreamAppend],
    ) -> int:
        new_events: Any = CLIENT.new_events
        parts = [
            new_events(
                stream_name=stream,
                events=[_to_new(e) for e in events],
                current_version=expected if isinstance(expected, int) else _STATES[expected],
            )
            for stream, events, expected in requests
        ]
        try:
            return int(self._client.multi_append_to_stream(parts))
        except CLIENT.base_error as exc:
            error = map_error(exc)
            if isinstance(error, WrongExpectedVersion):
                expected = {a.stream: a.expected_revision for a in appends}
                error = WrongExpectedVersion(
                    error.stream, expected.get(error.stream, ANY), error.actual
                )
            raise error from exc

    def _records(
        self,
        requests: list[tuple[str, list[NewEvent], ExpectedRevision]],
        appends: Sequence[StreamAppend],
    ) -> int:
        """Write ``requests`` in one ``AppendRecords`` call (:mod:`._esdb_records`); the
        commit position."""
        try:
            return append_records(self._client, requests)
        except WrongExpectedVersion as error:
            expected = {a.stream: a.expected_revision for a in appends}
            raise WrongExpectedVersion(
                error.stream, expected.get(error.stream, error.expected), error.actual
            ) from error

    def _read_back(self, position: int, count: int) -> dict[uuid.UUID, tuple[int, int]]:
        """Revision and position by event id of the records just before and at ``position``."""
        try:
            before = self._client.read_all(
                commit_position=position,
                backwards=True,
                limit=count + _READ_BACK_SLACK,
                filter_exclude=(),
            )
            found = {
                e.id: (int(e.stream_position), int(e.commit_position))
                for e in before
                if e.commit_position is not None
            }
            # a backwards read from a position leaves that position out: read it forwards
            for event in self._client.read_all(
                commit_position=position, limit=1, filter_exclude=()
            ):
                found[event.id] = (int(event.stream_position), int(event.commit_position))
        except CLIENT.base_error as exc:
            raise map_error(exc) from exc
        return found

    def _result(
        self,
        item: StreamAppend,
        known: AppendResult | uuid.UUID,
        found: Mapping[uuid.UUID, tuple[int, int]],
    ) -> AppendResult:
        if isinstance(known, AppendResult):
            return known
        located = found.get(known)
        if located is None:  # already stored before this batch: find it in its stream
            try:
                located = self._locate(item.stream, known)
            except CLIENT.base_error as exc:
                raise map_error(exc, item.stream) from exc
        return AppendResult(next_expected_revision=located[0], position=located[1])

    def _merge(
        self, stream: str, items: list[StreamAppend]
    ) -> tuple[list[NewEvent], ExpectedRevision, list[AppendResult | uuid.UUID]]:
        """One request for several appends to ``stream``: the events to write, the revision
        they expect (the stream's, as read), and per append its result or its last event id."""
        view = _StreamView(self.read_stream(stream))
        by_revision = view.by_revision
        last = view.last
        expected: ExpectedRevision = NO_STREAM if last is None else last
        new: list[NewEvent] = []
        outcomes: list[AppendResult | uuid.UUID] = []
        for item in items:
            ids = [e.id for e in item.events]
            decided = view.plan(stream, item.expected_revision, ids, last)
            if decided is None:
                first = -1 if last is None else last
                for offset, event in enumerate(item.events, start=1):
                    by_revision[first + offset] = (event.id, first + offset, -1)
                last = first + len(item.events)
                new.extend(item.events)
                outcomes.append(item.events[-1].id)
            elif decided.position == -1:  # written earlier in this batch
                outcomes.append(ids[-1])
            else:
                outcomes.append(decided)
        return new, expected, outcomes

    def _unwritten(
        self,
        requests: list[tuple[str, list[NewEvent], ExpectedRevision]],
        appends: Sequence[StreamAppend],
    ) -> list[tuple[str, list[NewEvent], ExpectedRevision]]:
        """The requests whose events are not stored yet; raises the first real conflict."""
        left: list[tuple[str, list[NewEvent], ExpectedRevision]] = []
        for stream, events, expected in requests:
            if stream.startswith(CHECKPOINT_STREAM_PREFIX) and expected is ANY:
                left.append((stream, events, expected))
                continue
            view = _StreamView(self.read_stream(stream))
            try:
                decided = view.plan(stream, expected, [e.id for e in events], view.last)
            except WrongExpectedVersion as conflict:
                wanted = {a.stream: a.expected_revision for a in appends}
                raise WrongExpectedVersion(
                    stream, wanted.get(stream, expected), conflict.actual
                ) from None
            if decided is None:
                left.append((stream, events, expected))
        return left

    def _one_by_one(
        self, appends: Sequence[StreamAppend], checkpoint: tuple[str, int] | None
    ) -> list[AppendResult]:
        results = [self.append(a.stream, a.events, a.expected_revision) for a in appends]
        if checkpoint is not None:
            self.save_checkpoint(*checkpoint)
        return results


class _Results(Sequence[AppendResult]):
    """A batch's results, read back from the log when one is first looked at.

    The client returns only the session's position; the processors never look at the results,
    so they do not pay the read (two ``$all`` reads per batch: 8.4 s of append_batch's
    14.5 s in a profiled 1,000-workflow run).
    """

    def __init__(self, length: int, resolve: Callable[[], list[AppendResult]]) -> None:
        self._length = length
        self._resolve: Callable[[], list[AppendResult]] | None = resolve
        self._results: list[AppendResult] = []

    def _all(self) -> list[AppendResult]:
        if self._resolve is not None:
            self._results, self._resolve = self._resolve(), None
        return self._results

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> AppendResult: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[AppendResult]: ...

    def __getitem__(self, index: int | slice) -> AppendResult | Sequence[AppendResult]:
        return self._all()[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return self._all() == list(other)

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which are not hashable

    def __repr__(self) -> str:
        return repr(self._all())


class _StreamView:
    """A stream's stored events as :func:`plan_append` asks for them."""

    def __init__(self, stored: Sequence[Any]) -> None:
        self.by_revision: dict[int, Stored] = {
            e.revision: (e.id, e.revision, e.position) for e in stored
        }
        self.last: int | None = stored[-1].revision if stored else None

    def plan(
        self, stream: str, expected: ExpectedRevision, ids: list[uuid.UUID], last: int | None
    ) -> AppendResult | None:
        """:func:`plan_append` against these events (``last`` may count this batch's)."""
        return plan_append(
            stream, expected, last, ids, read_range=self._read_range, find_ids=self._find_ids
        )

    def _read_range(self, first: int, count: int) -> list[Stored]:
        return [self.by_revision[r] for r in range(first, first + count) if r in self.by_revision]

    def _find_ids(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Stored]:
        wanted = set(ids)
        in_order = sorted(self.by_revision.values(), key=lambda s: s[1])
        return {s[0]: s for s in in_order if s[0] in wanted}  # the latest copy of an id


def _derived_id(key: bytes) -> uuid.UUID:
    """A name-based (version 5) UUID of ``key`` under the checkpoints' namespace."""
    digest = hashlib.sha1(_CHECKPOINT_IDS.bytes + key, usedforsecurity=False).digest()
    return uuid.UUID(bytes=digest[:16], version=5)


def _all_new_any(items: Sequence[StreamAppend]) -> bool:
    """Whether every append expects ``ANY`` and no event id occurs twice among them."""
    if any(item.expected_revision is not ANY for item in items):
        return False
    ids = [e.id for item in items for e in item.events]
    return len(ids) == len(set(ids))


def _properties_only(metadata: bytes) -> bool:
    """Whether v2 can carry ``metadata``: empty, or a JSON object whose values are strings."""
    if not metadata:
        return True
    try:
        parsed = json.loads(metadata)
    except ValueError:
        return False
    return isinstance(parsed, dict) and all(isinstance(v, str) for v in parsed.values())
