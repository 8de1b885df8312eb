"""The command pool: order per instance, no head-of-line blocking, timeouts, limits, async
handlers, the low-water-mark checkpoint and graceful stop."""

from __future__ import annotations

import asyncio
import collections
import itertools
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decider import (
    Command,
    Complete,
    InitiatedBy,
    Lifecycle,
    Received,
    Send,
    Workflow,
    WorkflowEvent,
    message,
)
from decider.processors import (
    App,
    AppDefinitionError,
    CommandFailed,
    FakeClock,
    RetryPolicy,
    Service,
    SystemClock,
    by_correlation,
    list_parked,
    show,
    status,
)
from decider.processors.app.definition import HandlerRegistration
from decider.processors.commands.pace import FIRST, WINDOW, Pace
from decider.processors.commands.pool import CommandPool, Job
from decider.processors.commands.processor import CommandProcessor
from decider.processors.operate.handler_status import HandlerStatus, handler_lines, handler_status
from decider.stores.memory import MemoryEventStore
from decider.stores.protocol import EventStore
from decider.stores.sqlite import SqliteEventStore
from tests.support.apps import DoWork, JobRequested, job_app

FAST = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.001)

# -- Steps: an instance sends several commands at once ----------------------------------------


@message("pooltest.Plan")
@attrs.frozen(kw_only=True)
class Plan:
    """Start instance ``plan_id``: one Step per entry of ``steps`` (its action)."""

    plan_id: str
    steps: tuple[str, ...]


@message("pooltest.Step")
@attrs.frozen(kw_only=True)
class Step:
    plan_id: str
    index: int
    action: str


@message("pooltest.AsyncStep")
@attrs.frozen(kw_only=True)
class AsyncStep:
    plan_id: str
    index: int
    action: str


@message("pooltest.StepDone")
@attrs.frozen(kw_only=True)
class StepDone:
    plan_id: str
    index: int


def plan_decide(message: Any, state: tuple[int, int]) -> Sequence[Command[Any]]:
    match message:
        case Plan(plan_id=plan_id, steps=steps):
            return [
                Send(
                    AsyncStep(plan_id=plan_id, index=i, action=action[1:])
                    if action.startswith("~")
                    else Step(plan_id=plan_id, index=i, action=action)
                )
                for i, action in enumerate(steps)
            ]
        case StepDone() | CommandFailed() if state[1] + 1 == state[0]:
            return [Complete()]
    return []


def plan_evolve(state: tuple[int, int], event: WorkflowEvent[Any, Any]) -> tuple[int, int]:
    match event:
        case InitiatedBy(Plan(steps=steps)):
            return (len(steps), 0)
        case Received(StepDone() | CommandFailed()):
            return (state[0], state[1] + 1)
    return state


plan = Workflow("Plan", (0, 0), plan_evolve, plan_decide)


@attrs.define
class Recorder:
    """What the handlers saw: calls in order of start, per-instance overlap, the most at once."""

    lock: threading.Lock = attrs.Factory(threading.Lock)
    started: list[tuple[str, int]] = attrs.Factory(list)
    finished: list[tuple[str, int]] = attrs.Factory(list)
    calls: collections.Counter[tuple[str, int]] = attrs.Factory(collections.Counter)
    active: collections.Counter[str] = attrs.Factory(collections.Counter)
    overlaps: int = 0
    running: int = 0
    most: int = 0
    release: threading.Event = attrs.Factory(threading.Event)
    threads: dict[str, list[str]] = attrs.Factory(lambda: collections.defaultdict(list))
    """The threads each instance's calls ran on, in order."""

    def enter(self, step: Step | AsyncStep) -> None:
        with self.lock:
            self.threads[step.plan_id].append(threading.current_thread().name)
            self.started.append((step.plan_id, step.index))
            self.calls[step.plan_id, step.index] += 1
            self.active[step.plan_id] += 1
            self.overlaps += self.active[step.plan_id] > 1
            self.running += 1
            self.most = max(self.most, self.running)

    def leave(self, step: Step | AsyncStep) -> None:
        with self.lock:
            self.active[step.plan_id] -= 1
            self.running -= 1
            self.finished.append((step.plan_id, step.index))


