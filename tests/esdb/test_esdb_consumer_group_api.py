"""The adapter's consumer-group API (``EsdbEventStore.consumer_group``) on its own: create if
missing, read with a buffer, ack, nack retry, nack park, the parked stream, replay, info; and
events the filter does not select never delivered. Runs on ``ESDB_URI`` where set."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from decider.stores.consumer_groups import (
    ConsumerGroupStore,
    Delivery,
    GroupReader,
    GroupSettings,
    Nack,
    ParkedLink,
)
from decider.stores.esdb import EsdbEventStore
from decider.stores.protocol import NO_STREAM, Filter, NewEvent
from tests.support.waiting import wait_until

WAIT = 30.0


@pytest.fixture
def store(esdb_uri: str) -> Iterator[EsdbEventStore]:
    opened = EsdbEventStore(esdb_uri)
    yield opened
    opened.close()


def next_delivery(reader: GroupReader) -> Delivery:
    delivery = reader.poll(WAIT)
    assert delivery is not None, "no delivery"
    return delivery


def test_a_group_delivers_retries_parks_and_replays(store: EsdbEventStore) -> None:
    assert isinstance(store, ConsumerGroupStore)
    tag = uuid.uuid4().hex[:8]
    stream, other = f"cgapi{tag}-a", f"cgother{tag}-a"
    group = store.consumer_group(f"g-{tag}", Filter(stream_prefixes=(f"cgapi{tag}-",)))
    start = store.append(other, [NewEvent(uuid.uuid4(), "Noise", b"{}")], NO_STREAM).position
    settings = GroupSettings(consumer_strategy="DispatchToSingle", max_retry_count=5)
    assert group.ensure(settings, start=start) is True
    assert group.ensure(settings, start=start) is False  # it exists: kept as it is
    ids = [uuid.uuid4() for _ in range(3)]
    store.append(stream, [NewEvent(i, "Thing", b"{}") for i in ids], NO_STREAM)
    store.append(other, [NewEvent(uuid.uuid4(), "Noise", b"{}")], 0)

    reader = group.read(buffer_size=10)
    try:
        first, second, third = (next_delivery(reader) for _ in range(3))
        assert [d.event.id for d in (first, second, third)] == ids  # the noise never comes
        assert [d.retry_count for d in (first, second, third)] == [0, 0, 0]
        assert not any(d.replayed for d in (first, second, third))
        assert first.event.stream == stream and first.ack_id == first.event.id
        reader.ack(first)
        reader.nack(second, Nack.RETRY)
        again = next_delivery(reader)
        assert (again.event.id, again.retry_count) == (ids[1], 1)
        reader.ack(again)
        reader.nack(third, Nack.PARK)
        wait_until(group.parked, WAIT, "the park on the server")
        assert group.parked() == [ParkedLink(stream, 2)]
        wait_until(lambda: group.info().in_flight == 0, WAIT, "every delivery answered")
        info = group.info()
        assert (info.parked, info.retry_buffer, info.max_retry_count) == (1, 0, 5)
        group.replay_parked()
        replayed = next_delivery(reader)
        assert (replayed.event.id, replayed.replayed) == (ids[2], True)
        assert replayed.ack_id != replayed.event.id  # answered by its parked link
        reader.ack(replayed)
        wait_until(lambda: group.info().in_flight == 0, WAIT, "the replay answered")
        assert group.parked() == []
    finally:
        reader.stop()
        group.delete()
    assert reader.poll(0) is None
