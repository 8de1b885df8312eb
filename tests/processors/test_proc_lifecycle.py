"""Lifecycles through a running service, on every store: failed and cancelled instances,
cancel requests (decided or not), timers of ended instances, the workflow version on Began."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import attrs
import pytest

from decider import (
    Cancel,
    CancelRequested,
    Command,
    Complete,
    Fail,
    Lifecycle,
    Metadata,
    Publish,
    Schedule,
    Workflow,
    WorkflowEvent,
    message,
)
from decider.processors import App, FakeClock, Service, by_correlation, show
from decider.processors.operate.operations import OperationError, cancel_stream
from decider.processors.timers.processor import TimerProcessor
from decider.processors.workflows.processor import WorkflowProcessor
from decider.stores.protocol import EventStore
from tests.support.stores import counts, types

WAIT = 30.0


@message("lctest.Start")
@attrs.frozen(kw_only=True)
class Start:
    """Begin errand ``errand_id``: it completes when its timer comes, a minute later."""

    errand_id: str


@message("lctest.Poke")
@attrs.frozen(kw_only=True)
class Poke:
    """Poke a running errand; ``boom`` makes its decide raise, ``give_up`` fail it on purpose."""

    errand_id: str
    boom: bool = False
    give_up: bool = False


@message("lctest.Due")
@attrs.frozen(kw_only=True)
class Due:
    """The errand's timer."""

    errand_id: str


@message("lctest.ChoreDue")
@attrs.frozen(kw_only=True)
class ChoreDue:
    """The chore's timer (a type of its own: both workflows route their timers by correlation
    id, and an errand and a chore share ids)."""

    chore_id: str


@message("lctest.Compensated")
@attrs.frozen(kw_only=True)
class Compensated:
    """Published by a chore that undoes its work before it is cancelled."""

    chore_id: str
    reason: str


def errand_decide(msg: Any, state: int) -> Sequence[Command[Any]]:
    match msg:
        case Start(errand_id=eid):
            return [Schedule(timedelta(seconds=60), Due(errand_id=eid))]
        case Poke(boom=True):
            raise ValueError(f"boom after {state} events")
        case Poke(give_up=True):
            return [Fail("gave up")]
        case Due():
            return [Complete()]
    return []


def count(state: int, _: WorkflowEvent[Any, Any]) -> int:
    return state + 1


errand = Workflow("Errand", 0, count, errand_decide, on_error="fail", version="errand-v7")


def chore_decide(msg: Any, state: int) -> Sequence[Command[Any]]:
    match msg:
        case Start(errand_id=cid):
            return [Schedule(timedelta(seconds=60), ChoreDue(chore_id=cid))]
        case CancelRequested(reason=reason):
            # The corresponding Start's id is in the instance's stream name; here the state
            # only counts, so the chore compensates under a fixed name.
            return [Publish(Compensated(chore_id="chore", reason=reason)), Cancel(reason)]
        case ChoreDue():
            return [Complete()]
    return []


chore = Workflow("Chore", 0, count, chore_decide)


def _errand_id(msg: Start | Poke, _: Metadata) -> str:
    return msg.errand_id


def make_app(name: str) -> App:
    app = App(name)
    app.workflow(errand, inputs={Start: _errand_id, Poke: _errand_id, Due: by_correlation})
    app.workflow(
        chore, inputs={Start: _errand_id, ChoreDue: by_correlation, CancelRequested: by_correlation}
    )
    return app


def status(store: EventStore, app: App, stream: str) -> Lifecycle:
    return show(store, app, stream).status


def timers(service: Service) -> TimerProcessor:
    timer = service.processor("timers")
    assert isinstance(timer, TimerProcessor)
    return timer


def workflow_processor(service: Service, workflow: str) -> WorkflowProcessor:
    processor = service.processor(f"workflow.{workflow}")
    assert isinstance(processor, WorkflowProcessor)
    return processor


def started(store: EventStore, app: App, service: Service, instance: str) -> None:
    """Publish Start for ``instance`` (an errand and a chore) and wait for both timers."""
    before = len(timers(service).pending)
    app.publish(store, Start(errand_id=instance), "lc-inputs")
    assert service.wait_until(lambda: len(timers(service).pending) == before + 2, WAIT)


def test_a_decide_that_raises_fails_the_instance_and_later_inputs_are_ignored(
    store: EventStore, app_name: str
) -> None:
    app, clock = make_app(app_name), FakeClock()
    with Service(app, store, clock=clock) as service:
        started(store, app, service, "e1")
        app.publish(store, Poke(errand_id="e1", boom=True), "lc-inputs")
        assert service.wait_until(lambda: status(store, app, "Errand-e1") is Lifecycle.FAILED, WAIT)
        app.publish(store, Poke(errand_id="e1"), "lc-inputs")
        assert service.wait_until(lambda: types(store, "Errand-e1")[-1].startswith("Ignored"), WAIT)
        clock.advance(120)
        assert service.wait_until(lambda: timers(service).dropped == 1, WAIT)
        assert service.wait_until(
            lambda: status(store, app, "Chore-e1") is Lifecycle.COMPLETED, WAIT
        )
        assert service.wait_idle(WAIT)
        assert workflow_processor(service, "Errand").cache.get("Errand-e1") is None
        assert timers(service).fired == 1  # the chore's
    assert types(store, "Errand-e1") == [
        "Began",
        "InitiatedBy:lctest.Start",
        "Scheduled:lctest.Due",
        "Received:lctest.Poke",
        "Failed",
        "Ignored:lctest.Poke",
    ]
    failed, ignored = store.read_stream("Errand-e1")[-2:]
    assert json.loads(failed.data) == {"reason": "decide raised ValueError: boom after 3 events"}
    assert json.loads(ignored.data)["reason"] == "the workflow instance has failed"
    assert sum(counts(store, "timer-").values()) == 1  # the errand's timer never fired


