"""The shared catch-up subscription: paging, caught-up position, wake-ups, probing, stop."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decider.stores import ALL, ANY, CaughtUp, Filter, Partitions, RecordedEvent, StoreError
from decider.stores.contract import new_events, take
from decider.stores.memory import MemoryEventStore
from decider.stores.subscription import CatchUpSubscription, Gist, LogNotifier


def _subscription(
    store: MemoryEventStore,
    reads: list[int | None],
    *,
    filter: Filter = ALL,
    after: int | None = None,
    page_size: int = 2,
) -> CatchUpSubscription:
    def read_page(after_position: int | None, limit: int) -> list[RecordedEvent]:
        reads.append(after_position)
        return store.read_all(after_position, limit, filter)

    return CatchUpSubscription(
        read_page=read_page,
        head=lambda: store.read_all()[-1].position if store.read_all() else None,
        notifier=store._notifier,
        after_position=after,
        page_size=page_size,
    )


def test_history_comes_in_pages_then_caught_up_at_the_last_event() -> None:
    store = MemoryEventStore()
    events = new_events(5)
    for event in events:
        store.append("s", [event], ANY)
    reads: list[int | None] = []
    sub = _subscription(store, reads)
    items = take(sub, 6)
    assert [i.id for i in items[:5] if isinstance(i, RecordedEvent)] == [e.id for e in events]
    assert items[5] == CaughtUp(position=5)
    assert reads == [None, 2, 4]


def test_a_quiet_filter_skips_to_the_head_and_idles_without_reading() -> None:
    store = MemoryEventStore()
    store.append("s", new_events(7), ANY)
    reads: list[int | None] = []
    sub = _subscription(store, reads, filter=Filter(event_types=("Other",)))
    assert take(sub, 1) == [CaughtUp(position=7)]
    assert sub.poll(0) is None
    assert sub.poll(0) is None
    assert reads == [None], "an idle subscription must not re-read the log"
    store.append("s", new_events(1), ANY)
    assert sub.poll(0) is None
    assert reads[-1] == 7, "the next read starts after the head it skipped to"


def test_empty_log_is_caught_up_at_none_then_goes_live() -> None:
    store = MemoryEventStore()
    sub = _subscription(store, [])
    assert take(sub, 1) == [CaughtUp(position=None)]
    event = new_events(1)
    store.append("s", event, ANY)
    [live] = take(sub, 1)
    assert isinstance(live, RecordedEvent) and live.id == event[0].id


def test_a_start_past_the_head_is_caught_up_there() -> None:
    store = MemoryEventStore()
    store.append("s", new_events(2), ANY)
    sub = _subscription(store, [], after=10)
    assert take(sub, 1) == [CaughtUp(position=10)]


def test_an_append_wakes_a_blocked_poll() -> None:
    store = MemoryEventStore()
    sub = _subscription(store, [])
    assert take(sub, 1) == [CaughtUp(position=None)]
    event = new_events(1)
    timer = threading.Timer(0.05, lambda: store.append("s", event, ANY))
    timer.start()
    started = time.monotonic()
    item = sub.poll(10.0)
    timer.join()
    assert isinstance(item, RecordedEvent) and item.id == event[0].id
    assert time.monotonic() - started < 5.0


def test_probing_notices_appends_nobody_announced() -> None:
    log: list[RecordedEvent] = []
    sub = CatchUpSubscription(
        read_page=lambda after, limit: [e for e in log if after is None or e.position > after][
            :limit
        ],
        head=lambda: log[-1].position if log else None,
        notifier=LogNotifier(),
        probe_interval=0.01,
    )
    assert take(sub, 1) == [CaughtUp(position=None)]
    event = RecordedEvent(
        id=uuid.uuid4(),
        type="T",
        data=b"",
        metadata=b"",
        stream="s",
        revision=0,
        position=1,
        recorded_at=datetime.now(UTC),
    )
    threading.Timer(0.03, lambda: log.append(event)).start()
    assert sub.poll(10.0) == event


def test_stop_wakes_a_blocked_poll_and_ends_iteration() -> None:
    store = MemoryEventStore()
    sub = _subscription(store, [])
    assert take(sub, 1) == [CaughtUp(position=None)]
    threading.Timer(0.05, sub.stop).start()
    assert list(sub) == []
    assert sub.stopped and sub.poll(0) is None


def test_stop_before_polling_delivers_nothing() -> None:
    store = MemoryEventStore()
    store.append("s", new_events(1), ANY)
    with _subscription(store, []) as sub:
        pass
    assert sub.poll(1.0) is None


def test_read_errors_reach_the_consumer() -> None:
    def failing(after: int | None, limit: int) -> list[RecordedEvent]:
        raise StoreError("disk on fire")

    sub = CatchUpSubscription(read_page=failing, head=lambda: 3, notifier=LogNotifier())
    with pytest.raises(StoreError, match="disk on fire"):
        sub.poll(0)


@pytest.mark.parametrize(("page_size", "probe"), [(0, None), (10, 0.0), (10, -1.0)])
def test_bad_arguments_are_rejected(page_size: int, probe: float | None) -> None:
    with pytest.raises(ValueError):
        CatchUpSubscription(
            read_page=lambda after, limit: [],
            head=lambda: None,
            notifier=LogNotifier(),
            page_size=page_size,
            probe_interval=probe,
        )


_NAMES = st.sampled_from(["", "$", "$sys", "order-1", "order-2", "fine-1", "Placed", "Shipped"])


@settings(max_examples=300, deadline=None)
@given(
    stream_prefixes=st.lists(_NAMES, max_size=2).map(tuple),
    event_types=st.lists(_NAMES, max_size=2).map(tuple),
    event_type_prefixes=st.lists(_NAMES, max_size=2).map(tuple),
    include_system=st.booleans(),
    partitions=st.none()
    | st.integers(1, 4).flatmap(
        lambda count: st.builds(
            Partitions,
            count=st.just(count),
            held=st.frozensets(st.integers(0, count - 1)),
            unknown=st.booleans(),
        )
    ),
    events=st.lists(st.tuples(_NAMES, _NAMES, st.none() | st.integers(0, 9)), max_size=12),
    start=st.integers(0, 13),
    limit=st.none() | st.integers(0, 13),
)
def test_select_answers_as_passes_does_event_by_event(
    stream_prefixes: tuple[str, ...],
    event_types: tuple[str, ...],
    event_type_prefixes: tuple[str, ...],
    include_system: bool,
    partitions: Partitions | None,
    events: list[tuple[str, str, int | None]],
    start: int,
    limit: int | None,
) -> None:
    """Filter.select (a store's read through a filter) is passes, event by event, from start,
    up to limit."""
    chosen = Filter(
        stream_prefixes=stream_prefixes,
        event_types=event_types,
        event_type_prefixes=event_type_prefixes,
        include_system=include_system,
        partitions=partitions,
    )
    now = datetime.now(UTC)
    log = [
        RecordedEvent(uuid.uuid4(), t, b"{}", b"{}", s, 0, i + 1, now, partition_key=key)
        for i, (s, t, key) in enumerate(events)
    ]
    expected = [event for event in log[start:] if chosen.passes(event)]
    if limit is not None:
        expected = expected[:limit]
    assert chosen.select(log, start, limit) == expected


@settings(max_examples=300, deadline=None)
@given(
    types=st.frozensets(_NAMES | st.text(max_size=6), min_size=1, max_size=3),
    keys=st.frozensets(st.integers(-(2**63), 2**63 - 1), max_size=4),
    unkeyed=st.booleans(),
)
def test_a_gist_reads_back_what_its_text_says(
    types: frozenset[str], keys: frozenset[int], unkeyed: bool
) -> None:
    """Gist.of_text reads Gist.text back, on the one-type path without the JSON decoder (any
    name JSON writes as it is) and on the JSON path (names it escapes, several types)."""
    gist = Gist(types, keys, unkeyed)
    assert Gist.of_text(gist.text()) == gist


@pytest.mark.parametrize("text", ['[["A"],[3,],0]', '[["A"],[-],0]', '[["A"],[3]]', "[1", ""])
def test_an_unreadable_gist_is_unknown(text: str) -> None:
    assert Gist.of_text(text) is None


def test_the_partition_count_follows_the_subscriptions_attached() -> None:
    """LogNotifier.partition_count is counted again after each attach and detach."""
    store = MemoryEventStore()
    notifier = store._notifier

    def held(count: int) -> CatchUpSubscription:
        return CatchUpSubscription(
            read_page=lambda *_: [],
            head=lambda: None,
            notifier=notifier,
            filter=Filter(partitions=Partitions(count=count, held=frozenset({0}))),
        )

    assert notifier.partition_count() == 1
    four = held(4)
    assert notifier.partition_count() == 4
    eight = held(8)
    assert notifier.partition_count() == 1  # two counts: none shared
    four.stop()
    assert notifier.partition_count() == 8
    eight.stop()
    assert notifier.partition_count() == 1