def plan_app(name: str, pool_size: int = 16, **options: Any) -> tuple[App, Recorder]:
    """The Plan app. Step actions: ``"ok"``, ``"fail"`` (raises), ``"hang"`` (blocks until
    the recorder's release), ``"sleep:<seconds>"``; ``"~"`` first: the async handler."""
    recorder = Recorder()
    app = App(name, pool_size=pool_size)
    app.workflow(
        plan,
        inputs={
            Plan: lambda m, _: cast(Plan, m).plan_id,
            StepDone: by_correlation,
            CommandFailed: by_correlation,
        },
    )

    @app.handler(Step, **options)
    def step(command: Step, command_id: str) -> list[object]:
        recorder.enter(command)
        try:
            if command.action == "fail":
                raise RuntimeError(f"step {command.index} of {command.plan_id} fails")
            if command.action == "hang":
                recorder.release.wait(30)
            if command.action.startswith("sleep:"):
                time.sleep(float(command.action.removeprefix("sleep:")))  # simulated I/O
            return [StepDone(plan_id=command.plan_id, index=command.index)]
        finally:
            recorder.leave(command)

    @app.handler(AsyncStep, **options)
    async def async_step(command: AsyncStep, command_id: str) -> list[object]:
        recorder.enter(command)
        try:
            if command.action == "fail":
                raise RuntimeError(f"async step {command.index} fails")
            if command.action == "hang":
                await asyncio.Event().wait()
            if command.action.startswith("sleep:"):
                await asyncio.sleep(float(command.action.removeprefix("sleep:")))
            return [StepDone(plan_id=command.plan_id, index=command.index)]
        finally:
            recorder.leave(command)

    return app, recorder


def done(store: EventStore, app: App, plan_id: str) -> bool:
    return show(store, app, plan.stream(plan_id)).status is Lifecycle.COMPLETED


def all_done(store: EventStore, app: App, count: int) -> bool:
    return sum(i.status is Lifecycle.COMPLETED for i in status(store, app)) == count


def commands(service: Service) -> CommandProcessor:
    processor = service.processor("commands")
    assert isinstance(processor, CommandProcessor)
    return processor


# -- order ----------------------------------------------------------------------------------

_plans = st.lists(st.lists(st.integers(0, 4), min_size=1, max_size=5), min_size=1, max_size=12).map(
    lambda plans: [tuple(f"sleep:{ms / 1000}" for ms in steps) for steps in plans]
)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans=_plans)
def test_commands_of_one_instance_run_in_order_under_a_pool_of_16(
    plans: list[tuple[str, ...]],
) -> None:
    store = MemoryEventStore()
    app, recorder = plan_app("order", pool_size=16, retry=FAST)
    for i, steps in enumerate(plans):
        app.publish(store, Plan(plan_id=f"p{i}", steps=steps), "plans")
    with Service(app, store) as service:
        assert service.wait_until(lambda: all_done(store, app, len(plans)), 30)
    assert recorder.overlaps == 0
    for i, steps in enumerate(plans):
        seen = [index for plan_id, index in recorder.started if plan_id == f"p{i}"]
        assert seen == list(range(len(steps)))
    assert all(count == 1 for count in recorder.calls.values())


def test_different_instances_run_side_by_side(tmp_path: Path) -> None:
    store = SqliteEventStore(tmp_path / "events.db")
    app, recorder = plan_app("side", pool_size=4)
    for i in range(4):
        app.publish(store, Plan(plan_id=f"p{i}", steps=("hang",)), "plans")
    with Service(app, store) as service:
        # Four hung calls at once: each instance got its own worker.
        assert service.wait_until(lambda: recorder.running == 4, 30)
        recorder.release.set()
        assert service.wait_until(lambda: all_done(store, app, 4), 30)
    store.close()


# -- head of line -------------------------------------------------------------------------


def test_a_backing_off_command_holds_only_its_own_instances_later_commands(
    store: EventStore,
) -> None:
    clock = FakeClock()
    app, recorder = plan_app("hol", retry=RetryPolicy(max_attempts=2, initial_delay=3600))
    app.publish(store, Plan(plan_id="stuck", steps=("fail", "ok")), "plans")
    app.publish(store, Plan(plan_id="healthy", steps=("ok", "ok")), "plans")
    with Service(app, store, clock=clock) as service:
        # The healthy instance completes while the failed command waits an hour to retry.
        assert service.wait_until(lambda: done(store, app, "healthy"), 30)
        assert recorder.calls["stuck", 0] == 1
        assert ("stuck", 1) not in recorder.calls  # held behind its own instance's command
        (load,) = [h for h in service.handler_load() if h.handler == "step"]
        assert (load.in_flight, load.backing_off, load.queued) == (0, 1, 1)
        # What `decider status` shows, from the store alone.
        assert handler_status(store, app) == [
            HandlerStatus("async_step", 0, 0),
            HandlerStatus("step", 2, 0),
        ]
        clock.advance(3600)
        assert service.wait_until(lambda: done(store, app, "stuck"), 30)
        assert recorder.started.index(("stuck", 1)) > recorder.started.index(("healthy", 1))
        (load,) = [h for h in service.handler_load() if h.handler == "step"]
        assert load.parked == 1
    (parked,) = list_parked(store, app)
    assert parked.attempts == 2
    assert handler_lines(handler_status(store, app))[1:] == [
        "  async_step: in hand 0, parked 0",
        "  step: in hand 0, parked 1",
    ]


