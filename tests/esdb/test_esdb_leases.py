"""EventStoreDB leases beyond the shared contract: racing claimers on the lease stream's
expected revision, and fenced commits when the lease moved in *another* store object (another
process), so that only the lease stream's revision in the atomic session can catch it."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from decider.stores.contract._support import ids_of, new_events, wait_until
from decider.stores.esdb._batch import TransactionalEsdbEventStore, open_esdb_store
from decider.stores.esdb.store import CLIENT, EsdbEventStore
from decider.stores.leases import Lease, LeaseLost
from decider.stores.protocol import NO_STREAM, StreamAppend


def _name(label: str) -> str:
    return f"t{uuid.uuid4().hex[:12]}-{label}"


@pytest.fixture
def transactional(esdb_uri: str) -> Iterator[TransactionalEsdbEventStore]:
    store = open_esdb_store(esdb_uri)
    if not isinstance(store, TransactionalEsdbEventStore):
        store.close()
        pytest.skip(f"no atomic multi-stream append with {CLIENT.package} on this server")
    yield store
    store.close()


@pytest.fixture
def other(esdb_uri: str) -> Iterator[EsdbEventStore]:
    """A second store object: another process as far as the first one can tell."""
    store = EsdbEventStore(esdb_uri)
    yield store
    store.close()


def test_of_racing_claimers_exactly_one_wins(esdb_uri: str) -> None:
    partition = _name("p")
    stores = [EsdbEventStore(esdb_uri) for _ in range(4)]
    results: dict[int, Lease | None] = {}
    start = threading.Barrier(len(stores))

    def claim(i: int) -> None:
        start.wait()
        results[i] = stores[i].claim_lease(partition, f"owner-{i}", 60)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(stores))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        winners = [lease for lease in results.values() if lease is not None]
        assert len(results) == len(stores)
        assert len(winners) == 1 and winners[0].epoch == 1
        assert [x for x in stores[0].leases() if x.partition == partition] == winners
    finally:
        for store in stores:
            store.close()


def test_a_takeover_by_another_process_fails_the_fenced_commit_as_a_whole(
    transactional: TransactionalEsdbEventStore, other: EsdbEventStore
) -> None:
    partition, stream, checkpoint = _name("p"), _name("out"), _name("cp")
    old = transactional.claim_lease(partition, "a", 0.2)
    assert old is not None
    first = new_events(1)
    transactional.append_batch(
        [StreamAppend(stream, first, NO_STREAM)], checkpoints=[(checkpoint, 1)], leases=[old]
    )
    taken: list[Lease] = []

    def took_over() -> bool:
        lease = other.claim_lease(partition, "b", 60)
        if lease is not None:
            taken.append(lease)
        return bool(taken)

    wait_until(took_over)
    new = taken[0]
    assert (new.owner, new.epoch) == ("b", old.epoch + 1)
    # ``transactional`` still remembers the lease stream where "a" last wrote it: only the
    # session's expected revision on the lease stream notices the takeover
    with pytest.raises(LeaseLost) as lost:
        transactional.append_batch(
            [StreamAppend(stream, new_events(2), 0)], checkpoints=[(checkpoint, 2)], leases=[old]
        )
    assert lost.value.current == new
    assert ids_of(transactional.read_stream(stream)) == ids_of(first)
    assert transactional.load_checkpoint(checkpoint) == 1


def test_a_renewal_elsewhere_by_the_same_owner_does_not_fail_the_commit(
    transactional: TransactionalEsdbEventStore, other: EsdbEventStore
) -> None:
    partition, stream = _name("p"), _name("out")
    lease = transactional.claim_lease(partition, "a", 60)
    assert lease is not None
    transactional.append_batch([StreamAppend(stream, new_events(1), NO_STREAM)], leases=[lease])
    other.renew_lease(lease, 60)  # moves the lease stream's revision behind our back
    transactional.append_batch([StreamAppend(stream, new_events(1), 0)], leases=[lease])
    assert len(transactional.read_stream(stream)) == 2
    [listed] = [x for x in other.leases() if x.partition == partition]
    assert (listed.owner, listed.epoch) == ("a", lease.epoch)