def test_fail_ends_the_instance_and_began_records_the_workflow_version(
    store: EventStore, app_name: str
) -> None:
    app = make_app(app_name)
    with Service(app, store, clock=FakeClock()) as service:
        started(store, app, service, "e2")
        app.publish(store, Poke(errand_id="e2", give_up=True), "lc-inputs")
        assert service.wait_until(lambda: status(store, app, "Errand-e2") is Lifecycle.FAILED, WAIT)
        with pytest.raises(OperationError, match="'Errand-e2' is failed, not running"):
            app.cancel(store, errand, "e2", reason="too late")
    began = store.read_stream("Errand-e2")[0]
    assert app.codec.decode_metadata(began.metadata).workflow_version == "errand-v7"
    chore_began = store.read_stream("Chore-e2")[0]
    assert app.codec.decode_metadata(chore_began.metadata).workflow_version is None
    assert json.loads(store.read_stream("Errand-e2")[-1].data) == {"reason": "gave up"}


def test_cancel_an_instance_that_does_not_decide_it_drops_its_timer(
    store: EventStore, app_name: str
) -> None:
    app, clock = make_app(app_name), FakeClock()
    with Service(app, store, clock=clock) as service:
        started(store, app, service, "e3")
        request = app.cancel(store, errand, "e3", reason="not needed")
        assert (request.stream, request.already) == ("Errand-e3", False)
        cancelled = lambda: status(store, app, "Errand-e3") is Lifecycle.CANCELLED  # noqa: E731
        assert service.wait_until(cancelled, WAIT)
        clock.advance(120)
        assert service.wait_until(lambda: timers(service).dropped == 1, WAIT)
        assert service.wait_idle(WAIT)
        again = app.cancel(store, "Errand-e3", reason="again")
        assert (again.already, again.reason, again.message_id) == (
            True,
            "not needed",
            request.message_id,
        )
        # The chore of the same id is not touched by the errand's cancel request.
        assert status(store, app, "Chore-e3") is Lifecycle.COMPLETED
    assert types(store, "Errand-e3") == [
        "Began",
        "InitiatedBy:lctest.Start",
        "Scheduled:lctest.Due",
        "Received:decider.CancelRequested",
        "Cancelled",
    ]
    assert json.loads(store.read_stream("Errand-e3")[-1].data) == {"reason": "not needed"}
    assert [e.type for e in store.read_stream("Chore-e3")][-1] == "Completed"


def test_a_workflow_that_decides_a_cancel_request_compensates_first(
    store: EventStore, app_name: str
) -> None:
    app, clock = make_app(app_name), FakeClock()
    with Service(app, store, clock=clock) as service:
        started(store, app, service, "c1")
        app.cancel(store, "Chore-c1", reason="customer left")
        assert service.wait_until(
            lambda: status(store, app, "Chore-c1") is Lifecycle.CANCELLED, WAIT
        )
        assert service.wait_until(lambda: bool(counts(store, "topic-lctest.Compensated")), WAIT)
        clock.advance(120)
        assert service.wait_until(lambda: timers(service).dropped == 1, WAIT)
        assert service.wait_idle(WAIT)
        assert status(store, app, "Errand-c1") is Lifecycle.COMPLETED
    assert types(store, "Chore-c1")[3:] == [
        "Received:decider.CancelRequested",
        "Published:lctest.Compensated",
        "Cancelled",
    ]
    [published] = [e for s in counts(store, "topic-") for e in store.read_stream(s)]
    assert json.loads(published.data) == {"chore_id": "chore", "reason": "customer left"}


def test_only_requests_in_an_instances_cancel_stream_cancel_it(
    store: EventStore, app_name: str
) -> None:
    app = make_app(app_name)
    with Service(app, store, clock=FakeClock()) as service:
        started(store, app, service, "c2")
        # A CancelRequested published anywhere else is not a cancel request, even correlated
        # to the instance and even for a workflow that lists it among its inputs.
        app.publish(store, CancelRequested(reason="forged"), "lc-inputs", correlation_id="c2")
        # A request for an instance that has not begun records nothing (nothing to cancel).
        app.publish(store, CancelRequested(reason="early"), cancel_stream("Chore-none"))
        assert service.wait_idle(WAIT)
        assert status(store, app, "Chore-c2") is Lifecycle.RUNNING
        assert store.read_stream("Chore-none") == []
        chores = workflow_processor(service, "Chore")
        errands = workflow_processor(service, "Errand")
        handled = (chores.handled, errands.handled)
        app.cancel(store, "Chore-c2", reason="real")
        assert service.wait_until(
            lambda: status(store, app, "Chore-c2") is Lifecycle.CANCELLED, WAIT
        )
        assert service.wait_idle(WAIT)
        assert (chores.handled, errands.handled) == (handled[0] + 1, handled[1])
        assert status(store, app, "Errand-c2") is Lifecycle.RUNNING


def test_cancel_names_what_is_wrong(store: EventStore, app_name: str) -> None:
    app = make_app(app_name)
    with pytest.raises(OperationError, match="has no events"):
        app.cancel(store, errand, "nobody", reason="x")
    with pytest.raises(OperationError, match="not the stream of a workflow"):
        app.cancel(store, "Other-x", reason="x")
