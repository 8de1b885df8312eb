"""The traffic-fine sample through the processors, on every store."""

from __future__ import annotations

import collections
import threading
from typing import Any

from decider import Lifecycle, Received
from decider.processors import Service, show, status
from decider.processors.workflows.processor import WorkflowProcessor
from decider.stores.memory import MemoryEventStore
from decider.stores.protocol import EventStore, TransactionalStore
from samples.traffic_fine.app import ISSUED_STREAM, REPORTS_STREAM, make_app
from samples.traffic_fine.messages import (
    IssueTrafficFine,
    ParkingViolation,
    PoliceReportPublished,
    SpeedingViolation,
)
from samples.traffic_fine.workflow import workflow
from tests.support.apps import FINE_PARKING as PARKING_HISTORY
from tests.support.apps import FINE_SPEEDING as SPEEDING_HISTORY
from tests.support.stores import counts, events, types


def report(i: int) -> PoliceReportPublished:
    offense: Any = (
        ParkingViolation(location=f"street {i}")
        if i % 5 == 0
        else SpeedingViolation(maximum_speed="50", measured_speed=str(60 + i))
    )
    return PoliceReportPublished(police_report_id=f"r{i}", offense=offense)


def speeding(n: int) -> int:
    return sum(1 for i in range(n) if i % 5)


def all_completed(store: EventStore, app: Any, n: int) -> bool:
    done = [s for s in status(store, app) if s.status is Lifecycle.COMPLETED]
    return len(done) == n


def check_exactly_once(store: EventStore, n: int) -> None:
    """Every instance, result and issued fine written once; no event id twice."""
    per_stream = counts(store)
    for i in range(n):
        expected = PARKING_HISTORY if i % 5 == 0 else SPEEDING_HISTORY
        assert types(store, workflow.stream(f"r{i}")) == expected
    results = {s: c for s, c in per_stream.items() if s.startswith("generate_")}
    assert len(results) == 2 * speeding(n)
    assert set(results.values()) == {1}
    assert per_stream[ISSUED_STREAM] == speeding(n)
    ids = [e.id for e in events(store)]
    assert len(ids) == len(set(ids))


def test_every_workflow_completes_with_the_right_history(store: EventStore, app_name: str) -> None:
    app = make_app(app_name)
    n = 30
    ids = app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
    assert len(set(ids)) == n
    with Service(app, store) as service:
        assert service.wait_until(lambda: all_completed(store, app, n), 30)
        assert service.wait_idle(30)
        assert service.errors == []
    check_exactly_once(store, n)
    issued = [app.codec.decode_message(e.type, e.data) for e in store.read_stream(ISSUED_STREAM)]
    assert {f.police_report_id for f in issued} == {f"r{i}" for i in range(n) if i % 5}
    assert all(isinstance(f, IssueTrafficFine) for f in issued)
    view = show(store, app, workflow.stream("r1"))
    assert view.status is Lifecycle.COMPLETED
    assert [h.type for h in view.history] == SPEEDING_HISTORY
    # The issued fine carries the number and code the handlers generated for this instance.
    numbered, coded = view.history[3].event, view.history[5].event
    assert isinstance(numbered, Received) and isinstance(coded, Received)
    number, code = numbered.message.number, coded.message.code
    fine = next(f for f in issued if f.police_report_id == "r1")
    assert (fine.system_number, fine.manual_identification_code) == (number, code)


def test_an_input_published_twice_is_handled_once(store: EventStore, app_name: str) -> None:
    app = make_app(app_name)
    first = app.publish(store, report(1), REPORTS_STREAM)
    again = app.publish(store, report(1), REPORTS_STREAM, message_id=first)
    elsewhere = app.publish(store, report(1), "other-reports", message_id=first)
    assert first == again == elsewhere
    with Service(app, store) as service:
        assert service.wait_until(lambda: all_completed(store, app, 1), 30)
        assert service.wait_idle(30)
    assert counts(store)[REPORTS_STREAM] == 1  # the store recognised the same event
    assert types(store, workflow.stream("r1")) == SPEEDING_HISTORY  # the processor deduplicated


