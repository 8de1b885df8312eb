"""The state-stored variant: a state row and an outbox, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from decider import CancelRequested, Lifecycle
from decider.processors import (
    App,
    AppDefinitionError,
    FakeClock,
    Service,
    Signal,
    SystemClock,
    by_correlation,
    show,
    status,
)
from decider.processors.cli import main
from decider.processors.engine.base import Context
from decider.processors.operate.operations import OperationError
from decider.processors.timers.processor import TimerProcessor
from decider.processors.workflows.state_stored import StateStoredProcessor
from decider.stores import (
    NO_STREAM,
    EventStore,
    LeaseLost,
    LeaseStore,
    NewEvent,
    StateStore,
    StateWrite,
    StreamAppend,
    WrongExpectedVersion,
)
from decider.stores.memory import MemoryEventStore
from decider.stores.sqlite import SqliteEventStore
from samples.traffic_fine.app import ISSUED_STREAM, REPORTS_STREAM, make_state_stored_app
from samples.traffic_fine.workflow import Final
from samples.traffic_fine.workflow import workflow as traffic_fine
from tests.processors.test_proc_lifecycle import (
    WAIT,
    ChoreDue,
    Due,
    Poke,
    Start,
    chore,
    errand,
)
from tests.processors.test_proc_lifecycle import _errand_id as errand_id
from tests.processors.test_proc_traffic_fine import report, speeding
from tests.support.apps import FINE_PARKING, FINE_SPEEDING, Added, Closed, tally, tally_route
from tests.support.stores import counts, open_store, types
from tests.support.waiting import wait_until

OUTBOX_SPEEDING = [t for t in FINE_SPEEDING if not t.startswith(("Received:", "InitiatedBy:"))]
OUTBOX_PARKING = [t for t in FINE_PARKING if not t.startswith(("Received:", "InitiatedBy:"))]


@pytest.fixture(params=["sqlite", "postgres"])
def state_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    """A fresh store of each kind that keeps state rows."""
    opened, cleanups = open_store(request.param, tmp_path)
    try:
        yield opened
    finally:
        for cleanup in cleanups:
            cleanup()


def tally_app() -> App:
    app = App("states")
    app.workflow(tally, inputs={Added: tally_route, Closed: tally_route}, stored="state")
    return app


def processor(app: App, store: EventStore) -> StateStoredProcessor:
    """A new processor: an empty cache, as after a process start."""
    context = Context(app, store, store, SystemClock(), Signal(), lambda: None)  # type: ignore[arg-type]
    return StateStoredProcessor(context, app.workflows["Tally"])


def test_the_traffic_fine_workflow_runs_state_stored(state_store: EventStore) -> None:
    app = make_state_stored_app("fines-state")
    n = 20
    app.publish_many(state_store, [report(i) for i in range(n)], REPORTS_STREAM)
    # The same report again under its message id, from another stream: handled once.
    first = state_store.read_stream(REPORTS_STREAM)[1]
    message_id = app.codec.decode_metadata(first.metadata).message_id
    app.publish(state_store, report(1), "other-reports", message_id=message_id)
    with Service(app, state_store) as service:

        def done() -> int:
            return sum(s.status is Lifecycle.COMPLETED for s in status(state_store, app))

        assert service.wait_until(lambda: done() == n, 60)
        assert service.wait_idle(30)
        assert service.errors == []
    for i in range(n):
        expected = OUTBOX_PARKING if i % 5 == 0 else OUTBOX_SPEEDING
        assert types(state_store, traffic_fine.stream(f"r{i}")) == expected
    assert counts(state_store)[ISSUED_STREAM] == speeding(n)
    view = show(state_store, app, traffic_fine.stream("r1"))
    assert view.status is Lifecycle.COMPLETED
    assert [h.type for h in view.history] == OUTBOX_SPEEDING
    assert view.state == Final()  # from the state row
    issued = [
        app.codec.decode_message(e.type, e.data) for e in state_store.read_stream(ISSUED_STREAM)
    ]
    assert {f.police_report_id for f in issued} == {f"r{i}" for i in range(n) if i % 5}


def test_show_prints_the_row_and_the_outbox_of_a_running_instance(
    state_store: EventStore,
) -> None:
    app = tally_app()
    proc = processor(app, state_store)
    for amount in (3, 4):
        app.publish(state_store, Added(tally_id="t", amount=amount), "in")
    proc.process(state_store.read_stream("in"))
    view = show(state_store, app, tally.stream("t"))
    assert (view.state, view.status) == (7, Lifecycle.RUNNING)
    assert [h.type for h in view.history] == ["Began"]  # the inputs are not in the outbox


def test_a_stale_row_conflicts_and_the_input_is_redone(state_store: EventStore) -> None:
    app = tally_app()
    a, b = processor(app, state_store), processor(app, state_store)
    for amount in (1, 10, 100):
        app.publish(state_store, Added(tally_id="t", amount=amount), "in")
    one, ten, hundred = state_store.read_stream("in")
    a.process([one])
    b.process([ten])  # b reads the row a wrote; a's cached row is now stale
    a.process([hundred])
    assert a.conflicts == 1
    assert show(state_store, app, tally.stream("t")).state == 111


def test_a_failed_version_check_writes_nothing(state_store: EventStore) -> None:
    assert isinstance(state_store, StateStore)
    state_store.commit_states([StateWrite("k", 0, 2, b"two")], [], checkpoints=[("p", 1)])
    with pytest.raises(WrongExpectedVersion) as raised:
        state_store.commit_states(
            [StateWrite("other", 0, 1, b"one"), StateWrite("k", 1, 3, b"three")],
            [StreamAppend("outbox-k", [NewEvent(uuid.uuid4(), "Began", b"{}")], NO_STREAM)],
            checkpoints=[("p", 2)],
        )
    assert raised.value.stream == "k" and raised.value.actual == 2
    assert state_store.load_state("k") is not None
    assert state_store.load_state("k").data == b"two"  # type: ignore[union-attr]
    assert state_store.load_state("other") is None
    assert state_store.read_stream("outbox-k") == []
    assert state_store.load_checkpoint("p") == 1  # type: ignore[attr-defined]
    with pytest.raises(WrongExpectedVersion):  # a second "new" row for the same key
        state_store.commit_states([StateWrite("k", 0, 1, b"again")], [])


def test_a_crash_between_decide_and_commit_loses_nothing(state_store: EventStore) -> None:
    app = make_state_stored_app("fines-crash")
    app.publish(state_store, report(1), REPORTS_STREAM)
    context: Any = Context(app, state_store, state_store, SystemClock(), Signal(), lambda: None)  # type: ignore[arg-type]
    crashed = StateStoredProcessor(context, app.workflows[traffic_fine.name])
    [item] = state_store.read_stream(REPORTS_STREAM)
    crashed.handle([item])  # decided, never committed: the process dies here
    assert types(state_store, traffic_fine.stream("r1")) == []
    assert state_store.load_checkpoint(crashed.name) is None  # type: ignore[attr-defined]
    with Service(app, state_store) as service:
        assert service.wait_until(
            lambda: types(state_store, traffic_fine.stream("r1")) == OUTBOX_SPEEDING, 60
        )
        assert service.wait_idle(30)
    assert counts(state_store)[ISSUED_STREAM] == 1


def test_registration_and_stores_that_cannot_run_it_say_so() -> None:
    with pytest.raises(AppDefinitionError, match="stored must be 'events' or 'state'"):
        App("x").workflow(tally, inputs={Added: tally_route}, stored="rows")
    untyped = attrs.evolve(tally, evolve=lambda total, event: total)
    with pytest.raises(AppDefinitionError, match="state_type=State"):
        App("x").workflow(untyped, inputs={Added: tally_route}, stored="state")
    app = tally_app()
    with pytest.raises(AppDefinitionError, match="keeps no state rows"):
        processor(app, MemoryEventStore())


CLI_APP = make_state_stored_app("fines-state-cli")
"""The traffic-fine app, state-stored, as ``decider show --app`` loads it."""


def test_decider_show_prints_the_state_row_and_the_outbox(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "events.db"
    store = SqliteEventStore(path)
    try:
        CLI_APP.publish(store, report(3), REPORTS_STREAM)
        with Service(CLI_APP, store) as service:
            stream = traffic_fine.stream("r3")
            assert service.wait_until(lambda: types(store, stream) == OUTBOX_SPEEDING, 60)
    finally:
        store.close()
    at = ["--app", f"{__name__}:CLI_APP", "--store", f"sqlite:///{path}"]
    assert main(["show", stream, *at]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(f"{stream}  (workflow {traffic_fine.name}, completed")
    assert "Final()" in out
    assert [t for t in OUTBOX_SPEEDING if t in out] == OUTBOX_SPEEDING
    assert "InitiatedBy:" not in out


def test_an_input_whose_state_cannot_be_stored_is_skipped(state_store: EventStore) -> None:
    def evolve(total: int, event: Any) -> int:
        new = tally.evolve(total, event)
        return object() if new == 13 else new  # type: ignore[return-value]

    app = App("states")
    unlucky = attrs.evolve(tally, evolve=evolve)
    app.workflow(unlucky, inputs={Added: tally_route, Closed: tally_route}, stored="state")
    proc = processor(app, state_store)
    for amount in (6, 7, 1):  # 6 + 7 = 13 cannot be stored; 6 + 1 can
        app.publish(state_store, Added(tally_id="t", amount=amount), "in")
    proc.process(state_store.read_stream("in"))
    assert proc.skipped == 1
    assert show(state_store, app, tally.stream("t")).state == 7


def cancel_app(name: str) -> App:
    """The lifecycle tests' errand (cancel not decided) and chore (decides it), state-stored."""
    app = App(name)
    app.workflow(
        errand,
        inputs={Start: errand_id, Poke: errand_id, Due: by_correlation},
        stored="state",
    )
    app.workflow(
        chore,
        inputs={Start: errand_id, ChoreDue: by_correlation, CancelRequested: by_correlation},
        stored="state",
    )
    return app