# -- timeouts -----------------------------------------------------------------------------


def test_a_hung_handler_times_out_and_is_parked_while_others_complete(store: EventStore) -> None:
    app, recorder = plan_app("hung", pool_size=2, retry=FAST, timeout=0.2)
    app.publish(store, Plan(plan_id="hangs", steps=("hang",)), "plans")
    for i in range(6):
        app.publish(store, Plan(plan_id=f"ok{i}", steps=("ok",)), "plans")
    try:
        with Service(app, store) as service:
            assert service.wait_until(lambda: all_done(store, app, 7), 30)
            assert service.wait_idle(30)
            assert commands(service).pool.timeouts == 2  # both attempts
    finally:
        recorder.release.set()
    (parked,) = list_parked(store, app)
    assert (parked.attempts, parked.reason) == (2, "timed out after 0.2s")
    assert recorder.calls["hangs", 0] == 2


def test_an_async_handler_times_out_and_fails_like_a_sync_one(tmp_path: Path) -> None:
    store = SqliteEventStore(tmp_path / "events.db")
    app, recorder = plan_app("async-fail", retry=FAST, timeout=0.1)
    app.publish(store, Plan(plan_id="a", steps=("~hang",)), "plans")
    app.publish(store, Plan(plan_id="b", steps=("~fail",)), "plans")
    with Service(app, store) as service:
        assert service.wait_until(lambda: all_done(store, app, 2), 30)
    reasons = sorted(p.reason for p in list_parked(store, app))
    assert reasons == ["RuntimeError('async step 0 fails')", "timed out after 0.1s"]
    assert recorder.calls["a", 0] == recorder.calls["b", 0] == 2
    store.close()


# -- quick handlers inline -----------------------------------------------------------------


def _rounds(service: Service, app: App, store: EventStore, action: str, rounds: int) -> None:
    """Publish ``rounds`` rounds of 10 one-step plans (``action``), each once the last is done."""
    for r in range(rounds):
        for i in range(10):
            app.publish(store, Plan(plan_id=f"{action}-{r}-{i}", steps=(action,)), "plans")
        count = 10 * (r + 1)
        assert service.wait_until(lambda: all_done(store, app, count), 30)  # noqa: B023


def test_a_quick_handler_runs_on_the_processors_thread_a_slow_one_on_the_workers() -> None:
    quick_store, slow_store = MemoryEventStore(), MemoryEventStore()
    quick_app, quick = plan_app("inline-quick", pool_size=4, inline=True)
    slow_app, slow = plan_app("inline-slow", pool_size=4, inline=True)
    plain_store = MemoryEventStore()
    plain_app, plain = plan_app("inline-off", pool_size=4)
    with Service(quick_app, quick_store) as service:
        processor_thread = f"decider:{commands(service).name}"
        _rounds(service, quick_app, quick_store, "ok", 2)
    with Service(slow_app, slow_store) as service:
        _rounds(service, slow_app, slow_store, "sleep:0.003", 2)
    with Service(plain_app, plain_store) as service:
        _rounds(service, plain_app, plain_store, "ok", 2)
    # Once its first calls (on the workers) showed it quick: no hand-off.
    assert [quick.threads[f"ok-1-{i}"] for i in range(10)] == [[processor_thread]] * 10
    # A handler not registered inline=True always runs on the workers, however quick.
    assert all(names == ["decider inline-off.commands worker"] for names in plain.threads.values())
    # A call of 3 ms is slow: every one on a worker, side by side with others.
    assert all(names == ["decider inline-slow.commands worker"] for names in slow.threads.values())
    assert len(slow.threads) == 20


def test_a_quick_handler_that_hangs_inline_times_out_and_is_retried_on_a_worker() -> None:
    store = MemoryEventStore()
    app, recorder = plan_app("inline-hang", pool_size=4, retry=FAST, timeout=0.3, inline=True)
    with Service(app, store) as service:
        processor_thread = f"decider:{commands(service).name}"
        _rounds(service, app, store, "ok", 2)
        app.publish(store, Plan(plan_id="stuck", steps=("hang",)), "plans")
        # Both attempts time out: the first held the processor's thread, the retry a worker.
        assert service.wait_until(lambda: commands(service).pool.timeouts == 2, 30)
        assert recorder.threads["stuck"] == [
            processor_thread,
            "decider inline-hang.commands worker",
        ]
        recorder.release.set()  # the calls return; their answers are ignored
        assert service.wait_until(lambda: all_done(store, app, 21), 30)
    (parked,) = list_parked(store, app)
    assert "timed out" in parked.reason


