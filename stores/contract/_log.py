"""Contract tests of the global log: order, paging, filters, catch-up subscriptions."""

from __future__ import annotations

import itertools
import threading
import time

from decider.stores.contract._support import (
    DEFAULT_TIMEOUT,
    Scope,
    ids_of,
    new_events,
    subscribed,
    take,
    wait_until,
)
from decider.stores.protocol import ALL, ANY, NO_STREAM, CaughtUp, RecordedEvent


def _events(items: list[RecordedEvent | CaughtUp]) -> list[RecordedEvent]:
    assert all(isinstance(i, RecordedEvent) for i in items), items
    return [i for i in items if isinstance(i, RecordedEvent)]


class LogContract:
    """The global log: order, exclusive paging, filters, and subscriptions."""

    def test_global_order_follows_appends(self, scope: Scope) -> None:
        written = []
        for stream in ["a", "b", "a", "c", "b"]:
            events = new_events(2)
            scope.store.append(scope.stream(stream), events, ANY)
            written += events
        log = scope.log()
        assert ids_of(log) == ids_of(written)
        positions = [e.position for e in log]
        assert all(p > scope.start for p in positions)
        assert all(a < b for a, b in itertools.pairwise(positions))
        for event in log:
            [same] = scope.store.read_stream(event.stream, event.revision, 1)
            assert same == event

    def test_read_all_pages_with_exclusive_after_position(self, scope: Scope) -> None:
        for stream in ["a", "b", "c", "a", "b", "c", "a"]:
            scope.store.append(scope.stream(stream), new_events(1), ANY)
        log = scope.log()
        assert len(log) == 7
        pages: list[list[RecordedEvent]] = []
        after = scope.start
        for _ in range(len(log) + 1):  # bounded: a store that ignores after_position fails
            page = scope.store.read_all(after, 3, scope.filter())
            if not page:
                break
            pages.append(page)
            after = page[-1].position
        assert [len(p) for p in pages] == [3, 3, 1]
        assert [e for p in pages for e in p] == log
        assert scope.store.read_all(log[2].position, None, scope.filter()) == log[3:]
        assert scope.store.read_all(log[-1].position, None, scope.filter()) == []
        assert scope.store.read_all(scope.start, 0, scope.filter()) == []

    def test_unfiltered_read_all_holds_our_events_in_order(self, scope: Scope) -> None:
        events = new_events(4)
        scope.store.append(scope.stream(), events, NO_STREAM)
        ours = set(ids_of(events))
        for read in (
            scope.store.read_all(scope.start),
            scope.store.read_all(scope.start, None, ALL),
        ):
            assert [e.id for e in read if e.id in ours] == ids_of(events)

    def test_filters(self, scope: Scope) -> None:
        store = scope.store
        store.append(scope.stream("order-1"), new_events(1, "Order.Placed"), ANY)
        store.append(scope.stream("order-2"), new_events(1, "Order.Shipped"), ANY)
        store.append(scope.stream("fine-1"), new_events(1, "FineIssued"), ANY)
        store.append(scope.stream("order-1"), new_events(1, "Paid"), ANY)

        def seen(**fields: object) -> list[tuple[str, str]]:
            return [(scope.label(e.stream), e.type) for e in scope.log(**fields)]

        order = scope.stream("order-")
        assert seen(stream_prefixes=(order,)) == [
            ("order-1", "Order.Placed"),
            ("order-2", "Order.Shipped"),
            ("order-1", "Paid"),
        ]
        assert seen(stream_prefixes=(scope.stream("fine-"), scope.stream("order-2"))) == [
            ("order-2", "Order.Shipped"),
            ("fine-1", "FineIssued"),
        ]
        assert seen(event_types=("Paid", "FineIssued")) == [
            ("fine-1", "FineIssued"),
            ("order-1", "Paid"),
        ]
        assert seen(event_types=("Order.",)) == []
        assert seen(event_type_prefixes=("Order.",)) == [
            ("order-1", "Order.Placed"),
            ("order-2", "Order.Shipped"),
        ]
        assert seen(event_types=("Paid",), event_type_prefixes=("Fine",)) == [
            ("fine-1", "FineIssued"),
            ("order-1", "Paid"),
        ]
        assert seen(stream_prefixes=(order,), event_types=("Paid",)) == [("order-1", "Paid")]
        assert len(scope.log(2, event_type_prefixes=("Order.", "Paid"))) == 2

    def test_system_event_types_are_excluded_unless_asked(self, scope: Scope) -> None:
        system = new_events(1, "$Tested")
        normal = new_events(1)
        scope.store.append(scope.stream(), [*system, *normal], NO_STREAM)
        assert ids_of(scope.log()) == ids_of(normal)
        everything = scope.store.read_all(scope.start)
        assert system[0].id not in ids_of(everything)
        assert ids_of(scope.log(include_system=True)) == ids_of(system + normal)

    def test_system_streams_are_excluded_unless_asked(self, scope: Scope) -> None:
        stream = f"${scope.prefix}sys"
        event = new_events(1)
        scope.store.append(stream, event, NO_STREAM)
        assert event[0].id not in ids_of(scope.store.read_all(scope.start))
        found = scope.store.read_all(
            scope.start, None, scope.filter(stream_prefixes=(stream,), include_system=True)
        )
        assert ids_of(found) == ids_of(event)

    def test_subscription_catches_up_then_goes_live(self, scope: Scope) -> None:
        history = new_events(3)
        scope.store.append(scope.stream("a"), history[:2], NO_STREAM)
        last = scope.store.append(scope.stream("b"), history[2:], NO_STREAM)
        with subscribed(scope.store, scope.start, scope.filter()) as subscription:
            items = take(subscription, 4)
            assert ids_of(_events(items[:3])) == ids_of(history)
            caught_up = items[3]
            assert isinstance(caught_up, CaughtUp)
            assert caught_up.position is not None and caught_up.position >= last.position
            live = new_events(3)
            for event in live:
                scope.store.append(scope.stream("c"), [event], ANY)
            received = _events(take(subscription, 3))
            assert ids_of(received) == ids_of(live)
            assert received == scope.log()[3:]

    def test_subscription_on_a_quiet_filter_still_catches_up(self, scope: Scope) -> None:
        scope.store.append(scope.stream(), new_events(2), NO_STREAM)
        with subscribed(scope.store, scope.start, scope.filter(event_types=("Other",))) as sub:
            [caught_up] = take(sub, 1)
            assert isinstance(caught_up, CaughtUp)
            assert caught_up.position is not None and caught_up.position > scope.start
            other = new_events(1, "Other")
            scope.store.append(scope.stream(), new_events(2), ANY)
            scope.store.append(scope.stream(), other, ANY)
            assert ids_of(_events(take(sub, 1))) == ids_of(other)

    def test_subscription_from_a_position(self, scope: Scope) -> None:
        events = new_events(4)
        for event in events:
            scope.store.append(scope.stream(), [event], ANY)
        log = scope.log()
        with subscribed(scope.store, log[1].position, scope.filter()) as subscription:
            items = take(subscription, 3)
            assert ids_of(_events(items[:2])) == ids_of(events[2:])
            assert isinstance(items[2], CaughtUp)

    def test_poll_times_out_with_none_and_uses_no_cpu(self, scope: Scope) -> None:
        with subscribed(scope.store, scope.start, scope.filter()) as subscription:
            assert isinstance(take(subscription, 1)[0], CaughtUp)
            started, cpu = time.monotonic(), time.process_time()
            assert subscription.poll(0.3) is None
            elapsed, used = time.monotonic() - started, time.process_time() - cpu
            assert 0.25 <= elapsed < DEFAULT_TIMEOUT
            assert used < 0.1, f"an idle poll used {used:.3f}s of CPU in {elapsed:.3f}s"

    def test_stop_from_another_thread_ends_iteration(self, scope: Scope) -> None:
        subscription = scope.store.subscribe(scope.start, scope.filter())
        received: list[RecordedEvent | CaughtUp] = []
        caught_up = threading.Event()

        def consume() -> None:
            for item in subscription:
                received.append(item)
                if isinstance(item, CaughtUp):
                    caught_up.set()

        consumer = threading.Thread(target=consume, daemon=True)
        consumer.start()
        try:
            assert caught_up.wait(DEFAULT_TIMEOUT)
            event = new_events(1)
            scope.store.append(scope.stream(), event, NO_STREAM)
            wait_until(lambda: len(received) >= 2)
        finally:
            subscription.stop()
            consumer.join(DEFAULT_TIMEOUT)
        assert not consumer.is_alive(), "iteration did not end after stop()"
        assert subscription.stopped
        assert ids_of(_events(received[1:])) == ids_of(event)
        assert subscription.poll(0) is None

    def test_wake_returns_a_blocked_poll_and_the_subscription_goes_on(self, scope: Scope) -> None:
        subscription = scope.store.subscribe(scope.start, scope.filter())
        try:
            assert isinstance(take(subscription, 1)[0], CaughtUp)
            returned: list[object] = []
            done = threading.Event()

            def block() -> None:
                returned.append(subscription.poll(None))
                done.set()

            waiter = threading.Thread(target=block, daemon=True)
            waiter.start()
            # The poll may be blocked by now or not yet: a wake before it is kept for it (the
            # next test), so either way it must return, without an end.
            subscription.wake()
            assert done.wait(DEFAULT_TIMEOUT), "wake() did not return a blocked poll"
            assert returned == [None]
            assert not subscription.stopped, "wake() must not end the subscription"
            event = new_events(1)
            scope.store.append(scope.stream(), event, NO_STREAM)
            assert ids_of(_events(take(subscription, 1))) == ids_of(event)
        finally:
            subscription.stop()

    def test_a_wake_before_the_poll_returns_the_next_wait_at_once(self, scope: Scope) -> None:
        with subscribed(scope.store, scope.start, scope.filter()) as subscription:
            assert isinstance(take(subscription, 1)[0], CaughtUp)
            subscription.wake()
            returned: list[object] = []
            done = threading.Event()

            def poll() -> None:  # without the wake, it would wait ten times the test's patience
                returned.append(subscription.poll(DEFAULT_TIMEOUT * 10))
                done.set()

            threading.Thread(target=poll, daemon=True).start()
            assert done.wait(DEFAULT_TIMEOUT), "a wake() before poll() was lost"
            assert returned == [None]
            assert not subscription.stopped
            event = new_events(1)
            scope.store.append(scope.stream(), event, NO_STREAM)
            assert ids_of(_events(take(subscription, 1))) == ids_of(event)

    def test_close_wakes_a_blocked_subscription(self, scope: Scope) -> None:
        subscription = scope.store.subscribe(scope.start, scope.filter())
        assert isinstance(take(subscription, 1)[0], CaughtUp)
        returned = threading.Event()

        def block() -> None:
            subscription.poll(None)
            returned.set()

        threading.Thread(target=block, daemon=True).start()
        scope.store.close()
        assert returned.wait(DEFAULT_TIMEOUT), "close() did not wake a blocked poll"
