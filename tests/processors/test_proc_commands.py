"""The command processor: handlers, retries, parking and its ledger, routes and topics."""

from __future__ import annotations

import functools
import threading
from typing import Any

import pytest
from returns.result import Failure, Success

from decider import Lifecycle, Metadata, Workflow, event_id
from decider.processors import (
    App,
    FakeClock,
    HandlerFailure,
    InstanceEnded,
    NotParked,
    RetryPolicy,
    Service,
    by_correlation,
    list_parked,
    retry_parked,
    show,
)
from decider.stores.errors import StoreUnavailable
from decider.stores.memory import MemoryEventStore
from decider.stores.protocol import NO_STREAM, EventStore, NewEvent
from tests.support.apps import (
    DoWork,
    JobAbandoned,
    JobRequested,
    RemindMe,
    WorkDone,
    job,
    job_app,
    job_decide,
    job_evolve,
    reminder,
    reminder_app,
)
from tests.support.stores import counts, types

FAST = RetryPolicy(max_attempts=3, initial_delay=0.001, max_delay=0.002)


def completed(store: EventStore, app: App, job_id: str) -> bool:
    return show(store, app, job.stream(job_id)).status is Lifecycle.COMPLETED


def test_a_failing_command_is_parked_fed_back_and_can_be_retried(
    store: EventStore, app_name: str
) -> None:
    app, calls = job_app(app_name, retry=FAST)
    for i in range(6):
        app.publish(store, JobRequested(job_id=f"j{i}", action="fail" if i == 3 else "ok"), "jobs")
    with Service(app, store) as service:
        assert service.wait_until(lambda: all(completed(store, app, f"j{i}") for i in range(6)), 30)
        assert service.wait_idle(30)
        assert calls["j3"] == 3  # every attempt of the policy
        assert all(calls[f"j{i}"] == 1 for i in range(6) if i != 3)
        # The workflow heard of the failure and compensated.
        failed = show(store, app, job.stream("j3"))
        assert failed.state.failed is not None and "cannot do j3" in failed.state.failed
        assert [h.type for h in failed.history][-3:] == [
            "Received:decider.CommandFailed",
            "Published:ptest.JobAbandoned",
            "Completed",
        ]
        (topic,) = counts(store, "topic-ptest.JobAbandoned-")
        (abandoned,) = store.read_stream(topic)
        assert app.codec.decode_message(abandoned.type, abandoned.data) == JobAbandoned(
            job_id="j3", reason=failed.state.failed
        )
        (parked,) = list_parked(store, app)
        assert parked.command_type == "ptest.DoWork"
        assert parked.stream == job.stream("j3") and parked.attempts == 3
        assert "RuntimeError" in parked.reason
        # Its job has ended: a retry is refused unless forced.
        with pytest.raises(InstanceEnded, match=r"which has ended \(completed\)"):
            retry_parked(store, app, parked.command_id)
        # Retried (forced) while still broken: carried out again, parked again.
        retry_parked(store, app, parked.command_id, force=True)
        assert service.wait_until(
            lambda: calls["j3"] == 6 and len(list_parked(store, app)) == 1, 30
        )
        assert service.wait_idle(30)
        # Fixed: retried once more, it succeeds; its result reaches the completed instance.
        object.__setattr__(
            app.handlers["ptest.DoWork"], "func", lambda c, i: [WorkDone(job_id=c.job_id)]
        )
        retry_parked(store, app, parked.command_id, force=True)
        assert service.wait_until(lambda: list_parked(store, app) == [], 30)
        assert service.wait_idle(30)
        assert counts(store)[f"do_work-{parked.command_id}"] == 1
        assert types(store, job.stream("j3"))[-1] == "Ignored:ptest.WorkDone"
    try:
        retry_parked(store, app, parked.command_id, force=True)
    except NotParked as exc:
        assert parked.command_id in str(exc)
    else:
        raise AssertionError("retrying a command that is not parked must fail")