def test_a_state_stored_instance_is_cancelled_with_and_without_a_handler(
    state_store: EventStore,
) -> None:
    app, clock = cancel_app("states-cancel"), FakeClock()
    with Service(app, state_store, clock=clock) as service:
        timer = service.processor("timers")
        assert isinstance(timer, TimerProcessor)
        app.publish(state_store, Start(errand_id="s1"), "lc-inputs")
        assert service.wait_until(lambda: len(timer.pending) == 2, WAIT)
        request = app.cancel(state_store, errand, "s1", reason="not needed")
        assert (request.stream, request.already) == ("Errand-s1", False)
        app.cancel(state_store, "Chore-s1", reason="customer left")

        def ended() -> list[Lifecycle]:
            return [show(state_store, app, s).status for s in ("Errand-s1", "Chore-s1")]

        assert service.wait_until(lambda: ended() == [Lifecycle.CANCELLED] * 2, WAIT)
        clock.advance(120)
        # Both timers come due after their instances ended: neither fires.
        assert service.wait_until(lambda: timer.dropped == 2, WAIT)
        assert service.wait_idle(WAIT)
        assert service.errors == []
        assert timer.fired == 0
        with pytest.raises(OperationError, match="no events"):
            app.cancel(state_store, errand, "never-started", reason="x")
    # The outbox: no inputs, and the compensation before the end.
    assert types(state_store, "Errand-s1") == ["Began", "Scheduled:lctest.Due", "Cancelled"]
    assert types(state_store, "Chore-s1") == [
        "Began",
        "Scheduled:lctest.ChoreDue",
        "Published:lctest.Compensated",
        "Cancelled",
    ]
    assert json.loads(state_store.read_stream("Errand-s1")[-1].data) == {"reason": "not needed"}
    assert sum(counts(state_store, "timer-").values()) == 0
    began = state_store.read_stream("Errand-s1")[0]
    assert app.codec.decode_metadata(began.metadata).workflow_version == errand.version


