"""Atomic batches on KurrentDB 25.1+: :class:`TransactionalEsdbEventStore` and how to open one.

KurrentDB's v2 calls append to several streams in one atomic write, each stream with its own
expected revision: 26.1's unary ``AppendRecords`` (one message for the whole batch, made by the
store itself: :mod:`._records`, so with either client) and 25.1's client-streaming
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

With leases (``append_batch(..., leases=)``), the session holds one more request: a copy of the
lease to its stream, expecting the revision where this owner holds it, so a takeover fails the
whole commit (:mod:`decider.stores.esdb._leases`).

WARNING: v2 records carry metadata as string properties: a batch with an event whose metadata
is not empty or a JSON object of strings (the codec's always is) is appended stream by stream,
not atomically. Records written by a session read back through v1 with the properties as a JSON
object plus ``$schema.name`` and ``$schema.format`` keys, as KurrentDB returns them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from decider.stores._expectations import validate_append
from decider.stores.errors import StoreError, WrongExpectedVersion
from decider.stores.esdb._batch_parts import (
    LazyResults,
    Request,
    StreamView,
    all_new_any,
    checkpoint_request,
    properties_only,
)
from decider.stores.esdb._client import CLIENT, call_options, channel
from decider.stores.esdb._errors import mapped
from decider.stores.esdb._records import NotProperties, append_records
from decider.stores.esdb.store import (
    _STATES,
    CHECKPOINT_STREAM_PREFIX,
    EsdbEventStore,
    _to_new,
)
from decider.stores.leases import Lease, batch_checkpoints, batch_leases
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
_READ_BACK_SLACK = 16  # records a session may add besides ours (undeleting metadata)
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
    from decider.stores.esdb._proto import serverfeatures_pb2

    client: Any = store._client
    try:
        call = channel(client).unary_unary(
            _FEATURES,
            request_serializer=lambda _: b"",
            response_deserializer=serverfeatures_pb2.SupportedMethods.FromString,
        )
        supported = call(None, timeout=5.0, **call_options(client))
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
        *,
        checkpoints: Sequence[tuple[str, int]] = (),
        leases: Sequence[Lease] = (),
    ) -> Sequence[AppendResult]:
        """Apply every append and the checkpoints atomically: all of them, or none.

        Raises :class:`~decider.stores.errors.WrongExpectedVersion` (naming the first stream
        that failed its check) and writes nothing if any expected revision does not hold.
        With ``leases`` (one commit may carry the work of several
        partitions, each with its checkpoint), the write also appends a copy of each lease to
        its stream, expecting the revision at which this owner holds it: if another owner took
        one over (or it was released), nothing is written and
        :class:`~decider.stores.leases.LeaseLost` is raised for the first such lease, in the
        order given (:mod:`decider.stores.esdb._leases`).
        The results are read back from the log when first looked at
        (:class:`~decider.stores.esdb._batch_parts.LazyResults`).
        """
        for item in appends:
            validate_append(len(item.events), item.expected_revision)
            self.name_rules.check_append(item.stream, item.events)
        marks = batch_checkpoints(checkpoints)
        for name, _ in marks:
            self.name_rules.check(CHECKPOINT, name)
        fenced_by = batch_leases(leases)
        self._check_open()
        if not fenced_by:
            return self._append_batch(appends, marks, [])
        fresh: set[str] = set()
        for _ in range(_LEASE_RACES):
            fences = [self._leases.fence(held, fresh=held.partition in fresh) for held in fenced_by]
            requests: list[Request] = [(stream, [event], at) for stream, event, at in fences]
            try:
                results = self._append_batch(appends, marks, requests)
            except WrongExpectedVersion as conflict:
                # a lease stream moved (a takeover, a release, or our own renewal), or an
                # instance stream conflicts: a lost lease is the answer in either case, the
                # first lost one in the order given
                for held in fenced_by:
                    self._leases.fence(held, fresh=True)
                moved = [
                    h for h, f in zip(fenced_by, fences, strict=True) if f[0] == conflict.stream
                ]
                if not moved:
                    raise
                fresh.update(h.partition for h in moved)
                continue
            for held, (_, _, revision) in zip(fenced_by, fences, strict=True):
                self._leases.committed(held, revision + 1)
            return results
        shown = ", ".join(repr(held.partition) for held in fenced_by)
        raise StoreError(f"leases on partitions {shown}: too many concurrent writers")

    def _append_batch(
        self,
        appends: Sequence[StreamAppend],
        marks: list[tuple[str, int]],
        fences: list[Request],
    ) -> Sequence[AppendResult]:
        # AppendRecords' request is refused before anything is sent (NotProperties): no
        # metadata is parsed twice on that path
        if self._send is self._session and not all(
            properties_only(e.metadata) for item in appends for e in item.events
        ):
            return self._not_atomic(appends, marks, fences)
        try:
            return self._atomic(appends, marks, fences)
        except NotProperties:
            return self._not_atomic(appends, marks, fences)

    def _not_atomic(
        self, appends: Sequence[StreamAppend], marks: list[tuple[str, int]], fences: list[Request]
    ) -> list[AppendResult]:
        for fence in fences:  # not atomic: the leases are checked first, then the rest
            self.append(*fence)
        results = [self.append(a.stream, a.events, a.expected_revision) for a in appends]
        for mark in marks:
            self.save_checkpoint(*mark)
        return results

    def _atomic(
        self, appends: Sequence[StreamAppend], marks: list[tuple[str, int]], fences: list[Request]
    ) -> Sequence[AppendResult]:
        # the appends' plan, then the checkpoints and the fences (the same in every plan)
        tail = [checkpoint_request(appends, name, at, fences) for name, at in marks]
        tail.extend(fences)
        fenced = {fence[0] for fence in fences}
        requests, known, guessed = self._plan(appends, careful=False)
        requests.extend(tail)
        try:
            try:
                position = self._send(requests, appends) if requests else None
            except WrongExpectedVersion as conflict:
                if not guessed or conflict.stream in fenced:
                    raise
                # a merged ANY request mixed stored and new events: plan it event by event
                requests, known, _ = self._plan(appends, careful=True)
                requests.extend(tail)
                position = self._send(requests, appends) if requests else None
        except WrongExpectedVersion as conflict:
            if conflict.stream in fenced:
                raise  # a lease moved: the caller reads it again
            # KurrentDB takes a session whose every stream is already written as idempotent,
            # but a mix (a retried append beside a new checkpoint) as a conflict, where the
            # reference store lets each append be idempotent on its own: drop the appends that
            # are stored already (a real conflict is raised here) and send the rest once more.
            requests = self._unwritten(requests, appends)
            position = self._send(requests, appends) if requests else None
        for name, _ in marks:
            self._limit_checkpoint_stream(name)
        count = sum(len(r[1]) for r in requests)

        def resolve() -> list[AppendResult]:
            found = {} if position is None else self._read_back(position, count)
            return [self._result(appends[i], known[i], found) for i in range(len(appends))]

        return LazyResults(len(appends), resolve)

    def _plan(
        self, appends: Sequence[StreamAppend], *, careful: bool
    ) -> tuple[list[Request], dict[int, AppendResult | uuid.UUID], bool]:
        """One request per stream, and per append its result or its last event id; whether a
        request merged ``ANY`` appends without reading the stream (a guess: see below)."""
        requests: list[Request] = []
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
            elif not careful and all_new_any(items):
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
        # a conflict names the stream and what the caller's append expected of it
        with mapped(expected={a.stream: a.expected_revision for a in appends}):
            return int(self._client.multi_append_to_stream(parts))

    def _records(
        self,
        requests: list[tuple[str, list[NewEvent], ExpectedRevision]],
        appends: Sequence[StreamAppend],
    ) -> int:
        """Write ``requests`` in one ``AppendRecords`` call (:mod:`._records`); the
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
        with mapped():
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
            with mapped(item.stream):
                located = self._locate(item.stream, known)
        return AppendResult(next_expected_revision=located[0], position=located[1])

    def _merge(
        self, stream: str, items: list[StreamAppend]
    ) -> tuple[list[NewEvent], ExpectedRevision, list[AppendResult | uuid.UUID]]:
        """One request for several appends to ``stream``: the events to write, the revision
        they expect (the stream's, as read), and per append its result or its last event id."""
        view = StreamView(self.read_stream(stream))
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
            view = StreamView(self.read_stream(stream))
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