def test_the_pool_runs_a_quick_call_inline_only_where_the_submitter_allows_it() -> None:
    threads: list[str] = []
    done = threading.Semaphore(0)

    def quick(command: object, command_id: str) -> list[object]:
        threads.append(threading.current_thread().name)
        return []

    handler = HandlerRegistration("t.Quick", "quick", quick, RetryPolicy(), inline=True)
    pool = CommandPool("inline-pool", 2, SystemClock(), None, quick=0.001)
    pool.start(needs_loop=False)
    try:
        for i, inline in enumerate([True] * (FIRST + 1) + [False, True]):
            job = Job(f"k{i}", handler, None, f"c{i}", lambda _: done.release())
            pool.submit(job, inline=inline)
            assert done.acquire(timeout=10)
    finally:
        pool.close()
    here, worker = threading.current_thread().name, "decider inline-pool worker"
    # The first calls on the workers; then inline; a burst (inline=False) on the workers.
    assert threads == [worker] * FIRST + [here, worker, here]
    assert pool.inline_calls == 2


def test_the_pace_tolerates_one_slow_call_in_its_window() -> None:
    pace = Pace(0.001)
    for _ in range(FIRST - 1):
        pace.record("h", 0.0001)
    assert not pace.inline("h")  # not yet seen enough calls
    pace.record("h", 0.0001)
    assert pace.inline("h")
    pace.record("h", 0.005)  # one slow call (a GIL switch in the middle of it)
    assert pace.inline("h")
    pace.record("h", 0.005)  # a second one in the window: back to the workers
    assert not pace.inline("h")
    for _ in range(WINDOW - 2):
        pace.record("h", 0.0001)
    assert not pace.inline("h")  # both slow calls still in the window
    pace.record("h", 0.0001)
    assert pace.inline("h")  # the first slid out
    assert not Pace(0).inline("h")
    assert not pace.inline("never called")


# -- async and sync -----------------------------------------------------------------------


def test_async_and_sync_handlers_in_one_app(store: EventStore) -> None:
    app, recorder = plan_app("mixed", pool_size=4)
    steps = ("~sleep:0.01", "ok", "~ok", "sleep:0.01")
    for i in range(5):
        app.publish(store, Plan(plan_id=f"m{i}", steps=steps), "plans")
    with Service(app, store) as service:
        assert service.wait_until(lambda: all_done(store, app, 5), 30)
        assert service.wait_idle(30)
    assert recorder.overlaps == 0
    for i in range(5):
        assert [s for p, s in recorder.started if p == f"m{i}"] == [0, 1, 2, 3]
    assert sum(recorder.calls.values()) == 20
    assert list_parked(store, app) == []


# -- limits -------------------------------------------------------------------------------


def test_a_concurrency_limit_caps_calls_at_once(tmp_path: Path) -> None:
    store = SqliteEventStore(tmp_path / "events.db")
    app, recorder = plan_app("limited", pool_size=8, concurrency=2)
    for i in range(10):
        app.publish(store, Plan(plan_id=f"l{i}", steps=("sleep:0.01",)), "plans")
    with Service(app, store) as service:
        assert service.wait_until(lambda: all_done(store, app, 10), 30)
    assert recorder.most == 2
    store.close()


def test_a_rate_limit_spaces_calls() -> None:
    store = MemoryEventStore()
    calls: list[float] = []
    app = App("rated", pool_size=8)
    app.workflow(
        plan,
        inputs={Plan: lambda m, _: m.plan_id, StepDone: by_correlation},
    )

    @app.handler(Step, rate=10)
    def step(command: Step, command_id: str) -> list[object]:
        calls.append(time.monotonic())
        return [StepDone(plan_id=command.plan_id, index=command.index)]

    for i in range(4):
        app.publish(store, Plan(plan_id=f"r{i}", steps=("ok",)), "plans")
    with Service(app, store) as service:
        assert service.wait_until(lambda: all_done(store, app, 4), 30)
    # Started 0.1 s apart (the handler notes the time a little after the start: a margin).
    assert len(calls) == 4
    assert calls[-1] - calls[0] >= 0.25
    assert min(b - a for a, b in itertools.pairwise(calls)) >= 0.05


