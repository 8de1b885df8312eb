"""The timer processor's checkpoint when timers fire out of log order: it stays just before the
oldest pending timer while later ones fire, and moves on once that one fires."""

from __future__ import annotations

from decider.processors import FakeClock, Service
from decider.processors.timers.processor import TimerProcessor
from decider.stores.protocol import EventStore
from tests.support.apps import RemindMe, reminder, reminder_app
from tests.support.stores import counts

QUICK = 150
"""Enough timers fired behind a pending one for the processor to drop its fired positions."""


def fired(store: EventStore) -> int:
    return sum(counts(store, "timer-").values())


def timers(service: Service) -> TimerProcessor:
    timer = service.processor("timers")
    assert isinstance(timer, TimerProcessor)
    return timer


def test_the_checkpoint_waits_for_the_oldest_pending_timer(
    store: EventStore, app_name: str
) -> None:
    clock = FakeClock()
    app = reminder_app(app_name)
    quick = [RemindMe(reminder_id=f"q{i}", seconds=60) for i in range(QUICK)]
    with Service(app, store, clock=clock) as service:
        app.publish(store, RemindMe(reminder_id="slow", seconds=3600), "reminders")
        app.publish_many(store, quick, "reminders")
        assert service.wait_until(lambda: len(timers(service).pending) == QUICK + 1, 30)
        clock.advance(61)
        assert service.wait_until(lambda: fired(store) == QUICK, 30)
        assert service.wait_idle(30)
        (slow,) = [e for e in store.read_stream(reminder.stream("slow")) if "Scheduled" in e.type]
        assert timers(service).committed == slow.position - 1
        assert [t.position for t in timers(service).pending] == [slow.position]
    # A restart reads the fired timers again (they fire again, writing nothing) and the slow one.
    with Service(app, store, clock=clock) as again:
        assert again.wait_until(
            lambda: [t.position for t in timers(again).pending] == [slow.position], 30
        )
        assert again.wait_idle(30)
        assert fired(store) == QUICK
        clock.advance(3600)
        assert again.wait_until(lambda: fired(store) == QUICK + 1, 30)
        assert again.wait_idle(30)
        timer = timers(again)
        assert timer.pending == []
        assert timer.committed is not None
        assert timer.committed == timer.idle_position()
        assert timer.committed > slow.position
