"""The timer processor on a FakeClock: due timers fire once, across stops and restarts."""

from __future__ import annotations

from datetime import timedelta

from decider import Lifecycle, event_id
from decider.processors import App, FakeClock, Service, show
from decider.processors.timers.processor import TimerProcessor
from decider.stores.protocol import NO_STREAM, EventStore, NewEvent
from tests.support.apps import RemindMe, reminder, reminder_app
from tests.support.stores import counts, types

STREAM = reminder.stream("r")


def fired(store: EventStore) -> int:
    return sum(counts(store, "timer-").values())


def completed(store: EventStore, app: App) -> bool:
    return show(store, app, STREAM).status is Lifecycle.COMPLETED


def pending(service: Service) -> int:
    timer = service.processor("timers")
    assert isinstance(timer, TimerProcessor)
    return len(timer.pending)


def check_fired_once(store: EventStore) -> None:
    assert fired(store) == 1
    history = types(store, STREAM)
    assert history.count("Received:ptest.Reminded") == 1
    assert history[-1] == "Completed"


def test_a_due_timer_fires_once(store: EventStore, app_name: str) -> None:
    clock = FakeClock()
    app = reminder_app(app_name)
    with Service(app, store, clock=clock) as service:
        app.publish(store, RemindMe(reminder_id="r", seconds=60), "reminders")
        assert service.wait_until(lambda: pending(service) == 1, 30)
        clock.advance(59)
        assert service.wait_idle(30)
        assert fired(store) == 0
        clock.advance(timedelta(seconds=2))
        assert service.wait_until(lambda: completed(store, app), 30)
        assert service.wait_idle(30)
        clock.advance(3600)
        assert service.wait_idle(30)
        assert pending(service) == 0
    check_fired_once(store)
    (scheduled,) = [e for e in store.read_stream(STREAM) if e.type.startswith("Scheduled:")]
    (timer,) = store.read_stream(f"timer-{scheduled.id}")
    metadata = app.codec.decode_metadata(timer.metadata)
    assert (metadata.correlation_id, metadata.causation_id) == ("r", str(scheduled.id))


def test_a_pending_timer_survives_a_restart_and_fires_once(
    store: EventStore, app_name: str
) -> None:
    clock = FakeClock()
    app = reminder_app(app_name)
    with Service(app, store, clock=clock) as service:
        app.publish(store, RemindMe(reminder_id="r", seconds=60), "reminders")
        assert service.wait_until(lambda: pending(service) == 1, 30)
        assert service.wait_idle(30)
    with Service(app, store, clock=clock) as again:
        assert again.wait_until(lambda: pending(again) == 1, 30)
        clock.advance(61)
        assert again.wait_until(lambda: completed(store, app), 30)
        assert again.wait_idle(30)
    # A third run finds the timer fired: nothing fires again.
    with Service(app, store, clock=clock) as third:
        assert third.wait_idle(30)
        assert pending(third) == 0
    check_fired_once(store)


def test_a_timer_due_while_the_service_is_down_fires_once_on_restart(
    store: EventStore, app_name: str
) -> None:
    clock = FakeClock()
    app = reminder_app(app_name)
    with Service(app, store, clock=clock) as service:
        app.publish(store, RemindMe(reminder_id="r", seconds=60), "reminders")
        assert service.wait_until(lambda: pending(service) == 1, 30)
    clock.advance(600)  # due, but nobody is running
    with Service(app, store, clock=clock) as again:
        assert again.wait_until(lambda: completed(store, app), 30)
        assert again.wait_idle(30)
    check_fired_once(store)


def test_a_timer_scheduled_from_an_input_that_came_while_down(
    store: EventStore, app_name: str
) -> None:
    clock = FakeClock()
    app = reminder_app(app_name)
    with Service(app, store, clock=clock) as service:
        assert service.wait_idle(30)
    app.publish(store, RemindMe(reminder_id="r", seconds=60), "reminders")
    clock.advance(3600)  # time passes before the input is even decided upon
    with Service(app, store, clock=clock) as again:
        assert again.wait_until(lambda: pending(again) == 1, 30)
        assert again.wait_idle(30)
        assert fired(store) == 0  # due 60 s after it was scheduled, not after it was published
        clock.advance(61)
        assert again.wait_until(lambda: completed(store, app), 30)
        assert again.wait_idle(30)
    check_fired_once(store)


def test_a_malformed_scheduled_event_is_skipped(store: EventStore, app_name: str) -> None:
    clock = FakeClock()
    app = reminder_app(app_name)
    bad = reminder.stream("bad")
    store.append(
        bad,
        [
            NewEvent(event_id(bad, "b", 0), "Scheduled:ptest.Reminded", b'{"after": -1}'),
            NewEvent(event_id(bad, "b", 1), "Scheduled:ptest.Reminded", b"[", b"[]"),
        ],
        NO_STREAM,
    )
    with Service(app, store, clock=clock) as service:
        app.publish(store, RemindMe(reminder_id="r", seconds=1), "reminders")
        assert service.wait_until(lambda: pending(service) == 1, 30)
        clock.advance(2)
        assert service.wait_until(lambda: completed(store, app), 30)
        assert service.wait_idle(30)
        assert service.errors == []
    skipped = store.read_stream(f"decider-skipped-{app_name}.timers")
    assert [e.type for e in skipped] == ["decider.InputSkipped"] * 2
    check_fired_once(store)
