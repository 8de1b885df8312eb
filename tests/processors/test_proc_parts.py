"""The parts: clocks, retry policies, App registration, status queries, the service's life."""

from __future__ import annotations

import os
import random
import signal
import threading
from datetime import UTC, datetime, timedelta

import pytest

from decider import Lifecycle
from decider.processors import (
    App,
    AppDefinitionError,
    FakeClock,
    RetryPolicy,
    Service,
    Signal,
    SystemClock,
    status,
)
from decider.processors.app.streams import failed_stream, failed_stream_workflow
from decider.stores.memory import MemoryEventStore
from samples.traffic_fine.app import make_app
from tests.support.apps import Added, Closed, DoWork, JobRequested, job, tally, tally_app

# -- clocks -----------------------------------------------------------------------------


def run(target: object) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(target()))  # type: ignore[operator]
    thread.start()
    return thread, out


def test_a_fake_clock_wait_ends_when_time_passes_its_deadline() -> None:
    clock, signal_ = FakeClock(), Signal()
    thread, out = run(lambda: clock.wait(signal_, 10))
    assert Signal().wait(0.01) is False
    assert wait_for(lambda: clock.waiters == 1)
    clock.advance(9)
    assert thread.is_alive()
    clock.advance(timedelta(seconds=1))
    thread.join(5)
    assert out == [False]


def test_a_fake_clock_wait_ends_when_its_signal_is_set() -> None:
    clock, signal_ = FakeClock(datetime(2030, 1, 1, tzinfo=UTC)), Signal()
    thread, out = run(lambda: clock.wait(signal_, 3600))
    assert wait_for(lambda: clock.waiters == 1)
    signal_.set()
    thread.join(5)
    assert out == [True]
    assert clock.now() == datetime(2030, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match="cannot go back"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="timezone-aware"):
        FakeClock(datetime(2030, 1, 1))


def test_the_system_clock_waits_on_the_signal() -> None:
    clock, signal_ = SystemClock(), Signal()
    assert clock.wait(signal_, 0.001) is False
    signal_.set()
    assert clock.wait(signal_, 3600) is True
    assert clock.now().tzinfo is not None


def wait_for(predicate: object, timeout: float = 5) -> bool:
    """Wait for a condition without a service: re-check on a short timed wait."""
    idle = threading.Event()
    deadline = datetime.now(UTC) + timedelta(seconds=timeout)
    while datetime.now(UTC) < deadline:
        if predicate():  # type: ignore[operator]
            return True
        idle.wait(0.001)
    return False


# -- retry policies ---------------------------------------------------------------------


def test_retry_delays_grow_are_capped_and_jittered() -> None:
    policy = RetryPolicy(initial_delay=1, multiplier=3, max_delay=20, jitter=0)
    assert [policy.delay(n) for n in range(1, 5)] == [1, 3, 9, 20]
    jittered = RetryPolicy(initial_delay=8, jitter=0.5)
    delays = {jittered.delay(1, random.Random(seed)) for seed in range(20)}
    assert all(4 <= d <= 8 for d in delays) and len(delays) > 1


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"jitter": 2}, "jitter"),
        ({"initial_delay": -1}, "initial_delay"),
    ],
)
def test_a_bad_retry_policy_is_refused(options: dict[str, float], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        RetryPolicy(**options)  # type: ignore[arg-type]


# -- App registration -------------------------------------------------------------------


def test_app_registration_errors_name_the_problem() -> None:
    app = tally_app("defs")
    with pytest.raises(AppDefinitionError, match="already registered"):
        app.workflow(tally, inputs=[Added])
    with pytest.raises(AppDefinitionError, match="not a registered message"):
        app.workflow(job, inputs=[int])
    with pytest.raises(AppDefinitionError, match="needs a name"):
        app.add_handler(DoWork, lambda c, i: [])
    app.route(DoWork, stream="work")
    with pytest.raises(AppDefinitionError, match="already routed"):
        app.add_handler(DoWork, lambda c, i: [], name="work")
    with pytest.raises(AppDefinitionError, match="app name"):
        App("has space")
    with pytest.raises(AppDefinitionError, match="at least one input"):
        app.workflow(job, inputs=[])
    with pytest.raises(ValueError, match="no workflow"):
        Service(App("empty"), MemoryEventStore())
    with pytest.raises(TypeError, match="CheckpointStore"):
        Service(app, object())  # type: ignore[arg-type]


def test_a_workflow_name_with_the_separator_is_refused_so_streams_never_mix() -> None:
    app = tally_app("names")
    with pytest.raises(AppDefinitionError, match="'Tally-v2'"):
        app.workflow(type(tally)("Tally-v2", 0, tally.evolve, tally.decide), inputs=[JobRequested])
    app.workflow(type(tally)("Tally_v2", 0, tally.evolve, tally.decide), inputs=[JobRequested])
    # "Tally-v2-x" can only be the instance "v2-x" of Tally.
    assert app.workflow_of_stream("Tally-v2-x").workflow.name == "Tally"  # type: ignore[union-attr]
    assert app.workflow_of_stream("Tally_v2-x").workflow.name == "Tally_v2"  # type: ignore[union-attr]
    assert app.workflow_of_stream("Other-x") is None
    command_id = "6f1f3b0e-4c1a-5d8e-9b7a-2f0c1d9e8a47"
    assert failed_stream_workflow(failed_stream("Tally_v2", command_id)) == "Tally_v2"
    assert failed_stream_workflow("decider-failed-x") is None


# -- queries and the service's life -----------------------------------------------------


def test_status_lists_instances_by_lifecycle() -> None:
    store, app = MemoryEventStore(), tally_app("status")
    app.publish(store, Added(tally_id="open", amount=1), "tallies")
    app.publish(store, Added(tally_id="done", amount=1), "tallies")
    app.publish(store, Closed(tally_id="done"), "tallies")
    with Service(app, store) as service:
        assert service.wait_idle(10)
    found = {s.stream: s.status for s in status(store, app)}
    assert found == {
        tally.stream("open"): Lifecycle.RUNNING,
        tally.stream("done"): Lifecycle.COMPLETED,
    }
    assert status(store, app, "Tally") == status(store, app)
    with pytest.raises(KeyError):
        status(store, app, "Nope")


def test_run_forever_stops_on_sigterm_and_restores_the_handler() -> None:
    store, app = MemoryEventStore(), make_app("forever")
    service = Service(app, store)
    before = signal.getsignal(signal.SIGTERM)

    def terminate() -> None:
        assert wait_for(lambda: signal.getsignal(signal.SIGTERM) is not before)
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=terminate)
    killer.start()
    service.run_forever()
    killer.join(5)
    assert not service.running
    assert signal.getsignal(signal.SIGTERM) is before
    with pytest.raises(RuntimeError, match="already running"):
        service.start()
        service.start()
    service.stop()
