"""Regression tests from a correctness review of the processors."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from decider.processors import FakeClock, Service
from decider.processors.timers.processor import TimerProcessor
from decider.stores.errors import StoreUnavailable
from decider.stores.protocol import ALL, NO_STREAM, EventStore, Filter, NewEvent, StreamAppend
from tests.support.apps import RemindMe, reminder, reminder_app
from tests.support.stores import counts


def _fail_once(store: EventStore, touches: Callable[[str], bool]) -> list[str]:
    """Make the store's next write touching a stream that ``touches`` accepts fail once."""
    failed: list[str] = []
    append, append_batch = store.append, getattr(store, "append_batch", None)

    def check(streams: Sequence[str]) -> None:
        for stream in streams:
            if not failed and touches(stream):
                failed.append(stream)
                raise StoreUnavailable(f"injected outage writing {stream}")

    def failing_append(stream: str, events: Sequence[NewEvent], expected: Any) -> Any:
        check([stream])
        return append(stream, events, expected)

    store.append = failing_append  # type: ignore[method-assign, assignment]
    if append_batch is not None:

        def failing_batch(appends: Sequence[StreamAppend], **fences: Any) -> Any:
            check([a.stream for a in appends])
            return append_batch(appends, **fences)

        store.append_batch = failing_batch  # type: ignore[attr-defined]
    return failed


def test_the_timer_reader_resubscribes_after_a_failure(store: EventStore, app_name: str) -> None:
    """A failed reader used to wait forever for the firing thread (which only ended on stop):
    no timer scheduled after the failure was ever read, and the error went unreported."""
    clock = FakeClock()
    app = reminder_app(app_name)
    failed = _fail_once(store, lambda s: s.startswith("decider-skipped-") and "timers" in s)
    # A malformed Scheduled event: the reader skips it, and writing the skip record fails once.
    store.append(
        reminder.stream("bad"),
        [NewEvent(uuid.uuid4(), "Scheduled:ptest.Reminded", b"not json", b"")],
        NO_STREAM,
    )
    with Service(app, store, clock=clock) as service:
        assert service.wait_until(lambda: bool(failed), 30)
        app.publish(store, RemindMe(reminder_id="r1", seconds=60), "reminders")
        timer = service.processor("timers")
        assert isinstance(timer, TimerProcessor)
        assert service.wait_until(lambda: len(timer.pending) == 1, 10)
        clock.advance(61)
        assert service.wait_until(lambda: counts(store, "timer-")["timer-" + _sid(store)] == 1, 30)
        assert len(service.errors) == 1
    assert counts(store, "decider-skipped-") == {f"decider-skipped-{app_name}.timers": 1}


def _sid(store: EventStore) -> str:
    scheduled = [e for e in store.read_stream(reminder.stream("r1")) if "Scheduled" in e.type]
    return str(scheduled[0].id) if scheduled else ""


def test_a_timer_firer_failing_before_the_reader_subscribes_ends_the_reader(
    store: EventStore, app_name: str
) -> None:
    """The firer starts before the reader subscribes; if it failed in between, its stop() found
    no subscription to end, so the reader queued timers forever and nothing fired them."""
    clock = FakeClock()
    app = reminder_app(app_name)
    with Service(app, store, clock=clock) as service:
        app.publish(store, RemindMe(reminder_id="r0", seconds=1), "reminders")
        first = service.processor("timers")
        assert isinstance(first, TimerProcessor)
        assert service.wait_until(lambda: len(first.pending) == 1, 10)
        clock.advance(2)
        assert service.wait_until(lambda: sum(counts(store, "timer-").values()) == 1, 30)
        assert service.wait_idle(30)
    # The restarted firer stores its first checkpoint at once (the reader has not loaded it
    # yet); make that fail once (an unexpected error), and hold the reader until the firing
    # thread has ended.
    save, load = store.save_checkpoint, store.load_checkpoint  # type: ignore[attr-defined]
    subscribe = store.subscribe
    firer_failed = threading.Event()
    loads: list[str] = []
    held: list[bool] = []

    def failing_save(name: str, position: int) -> None:
        if name.endswith(".timers") and not firer_failed.is_set():
            firer_failed.set()
            # Not a StoreUnavailable: the engine retries those in place; a bug ends the firer.
            raise RuntimeError("injected bug saving the timers' checkpoint")
        save(name, position)

    def late_load(name: str) -> int | None:
        loads.append(name)
        if name.endswith(".timers") and loads.count(name) == 2:  # the reader's own load
            firer_failed.wait(10)
        return load(name)  # type: ignore[no-any-return]

    def late_subscribe(after: int | None = None, filter: Filter = ALL) -> Any:
        if filter.event_type_prefixes == ("Scheduled:",) and not held:
            held.append(True)
            firer_failed.wait(10)
            firer = service_ref[0].processor("timers")._firer  # type: ignore[attr-defined]
            firer.join(10)
        return subscribe(after, filter)

    store.load_checkpoint = late_load  # type: ignore[attr-defined]
    store.save_checkpoint = failing_save  # type: ignore[attr-defined]
    store.subscribe = late_subscribe  # type: ignore[method-assign, assignment]
    service = Service(app, store, clock=clock)
    service_ref = [service]
    service.start()
    try:
        timers = service.processor("timers")
        assert isinstance(timers, TimerProcessor)
        app.publish(store, RemindMe(reminder_id="r1", seconds=60), "reminders")
        assert service.wait_until(lambda: len(timers.pending) == 1, 10)
        clock.advance(61)
        assert service.wait_until(lambda: sum(counts(store, "timer-").values()) == 2, 10)
        assert len(service.errors) == 1
    finally:
        service.stop()
