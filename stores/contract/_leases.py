"""Contract tests of leases and fenced commits (only for stores that are a LeaseStore).

Expiry is the store's own clock (the database server's on PostgreSQL), so a takeover test
gives its lease a short time to live and waits, on a condition with a timeout, until another
owner's claim succeeds: no sleep decides the outcome.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol

import pytest

from decider.stores.contract._support import Scope, ids_of, new_events, wait_until
from decider.stores.leases import Lease, LeaseLost, LeaseStore
from decider.stores.protocol import (
    NO_STREAM,
    CheckpointStore,
    EventStore,
    StreamAppend,
    TransactionalStore,
)

LONG = 60.0
"""A time to live no test outlasts."""
SHORT = 0.2
"""A time to live a takeover test waits out."""


class _Leasing(EventStore, LeaseStore, TransactionalStore, Protocol):
    pass


class _Leases(EventStore, LeaseStore, Protocol):
    pass


def _leasing(store: EventStore) -> _Leasing:
    if not isinstance(store, LeaseStore) or not isinstance(store, TransactionalStore):
        pytest.skip(f"{type(store).__name__} is not a LeaseStore and TransactionalStore")
    return store


def _leases(store: EventStore) -> _Leases:
    """``store`` for the tests of leases alone (no fenced commit): a LeaseStore suffices."""
    if not isinstance(store, LeaseStore):
        pytest.skip(f"{type(store).__name__} is not a LeaseStore")
    return store


def _take_over(store: LeaseStore, partition: str, owner: str) -> Lease:
    """Claim ``partition`` for ``owner`` as soon as the current lease has expired."""
    taken: list[Lease] = []

    def claimed() -> bool:
        lease = store.claim_lease(partition, owner, LONG)
        if lease is not None:
            taken.append(lease)
        return bool(taken)

    wait_until(claimed)
    return taken[0]


class LeaseContract:
    """Claim, renew, release, takeover after expiry, and fenced ``append_batch``."""

    def test_claim_grants_a_free_partition_and_refuses_a_held_one(self, scope: Scope) -> None:
        store = _leases(scope.store)
        partition = scope.stream("p")
        first = store.claim_lease(partition, "a", LONG)
        assert first is not None
        assert (first.partition, first.owner, first.epoch) == (partition, "a", 1)
        assert store.claim_lease(partition, "b", LONG) is None
        again = store.claim_lease(partition, "a", LONG)
        assert again is not None and again.epoch == 1 and again.expires_at >= first.expires_at
        assert [lease for lease in store.leases() if lease.partition == partition] == [again]

    def test_renew_keeps_the_epoch_and_moves_the_expiry(self, scope: Scope) -> None:
        store = _leases(scope.store)
        lease = store.claim_lease(scope.stream("p"), "a", 1.0)
        assert lease is not None
        renewed = store.renew_lease(lease, LONG)
        assert (renewed.owner, renewed.epoch) == ("a", lease.epoch)
        assert renewed.expires_at > lease.expires_at
        stale = Lease(lease.partition, "a", lease.epoch + 1, lease.expires_at)
        with pytest.raises(LeaseLost, match="lost"):
            store.renew_lease(stale, LONG)

    def test_another_owner_takes_over_after_expiry_with_the_next_epoch(self, scope: Scope) -> None:
        store = _leases(scope.store)
        partition = scope.stream("p")
        old = store.claim_lease(partition, "a", SHORT)
        assert old is not None
        new = _take_over(store, partition, "b")
        assert (new.owner, new.epoch) == ("b", old.epoch + 1)
        with pytest.raises(LeaseLost) as lost:
            store.renew_lease(old, LONG)
        assert lost.value.current == new
        assert store.claim_lease(partition, "a", LONG) is None
        assert store.release_lease(old) is False

    def test_release_frees_the_partition_at_once(self, scope: Scope) -> None:
        store = _leases(scope.store)
        partition = scope.stream("p")
        lease = store.claim_lease(partition, "a", LONG)
        assert lease is not None
        assert store.release_lease(lease) is True
        [listed] = [x for x in store.leases() if x.partition == partition]
        assert (listed.owner, listed.epoch) == (None, lease.epoch)
        assert store.release_lease(lease) is False
        claimed = store.claim_lease(partition, "b", LONG)
        assert claimed is not None and claimed.epoch == lease.epoch + 1
        # The same owner coming back after a release gets a new epoch too.
        assert store.release_lease(claimed)
        back = store.claim_lease(partition, "b", LONG)
        assert back is not None and back.epoch == claimed.epoch + 1

    def test_a_fenced_commit_after_a_takeover_fails_and_writes_nothing(self, scope: Scope) -> None:
        store = _leasing(scope.store)
        partition, stream = scope.stream("p"), scope.stream("out")
        old = store.claim_lease(partition, "a", SHORT)
        assert old is not None
        first = new_events(1)
        store.append_batch(
            [StreamAppend(stream, first, NO_STREAM)],
            checkpoints=[(scope.stream("cp"), 1)],
            leases=[old],
        )
        new = _take_over(store, partition, "b")
        with pytest.raises(LeaseLost) as lost:
            store.append_batch(
                [StreamAppend(stream, new_events(2), 0)],
                checkpoints=[(scope.stream("cp"), 2)],
                leases=[old],
            )
        assert lost.value.lease == old and lost.value.current == new
        assert ids_of(store.read_stream(stream)) == ids_of(first)
        assert ids_of(scope.log()) == ids_of(first)
        if isinstance(store, CheckpointStore):
            assert store.load_checkpoint(scope.stream("cp")) == 1
        second = new_events(1)
        store.append_batch([StreamAppend(stream, second, 0)], leases=[new])
        assert ids_of(store.read_stream(stream)) == ids_of(first + second)

    def test_a_fenced_commit_needs_a_lease_that_is_held(self, scope: Scope) -> None:
        store = _leasing(scope.store)
        partition, stream = scope.stream("p"), scope.stream("out")
        never = Lease(scope.stream("never"), "a", 1, datetime.now(UTC))
        with pytest.raises(LeaseLost, match="no lease"):
            store.append_batch([StreamAppend(stream, new_events(1), NO_STREAM)], leases=[never])
        lease = store.claim_lease(partition, "a", LONG)
        assert lease is not None and store.release_lease(lease)
        with pytest.raises(LeaseLost, match="released"):
            store.append_batch([StreamAppend(stream, new_events(1), NO_STREAM)], leases=[lease])
        assert store.read_stream(stream) == []

    def test_one_commit_carries_several_partitions_checkpoints_and_leases(
        self, scope: Scope
    ) -> None:
        store = _leasing(scope.store)
        held = [store.claim_lease(scope.stream(f"p{n}"), "a", LONG) for n in range(3)]
        assert all(lease is not None for lease in held)
        leases = [lease for lease in held if lease is not None]
        one, two = scope.stream("one"), scope.stream("two")
        marks = [(scope.stream(f"cp{n}"), 7 + n) for n in range(3)]
        events = new_events(2)
        store.append_batch(
            [StreamAppend(one, events[:1], NO_STREAM), StreamAppend(two, events[1:], NO_STREAM)],
            checkpoints=marks,
            leases=leases,
        )
        assert ids_of(scope.log()) == ids_of(events)
        if isinstance(store, CheckpointStore):
            assert [store.load_checkpoint(name) for name, _ in marks] == [7, 8, 9]
        # A lease given twice fences once; a checkpoint given twice at one position is stored.
        store.append_batch(
            [],
            checkpoints=[marks[0], (scope.stream("cp1"), 10), marks[0]],
            leases=[*leases, leases[0]],
        )
        if isinstance(store, CheckpointStore):
            assert [store.load_checkpoint(name) for name, _ in marks] == [7, 10, 9]
        with pytest.raises(ValueError, match="two positions"):
            store.append_batch([], checkpoints=[(scope.stream("cp0"), 11), marks[0]])

    def test_a_commit_takes_only_the_lists_of_checkpoints_and_leases(self, scope: Scope) -> None:
        """``append_batch`` has no singular ``checkpoint`` or ``lease`` beside the lists."""
        store = _leasing(scope.store)
        lease = store.claim_lease(scope.stream("p"), "a", LONG)
        assert lease is not None
        append_batch: Any = store.append_batch
        with pytest.raises(TypeError):
            append_batch([], (scope.stream("cp"), 1))
        with pytest.raises(TypeError):
            append_batch([], checkpoint=(scope.stream("cp"), 1))
        with pytest.raises(TypeError):
            append_batch([], lease=lease)
        if isinstance(store, CheckpointStore):
            assert store.load_checkpoint(scope.stream("cp")) is None

    def test_a_commit_of_several_partitions_with_one_lease_lost_writes_nothing(
        self, scope: Scope
    ) -> None:
        store = _leasing(scope.store)
        kept = store.claim_lease(scope.stream("kept"), "a", LONG)
        old = store.claim_lease(scope.stream("lost"), "a", SHORT)
        assert kept is not None and old is not None
        new = _take_over(store, old.partition, "b")
        stream, marks = scope.stream("out"), [(scope.stream("cp1"), 3), (scope.stream("cp2"), 3)]
        with pytest.raises(LeaseLost) as lost:
            store.append_batch(
                [StreamAppend(stream, new_events(1), NO_STREAM)],
                checkpoints=marks,
                leases=[kept, old],
            )
        assert lost.value.lease == old and lost.value.current == new
        assert store.read_stream(stream) == []
        if isinstance(store, CheckpointStore):
            assert [store.load_checkpoint(name) for name, _ in marks] == [None, None]
        # The lease still held commits on its own.
        store.append_batch([], checkpoints=marks[:1], leases=[kept])
        if isinstance(store, CheckpointStore):
            assert store.load_checkpoint(marks[0][0]) == 3