@pytest.mark.parametrize(
    ("options", "wrong"),
    [
        ({"timeout": 0}, "timeout"),
        ({"concurrency": 0}, "concurrency"),
        ({"rate": -1.0}, "rate"),
    ],
)
def test_bad_handler_options_are_refused_by_name(options: dict[str, Any], wrong: str) -> None:
    app = App("bad")
    with pytest.raises(AppDefinitionError, match=wrong):
        app.add_handler(Step, lambda c, i: [], name="step", **options)


def test_a_bad_pool_size_is_refused() -> None:
    with pytest.raises(AppDefinitionError, match="pool_size"):
        App("bad", pool_size=0)


# -- the checkpoint and stopping ---------------------------------------------------------


def test_results_past_the_checkpoint_are_not_redone_after_a_restart(store: EventStore) -> None:
    """A hung call holds the checkpoint; later commands conclude and are committed. Stopped
    with the call still hung, then started again: only the hung command runs again."""
    app, recorder = plan_app("mark", pool_size=4)
    app.publish(store, Plan(plan_id="first", steps=("hang",)), "plans")
    for i in range(3):
        app.publish(store, Plan(plan_id=f"later{i}", steps=("ok",)), "plans")
    service = Service(app, store)
    service.start()
    try:
        assert service.wait_until(lambda: all_done(store, app, 3), 30)
        service.stop(timeout=1)  # the hung call is left behind (half a second's grace)
    finally:
        recorder.release.set()
    assert recorder.calls["first", 0] == 1
    with Service(app, store) as again:
        assert again.wait_until(lambda: all_done(store, app, 4), 30)
        assert again.wait_idle(30)
    assert recorder.calls["first", 0] == 2
    assert all(recorder.calls[f"later{i}", 0] == 1 for i in range(3))
    for i in range(3):
        (command,) = [e for e in store.read_stream(plan.stream(f"later{i}")) if "Sent" in e.type]
        assert len(store.read_stream(f"step-{command.id}")) == 1


def test_a_graceful_stop_waits_for_calls_in_flight(tmp_path: Path) -> None:
    store = SqliteEventStore(tmp_path / "events.db")
    app, recorder = plan_app("graceful", pool_size=4)
    for i in range(3):
        app.publish(store, Plan(plan_id=f"g{i}", steps=("hang",)), "plans")
    service = Service(app, store)
    service.start()
    assert service.wait_until(lambda: recorder.running == 3, 30)
    stopper = threading.Thread(target=service.stop, kwargs={"timeout": 30})
    stopper.start()
    # The stop waits for the calls in hand: they are released once the pool has paused.
    pool = commands(service).pool
    assert service.wait_until(lambda: pool._paused, 30)
    recorder.release.set()
    stopper.join(30)
    assert not service.running
    # The three calls concluded, and their results were committed before the stop ended.
    for i in range(3):
        (sent,) = [e for e in store.read_stream(plan.stream(f"g{i}")) if "Sent" in e.type]
        assert len(store.read_stream(f"step-{sent.id}")) == 1
    with Service(app, store) as again:
        assert again.wait_until(lambda: all_done(store, app, 3), 30)
        assert again.wait_idle(30)
    assert all(recorder.calls[f"g{i}", 0] == 1 for i in range(3))
    store.close()


def test_a_stop_interrupted_by_a_hung_handler_leaves_its_command_for_the_next_run() -> None:
    store = MemoryEventStore()
    app, calls = job_app("stuck-stop", timeout=None)
    release = threading.Event()
    handler = app.handlers[next(iter(app.handlers))]
    inner = handler.func

    def slow(command: DoWork, command_id: str) -> Any:
        if command.job_id == "slow" and not release.is_set():
            release.wait(30)
        return inner(command, command_id)

    app.handlers[handler.type_name] = attrs.evolve(handler, func=slow)
    app.publish(store, JobRequested(job_id="slow", action="ok"), "jobs")
    service = Service(app, store)
    service.start()
    try:
        pool = commands(service).pool
        assert service.wait_until(lambda: pool.calls_in_flight() == 1, 30)
        started = time.monotonic()
        service.stop(timeout=1)
        assert time.monotonic() - started < 5
    finally:
        release.set()
    assert calls["slow"] == 0
    with Service(app, store) as again:
        # Carried out again (the abandoned call also ends, its answer not stored).
        assert again.wait_until(lambda: calls["slow"] == 2, 30)
        assert again.wait_idle(30)
    (sent,) = [e for e in store.read_stream("Job-slow") if "Sent" in e.type]
    assert len(store.read_stream(f"do_work-{sent.id}")) == 1