def test_a_final_failure_parks_at_once_and_without_compensation_input(
    store: EventStore, app_name: str
) -> None:
    app = App(app_name)
    # This workflow does not list CommandFailed: the command is only parked.
    app.workflow(
        Workflow("Job", job.initial_state, job_evolve, job_decide),
        inputs={JobRequested: lambda m, _: m.job_id, WorkDone: by_correlation},
    )
    seen: list[str] = []

    @app.handler(DoWork, retry=FAST)
    def do_work(command: DoWork, command_id: str) -> Any:
        seen.append(command_id)
        if command.action == "final":
            return Failure(HandlerFailure(reason="card declined", retryable=False))
        return Success([WorkDone(job_id=command.job_id)])

    app.publish(store, JobRequested(job_id="a", action="final"), "jobs")
    app.publish(store, JobRequested(job_id="b", action="ok"), "jobs")
    with Service(app, store) as service:
        assert service.wait_until(lambda: len(list_parked(store, app)) == 1, 30)
        assert service.wait_until(lambda: completed(store, app, "b"), 30)
        assert service.wait_idle(30)
    (parked,) = list_parked(store, app)
    assert (parked.reason, parked.attempts) == ("card declined", 1)
    assert len(seen) == 2
    assert not any(s.startswith("decider-failed-") for s in counts(store))
    assert show(store, app, job.stream("a")).status is Lifecycle.RUNNING


def test_a_stop_interrupts_a_retry_wait_and_the_command_runs_again_later(
    store: EventStore, app_name: str
) -> None:
    clock = FakeClock()
    app, calls = job_app(app_name, retry=RetryPolicy(max_attempts=5, initial_delay=3600))
    app.publish(store, JobRequested(job_id="slow", action="fail"), "jobs")
    service = Service(app, store, clock=clock)
    service.start()
    # The handler failed once; the processor now waits an hour of fake time for its retry.
    assert service.wait_until(lambda: calls["slow"] == 1 and clock.waiters >= 2, 30)
    stopper = threading.Thread(target=service.stop, kwargs={"timeout": 10})
    stopper.start()
    stopper.join(15)
    assert not service.running
    assert list_parked(store, app) == []
    # Started again, the command is carried out again from the start (not skipped).
    with Service(app, store, clock=clock) as again:
        assert again.wait_until(lambda: calls["slow"] == 2, 30)


def test_routes_topics_and_replies_copy_the_message(store: EventStore, app_name: str) -> None:
    app = reminder_app(app_name)
    message_id = app.publish(store, RemindMe(reminder_id="r", seconds=3600), "reminders")
    with Service(app, store) as service:
        reply = f"reply-{message_id}"
        assert service.wait_until(lambda: len(store.read_stream(reply)) == 1, 30)
        assert service.wait_idle(30)
    (event,) = store.read_stream(reply)
    assert event.type == "ptest.ReminderSet"
    assert app.codec.decode_message(event.type, event.data).reminder_id == "r"
    (sent,) = [e for e in store.read_stream(reminder.stream("r")) if e.type.startswith("Replied")]
    assert app.codec.decode_metadata(event.metadata).causation_id == str(sent.id)
    assert app.codec.decode_metadata(event.metadata).correlation_id == "r"


