"""Contract tests of the optional abilities and of concurrent appenders."""

from __future__ import annotations

import itertools
import threading
import uuid
from collections import Counter

import pytest

from decider.stores.contract._support import Scope, ids_of, new_events, run_threads
from decider.stores.errors import WrongExpectedVersion
from decider.stores.protocol import (
    ANY,
    EXISTS,
    NO_STREAM,
    AppendResult,
    CheckpointStore,
    EventStore,
    ExpectedRevision,
    IdLookupStore,
    StreamAppend,
    TransactionalStore,
)


def _checkpoints(store: EventStore) -> CheckpointStore:
    if not isinstance(store, CheckpointStore):
        pytest.skip(f"{type(store).__name__} is not a CheckpointStore")
    return store


def _transactional(store: EventStore) -> TransactionalStore:
    if not isinstance(store, TransactionalStore):
        pytest.skip(f"{type(store).__name__} is not a TransactionalStore")
    return store


class IdLookupContract:
    """Which event ids a stream holds (only for an :class:`IdLookupStore`)."""

    def test_stored_ids_are_those_of_the_stream(self, scope: Scope) -> None:
        store = scope.store
        if not isinstance(store, IdLookupStore):
            pytest.skip(f"{type(store).__name__} is not an IdLookupStore")
        ours, other = scope.stream("ours"), scope.stream("other")
        written = new_events(3)  # the first at revision 0, the others after it
        store.append(ours, written, NO_STREAM)
        elsewhere = new_events(1)
        store.append(other, elsewhere, NO_STREAM)
        never = uuid.uuid4()
        asked = [*ids_of(written), elsewhere[0].id, never]
        assert store.stored_ids(ours, asked) == set(ids_of(written))
        assert store.stored_ids(ours, [written[0].id]) == {written[0].id}
        assert store.stored_ids(ours, []) == set()
        assert store.stored_ids(scope.stream("missing"), asked) == set()


class CheckpointContract:
    """Checkpoints (only for stores that are a :class:`CheckpointStore`)."""

    def test_missing_checkpoint_is_none(self, scope: Scope) -> None:
        assert _checkpoints(scope.store).load_checkpoint(scope.stream("never")) is None

    def test_save_load_and_overwrite_checkpoints(self, scope: Scope) -> None:
        store = _checkpoints(scope.store)
        first, second = scope.stream("p1"), scope.stream("p2")
        store.save_checkpoint(first, 5)
        assert store.load_checkpoint(first) == 5
        assert store.load_checkpoint(second) is None
        store.save_checkpoint(second, 7)
        store.save_checkpoint(first, 12)
        store.save_checkpoint(first, 9)
        assert (store.load_checkpoint(first), store.load_checkpoint(second)) == (9, 7)