CANCEL_APP = cancel_app("states-cancel-cli")
"""The state-stored errand and chore, as ``decider cancel --app`` and ``decider show`` load it."""


def test_decider_cancel_and_show_a_state_stored_instance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "events.db"
    at = ["--app", f"{__name__}:CANCEL_APP", "--store", f"sqlite:///{path}"]
    store = SqliteEventStore(path)
    try:
        CANCEL_APP.publish(store, Start(errand_id="s2"), "lc-inputs")
        with Service(CANCEL_APP, store, clock=FakeClock()) as service:
            assert service.wait_until(lambda: types(store, "Errand-s2")[:1] == ["Began"], WAIT)
            assert main(["cancel", "Errand-s2", "--reason", "by hand", *at]) == 0
            assert service.wait_until(
                lambda: show(store, CANCEL_APP, "Errand-s2").status is Lifecycle.CANCELLED, WAIT
            )
            assert service.wait_idle(WAIT)
    finally:
        store.close()
    capsys.readouterr()
    assert main(["show", "Errand-s2", *at]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("Errand-s2  (workflow Errand, cancelled")
    assert "Cancelled" in out and "by hand" in out


def test_a_state_commit_under_a_lost_lease_writes_nothing(state_store: EventStore) -> None:
    assert isinstance(state_store, StateStore) and isinstance(state_store, LeaseStore)
    held = state_store.claim_lease("state-p0", "first", 0.05)
    kept = state_store.claim_lease("state-p1", "first", 60)
    assert held is not None and kept is not None
    wait_until(lambda: state_store.claim_lease("state-p0", "second", 60) is not None, 10)
    outbox = [StreamAppend("outbox-f", [NewEvent(uuid.uuid4(), "Began", b"{}")], NO_STREAM)]
    with pytest.raises(LeaseLost) as lost:
        state_store.commit_states(
            [StateWrite("f", 0, 1, b"one")], outbox, checkpoints=[("p0", 1)], leases=[kept, held]
        )
    assert lost.value.lease == held
    assert state_store.load_state("f") is None
    assert state_store.read_stream("outbox-f") == []
    assert state_store.load_checkpoint("p0") is None  # type: ignore[attr-defined]
    # Several partitions' checkpoints in one commit, under the leases still held.
    state_store.commit_states(
        [StateWrite("f", 0, 1, b"one")], outbox, checkpoints=[("p1", 3), ("p2", 4)], leases=[kept]
    )
    assert state_store.load_state("f") is not None
    assert [state_store.load_checkpoint(n) for n in ("p1", "p2")] == [3, 4]  # type: ignore[attr-defined]