def test_a_command_without_handler_is_parked_and_a_corrupt_one_skipped(
    store: EventStore, app_name: str
) -> None:
    app, calls = job_app(app_name, retry=FAST)
    stream = job.stream("manual")
    raw = [
        ("Began", b"{}"),
        ("Sent:ptest.Unknown", b"{}"),
        ("Sent:ptest.DoWork", b'{"job_id": 1}'),
        ("Sent:ptest.DoWork", b"{bad"),
    ]
    written = []
    for index, (type_name, data) in enumerate(raw):
        new_id = event_id(stream, "m", index)
        metadata = Metadata(message_id=str(new_id), correlation_id="manual", causation_id="m")
        written.append(NewEvent(new_id, type_name, data, app.codec.encode_metadata(metadata)))
    store.append(stream, written, NO_STREAM)
    with Service(app, store) as service:
        assert service.wait_until(lambda: len(list_parked(store, app)) == 1, 30)
        skipped = f"decider-skipped-{app_name}.commands"
        assert service.wait_until(lambda: len(store.read_stream(skipped)) == 2, 30)
        assert service.wait_idle(30)
        assert service.errors == []
    (parked,) = list_parked(store, app)
    assert "no handler or route" in parked.reason
    assert sum(calls.values()) == 0
    # The workflow lists CommandFailed, so the failure is fed back; but this instance's own
    # stream holds the undecodable events, so its workflow processor skips the input in turn.
    assert counts(store)[f"decider-failed-Job-{parked.command_id}"] == 1
    (record,) = store.read_stream(f"decider-skipped-{app_name}.workflow.Job")
    assert b"cannot be folded" in record.data
    assert types(store, stream)[-1] == "Sent:ptest.DoWork"


def test_a_handler_returning_no_list_is_parked_at_once(store: EventStore, app_name: str) -> None:
    app = App(app_name)
    app.workflow(job, inputs={JobRequested: lambda m, _: m.job_id, WorkDone: by_correlation})

    def sloppy(command: DoWork, command_id: str) -> Any:
        return WorkDone(job_id=command.job_id)  # no list, on purpose

    app.add_handler(DoWork, sloppy, name="sloppy", retry=FAST)
    app.publish(store, JobRequested(job_id="x", action="ok"), "jobs")
    with Service(app, store) as service:
        assert service.wait_until(lambda: len(list_parked(store, app)) == 1, 30)
    (parked,) = list_parked(store, app)
    assert "not a list" in parked.reason and parked.attempts == 1


def test_a_store_outage_is_survived_by_resuming_from_the_checkpoint(app_name: str) -> None:
    store = MemoryEventStore()
    app, _ = job_app(app_name, retry=FAST)
    original, failures = store.append_batch, list[int]()

    def flaky(appends: Any, **fences: Any) -> Any:
        if not failures:
            failures.append(1)
            raise StoreUnavailable("the disk went away for a moment")
        return original(appends, **fences)

    store.append_batch = flaky  # type: ignore[method-assign]
    app.publish(store, JobRequested(job_id="j", action="ok"), "jobs")
    with Service(app, store) as service:
        assert service.wait_until(lambda: completed(store, app, "j"), 30)
        assert len(service.errors) == 1
        assert isinstance(service.errors[0], StoreUnavailable)
    assert types(store, job.stream("j")).count("Received:ptest.WorkDone") == 1


def test_concluded_commands_are_committed_on_a_wake_up_not_on_a_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lone command is committed as soon as it concludes: the processor's thread waits for
    input or for a conclusion, never with a timeout that would make it a poll (or a linger)."""
    from decider.stores.subscription import CatchUpSubscription

    waits: list[tuple[str, float | None]] = []
    original = CatchUpSubscription.poll

    def poll(self: CatchUpSubscription, timeout: float | None) -> Any:
        if timeout != 0:  # a zero timeout only drains what is buffered
            waits.append((threading.current_thread().name, timeout))
        return original(self, timeout)

    monkeypatch.setattr(CatchUpSubscription, "poll", poll)
    store = MemoryEventStore()
    app, calls = job_app("lone")
    with Service(app, store) as service:
        for i in range(3):
            app.publish(store, JobRequested(job_id=f"j{i}", action="ok"), "jobs")
            assert service.wait_until(functools.partial(completed, store, app, f"j{i}"), 30)
    commands = [timeout for name, timeout in waits if name.endswith(".commands")]
    assert commands, "the command processor's waits were not seen"
    assert all(timeout is None for timeout in commands), commands
    assert all(calls[f"j{i}"] == 1 for i in range(3))