class TransactionContract:
    """Multi-stream appends with a checkpoint (only for a :class:`TransactionalStore`)."""

    def test_append_batch_writes_every_stream_and_the_checkpoint(self, scope: Scope) -> None:
        store = _transactional(scope.store)
        scope.store.append(scope.stream("b"), new_events(1), NO_STREAM)
        a_events, b_events = new_events(2), new_events(3)
        results = store.append_batch(
            [
                StreamAppend(scope.stream("a"), a_events, NO_STREAM),
                StreamAppend(scope.stream("b"), b_events, 0),
            ],
            checkpoints=[(scope.stream("proc"), 42)],
        )
        log = scope.log()
        assert [r.next_expected_revision for r in results] == [1, 3]
        assert results[0].position == log[-4].position
        assert results[1].position == log[-1].position
        assert ids_of(scope.store.read_stream(scope.stream("a"))) == ids_of(a_events)
        assert ids_of(scope.store.read_stream(scope.stream("b"), 1)) == ids_of(b_events)
        if isinstance(store, CheckpointStore):
            assert store.load_checkpoint(scope.stream("proc")) == 42

    def test_append_batch_is_all_or_nothing(self, scope: Scope) -> None:
        store = _transactional(scope.store)
        scope.store.append(scope.stream("b"), new_events(1), NO_STREAM)
        if isinstance(store, CheckpointStore):
            store.save_checkpoint(scope.stream("proc"), 1)
        log = scope.log()
        with pytest.raises(WrongExpectedVersion) as caught:
            store.append_batch(
                [
                    StreamAppend(scope.stream("a"), new_events(2), NO_STREAM),
                    StreamAppend(scope.stream("b"), new_events(1), 5),
                    StreamAppend(scope.stream("c"), new_events(1), ANY),
                ],
                checkpoints=[(scope.stream("proc"), 99)],
            )
        assert caught.value.stream == scope.stream("b")
        assert scope.log() == log
        assert scope.store.read_stream(scope.stream("a")) == []
        if isinstance(store, CheckpointStore):
            assert store.load_checkpoint(scope.stream("proc")) == 1

    def test_append_batch_is_idempotent(self, scope: Scope) -> None:
        store = _transactional(scope.store)
        batch = [
            StreamAppend(scope.stream("a"), new_events(2), NO_STREAM),
            StreamAppend(scope.stream("b"), new_events(1), ANY),
        ]
        first = store.append_batch(batch, checkpoints=[(scope.stream("proc"), 3)])
        log = scope.log()
        assert store.append_batch(batch, checkpoints=[(scope.stream("proc"), 3)]) == first
        assert scope.log() == log

    def test_append_batch_may_append_to_one_stream_twice(self, scope: Scope) -> None:
        store = _transactional(scope.store)
        first, second = new_events(1), new_events(2)
        results = store.append_batch(
            [
                StreamAppend(scope.stream(), first, NO_STREAM),
                StreamAppend(scope.stream(), second, 0),
            ]
        )
        assert [r.next_expected_revision for r in results] == [0, 2]
        assert ids_of(scope.store.read_stream(scope.stream())) == ids_of(first + second)

    def test_append_batch_checks_ids_of_appends_without_a_revision(self, scope: Scope) -> None:
        """ANY / EXISTS appends in a batch follow the idempotency rule against what is stored
        and against what the batch itself wrote before them."""
        store = _transactional(scope.store)
        stored = new_events(2)
        before = scope.store.append(scope.stream("shared"), stored, NO_STREAM)
        fresh, again = new_events(1), new_events(1)
        results = store.append_batch(
            [
                StreamAppend(scope.stream("shared"), stored, ANY),  # stored already: no-op
                StreamAppend(scope.stream("shared"), fresh, EXISTS),  # new: written
                StreamAppend(scope.stream("shared"), fresh, ANY),  # written by this batch
                StreamAppend(scope.stream("other"), again, ANY),  # a new stream
                StreamAppend(scope.stream("other"), again, EXISTS),  # written by this batch
            ]
        )
        shared = scope.store.read_stream(scope.stream("shared"))
        assert ids_of(shared) == ids_of(stored + fresh)
        assert ids_of(scope.store.read_stream(scope.stream("other"))) == ids_of(again)
        assert results[0] == before
        assert results[1] == results[2] == AppendResult(2, shared[2].position)
        assert results[3].next_expected_revision == results[4].next_expected_revision == 0
        assert results[3].position == results[4].position
        # Some ids stored and some not: a conflict, and the batch writes nothing.
        log = scope.log()
        with pytest.raises(WrongExpectedVersion):
            store.append_batch(
                [
                    StreamAppend(scope.stream("a"), new_events(1), NO_STREAM),
                    StreamAppend(scope.stream("shared"), [stored[1], *new_events(1)], ANY),
                ]
            )
        assert scope.log() == log


class ConcurrencyContract:
    """Threads racing on one store: nothing lost, doubled or reordered."""

    def test_racing_appenders_on_one_stream(self, scope: Scope) -> None:
        threads, per_thread = 6, 8
        stream = scope.stream()
        wins: list[int] = []
        written: list[uuid.UUID] = []
        lock = threading.Lock()

        def appender(_: int) -> None:
            expected: ExpectedRevision = NO_STREAM
            for event in new_events(per_thread):
                while True:
                    try:
                        result = scope.store.append(stream, [event], expected)
                    except WrongExpectedVersion as conflict:
                        actual = conflict.actual
                        expected = NO_STREAM if actual is None else actual
                        continue
                    with lock:
                        wins.append(result.next_expected_revision)
                        written.append(event.id)
                    expected = result.next_expected_revision
                    break

        run_threads(threads, appender)
        total = threads * per_thread
        assert sorted(wins) == list(range(total)), "each revision must have exactly one winner"
        stored = scope.store.read_stream(stream)
        assert [e.revision for e in stored] == list(range(total))
        assert sorted(ids_of(stored)) == sorted(written)

    def test_appenders_on_different_streams(self, scope: Scope) -> None:
        threads, appends, size = 6, 8, 2
        batches: dict[int, list[list[uuid.UUID]]] = {}

        def appender(index: int) -> None:
            mine = batches.setdefault(index, [])
            expected: ExpectedRevision = NO_STREAM
            for _ in range(appends):
                events = new_events(size)
                result: AppendResult = scope.store.append(
                    scope.stream(str(index)), events, expected
                )
                expected = result.next_expected_revision
                mine.append(ids_of(events))

        run_threads(threads, appender)
        log = scope.log()
        positions = [e.position for e in log]
        assert all(a < b for a, b in itertools.pairwise(positions))
        counts = Counter(ids_of(log))
        assert len(counts) == threads * appends * size
        assert set(counts.values()) == {1}
        index_of = {event_id: i for i, event_id in enumerate(ids_of(log))}
        for index, mine in batches.items():
            stream = scope.store.read_stream(scope.stream(str(index)))
            assert [e.revision for e in stream] == list(range(appends * size))
            assert ids_of(stream) == [i for batch in mine for i in batch]
            for batch in mine:
                spots = [index_of[i] for i in batch]
                assert spots == list(range(spots[0], spots[0] + size)), "an append was split"