def test_a_restart_mid_run_and_a_full_redelivery_write_everything_once(
    store: EventStore, app_name: str
) -> None:
    calls: collections.Counter[str] = collections.Counter()
    gate, blocked = threading.Event(), threading.Event()
    app = make_app(app_name)
    for registration in app.handlers.values():
        original = registration.func

        def counting(command: Any, command_id: str, original: Any = original) -> Any:
            calls[command_id] += 1
            if sum(calls.values()) == 12:  # hold the run here until the test stops it
                blocked.set()
                gate.wait(10)
            return original(command, command_id)

        object.__setattr__(registration, "func", counting)
    n = 40
    for i in range(n):
        app.publish(store, report(i), REPORTS_STREAM)
    service = Service(app, store, batch_size=7)
    service.start()
    assert blocked.wait(30)
    stopping = threading.Thread(target=service.stop)
    stopping.start()
    assert service.wait_until(service._stop.is_set, 5)
    gate.set()
    stopping.join(30)
    assert not service.running
    assert not all_completed(store, app, n)  # stopped mid-run
    with Service(app, store, batch_size=7) as again:
        assert again.wait_until(lambda: all_completed(store, app, n), 30)
        assert again.wait_idle(30)
    check_exactly_once(store, n)
    # Now every processor forgets where it was: each input and command is delivered again.
    before_first = events(store)[0].position - 1
    names = [f"{app_name}.workflow.{workflow.name}", f"{app_name}.commands", f"{app_name}.timers"]
    for name in names:
        store.save_checkpoint(name, before_first)  # type: ignore[attr-defined]
    handled_before = sum(calls.values())
    with Service(app, store) as third:
        assert third.wait_idle(30)
        assert third.errors == []
    # Delivered again. Without transactions a stored outcome is recognised: no handler runs.
    # With them, a handler may run again (unless the command processor's concluded mark
    # covers the command) ...
    if not isinstance(store, TransactionalStore):
        assert sum(calls.values()) == handled_before
    check_exactly_once(store, n)  # ... but everything has one effect


def test_group_commit_is_used_on_transactional_stores(store: EventStore, app_name: str) -> None:
    app = make_app(app_name)
    batches: list[int] = []
    if isinstance(store, TransactionalStore):
        original = store.append_batch

        def spy(appends: Any, **fences: Any) -> Any:
            batches.append(len(appends))
            return original(appends, **fences)

        store.append_batch = spy  # type: ignore[method-assign]
    n = 25
    for i in range(n):
        app.publish(store, report(i), REPORTS_STREAM)
    with Service(app, store) as service:
        assert service.wait_until(lambda: all_completed(store, app, n), 30)
        assert service.wait_idle(30)
        processor = service.processor(f"workflow.{workflow.name}")
        assert isinstance(processor, WorkflowProcessor)
        if isinstance(store, TransactionalStore):
            assert processor.group_commits >= 1
            assert max(batches) >= 10  # many instances' appends in one transaction
        else:
            assert processor.group_commits == 0
    check_exactly_once(store, n)


def test_a_tiny_cache_evicts_and_reloads_without_changing_the_outcome(app_name: str) -> None:
    store = MemoryEventStore()
    app = make_app(app_name)
    n = 20
    app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
    with Service(app, store, cache_size=2, batch_size=3) as service:
        assert service.wait_until(lambda: all_completed(store, app, n), 30)
        assert service.wait_idle(30)
        processor = service.processor(f"workflow.{workflow.name}")
        assert isinstance(processor, WorkflowProcessor)
        assert len(processor.cache) <= 2
        assert processor.cache.misses > n  # evicted instances were folded again
    check_exactly_once(store, n)
