"""The engine: conflicts, permanent rejections, user code that exits, names no store can hold,
bounded error lists, and a processor thread that ends."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from decider import Metadata, Workflow, event_id
from decider.processors import (
    App,
    ConflictsExhausted,
    RetryPolicy,
    Service,
    SystemClock,
    list_parked,
    status,
)
from decider.processors.app.errors import ProcessorDied
from decider.processors.app.messages import InputSkipped
from decider.processors.engine.base import Context
from decider.processors.engine.clock import Signal
from decider.processors.engine.committing import Backoff
from decider.processors.engine.failures import ErrorLog
from decider.processors.workflows.processor import WorkflowProcessor
from decider.stores.errors import (
    PermanentStoreError,
    StoreUnavailable,
    StreamDeleted,
    WrongExpectedVersion,
)
from decider.stores.memory import MemoryEventStore
from decider.stores.protocol import ANY, EventStore, NewEvent, StreamAppend
from tests.support.apps import (
    Added,
    DoWork,
    JobRequested,
    job_app,
    tally,
    tally_app,
    tally_decide,
    tally_route,
)
from tests.support.stores import open_store

FAST = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.001)


class Rejecting:
    """A store that fails appends to the streams ``fails(stream)`` picks with ``error(stream)``."""

    def __init__(
        self, inner: EventStore, fails: Callable[[str], bool], error: Callable[[str], Exception]
    ) -> None:
        self.inner = inner
        self.fails = fails
        self.error = error

    def append(self, stream: str, events: Sequence[NewEvent], expected: Any) -> Any:
        if self.fails(stream):
            raise self.error(stream)
        return self.inner.append(stream, events, expected)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != "append_batch":
            return attr

        def append_batch(appends: Sequence[StreamAppend], **fences: Any) -> Any:
            for item in appends:
                if self.fails(item.stream):
                    raise self.error(item.stream)
            return attr(appends, **fences)

        return append_batch


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    opened, cleanups = open_store(request.param, tmp_path)
    try:
        yield opened
    finally:
        for cleanup in cleanups:
            cleanup()


def skipped(store: EventStore, processor: str) -> list[InputSkipped]:
    codec = App("x").codec
    return [
        codec.decode_message(e.type, e.data)
        for e in store.read_stream(f"decider-skipped-{processor}")
    ]


def _raw_input(store: EventStore, app: App, data: bytes, index: int) -> None:
    """An ``Added`` input stored with ``data`` as its JSON (no codec in the way)."""
    message_id = f"raw{index}"
    metadata = app.codec.encode_metadata(Metadata(message_id=message_id))
    new = NewEvent(event_id("inputs", message_id, 0), "ptest.Added", data, metadata)
    store.append("inputs", [new], ANY)


# -- conflicts and permanent rejections --------------------------------------------------------


def test_conflicts_exhausted_names_the_instance_stream(store: EventStore) -> None:
    app = tally_app("conflicts")
    app.publish(store, Added(tally_id="t", amount=1), "inputs")

    def conflict(stream: str) -> Exception:
        return WrongExpectedVersion(stream, 0, 3)

    rejecting: Any = Rejecting(store, lambda s: s.startswith("Tally-"), conflict)
    context = Context(app, rejecting, rejecting, SystemClock(), Signal(), lambda: None)
    processor = WorkflowProcessor(context, app.workflows["Tally"])
    with pytest.raises(ConflictsExhausted) as caught:
        processor.process(store.read_all())
    assert caught.value.stream == "Tally-t"
    assert "'Tally-t'" in str(caught.value)
    assert processor.conflicts == 6  # the batch, then five tries of the one input


@pytest.mark.parametrize("permanent", [PermanentStoreError, StreamDeleted])
def test_a_permanent_store_rejection_skips_only_the_input_it_came_from(
    store: EventStore, permanent: type[Exception]
) -> None:
    app = tally_app("permanent")
    for tally_id in ("a", "reject", "b"):
        app.publish(store, Added(tally_id=tally_id, amount=1), "inputs")

    def rejected(stream: str) -> Exception:
        if permanent is StreamDeleted:
            return StreamDeleted(stream)
        return PermanentStoreError(f"the index cannot hold {stream!r}")

    rejecting: Any = Rejecting(store, lambda s: s == "Tally-reject", rejected)
    with Service(app, rejecting) as service:
        name = f"{app.name}.workflow.Tally"
        assert service.wait_until(lambda: len(skipped(store, name)) == 1, 30)
        assert service.wait_idle(30)
        assert service.errors == []
    (record,) = skipped(store, name)
    assert "the store rejected" in record.reason and "Tally-reject" in record.reason
    assert [len(store.read_stream(f"Tally-{t}")) for t in "ab"] == [2, 2]


# -- user code that exits ---------------------------------------------------------------------


def test_system_exit_in_decide_is_a_skip_and_no_thread_ends(store: EventStore) -> None:
    def exiting_decide(message: Any, total: int) -> Any:
        if isinstance(message, Added) and message.amount == 13:
            raise SystemExit(3)
        return tally_decide(message, total)

    app = App("exits")
    app.workflow(Workflow("Tally", 0, tally.evolve, exiting_decide), inputs={Added: tally_route})
    for tally_id, amount in (("a", 1), ("b", 13), ("c", 2)):
        app.publish(store, Added(tally_id=tally_id, amount=amount), "inputs")
    with Service(app, store) as service:
        name = f"{app.name}.workflow.Tally"
        assert service.wait_until(lambda: len(skipped(store, name)) == 1, 30)
        assert service.wait_idle(30)
        assert all(thread.is_alive() for thread in service._threads)
        assert service.errors == []
    (record,) = skipped(store, name)
    assert "SystemExit(3)" in record.reason
    assert [len(store.read_stream(f"Tally-{t}")) for t in "ac"] == [2, 2]


def test_system_exit_in_a_handler_is_a_failure_that_parks_the_command(store: EventStore) -> None:
    app, _ = job_app("handler-exits")
    app.handlers.clear()

    @app.handler(DoWork, retry=FAST)
    def do_work(command: DoWork, command_id: str) -> list[object]:
        raise SystemExit("handler quits")

    app.publish(store, JobRequested(job_id="j", action="x"), "jobs")
    with Service(app, store) as service:
        assert service.wait_until(lambda: len(list_parked(store, app)) == 1, 30)
        assert service.wait_idle(30)
        assert all(thread.is_alive() for thread in service._threads)
    (parked,) = list_parked(store, app)
    assert "SystemExit('handler quits')" in parked.reason and parked.attempts == 2


# -- names no store can hold ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_an_instance_id_no_store_can_hold_is_skipped_with_the_reason(
    kind: str, tmp_path: Path
) -> None:
    store, cleanups = open_store(kind, tmp_path)
    try:
        app = tally_app(f"names{kind}")
        bad = [
            (rb'{"tally_id": "PR-\ud800", "amount": 1}', "UTF-8"),
            (rb'{"tally_id": "PR-\u0000", "amount": 1}', "NUL"),
            (b'{"tally_id": "' + b"x" * 3000 + b'", "amount": 1}', "bytes long"),
            (b'{"tally_id": "PR-1~g2", "amount": 1}', "generation of a forked instance"),
        ]
        for index, (data, _) in enumerate(bad):
            _raw_input(store, app, data, index)
        app.publish(store, Added(tally_id="good", amount=5), "inputs")
        with Service(app, store) as service:
            assert service.wait_until(lambda: len(store.read_stream("Tally-good")) == 2, 30)
            assert service.wait_idle(30)
            assert service.errors == []
        records = skipped(store, f"{app.name}.workflow.Tally")
        assert [any(why in r.reason for r in records) for _, why in bad] == [True] * len(bad)
    finally:
        for cleanup in cleanups:
            cleanup()


# -- bounded errors, and a thread that ends ------------------------------------------------------


def test_the_error_log_keeps_the_last_errors_and_counts_the_rest() -> None:
    log = ErrorLog(keep=3)
    for index in range(10):
        log.append(RuntimeError(str(index)))
    assert [str(e) for e in log.recent()] == ["7", "8", "9"]
    assert (len(log), log.count) == (3, 10)


def test_a_processor_thread_that_ends_stops_the_service_with_an_error(
    store: EventStore, caplog: pytest.LogCaptureFixture
) -> None:
    armed = threading.Event()  # App.publish routes the input too: interrupt the processor only

    def interrupting(message: Added, metadata: Metadata) -> str:
        if armed.is_set():
            raise KeyboardInterrupt
        return message.tally_id

    app = App("dies")
    app.workflow(tally, inputs={Added: interrupting})
    app.publish(store, Added(tally_id="t", amount=1), "inputs")
    armed.set()
    service = Service(app, store)
    guard = threading.Timer(30, service.stop)  # never hang the suite
    guard.start()
    try:
        with caplog.at_level(logging.CRITICAL, logger="decider"), pytest.raises(ProcessorDied):
            service.run_forever()
    finally:
        guard.cancel()
    assert not service.running
    assert any("ended unexpectedly" in r.getMessage() for r in caplog.records)
    assert service.failure is not None and "dies.workflow.Tally" in str(service.failure)
    with contextlib.suppress(TimeoutError):
        service.stop()


def test_a_store_outage_at_commit_keeps_the_handler_results_instead_of_running_it_again() -> None:
    store = MemoryEventStore()
    app, calls = job_app("outage", retry=FAST)
    original, failures = store.append_batch, list[int]()

    def flaky(appends: Any, **fences: Any) -> Any:
        if len(failures) < 3 and any(a.stream.startswith("do_work-") for a in appends):
            failures.append(1)
            raise StoreUnavailable("read-only for a while")
        return original(appends, **fences)

    store.append_batch = flaky  # type: ignore[method-assign]
    app.publish(store, JobRequested(job_id="j", action="ok"), "jobs")
    with Service(app, store) as service:
        assert service.wait_until(
            lambda: any(s.status.value == "completed" for s in status(store, app)), 30
        )
        assert service.error_count == 3
    assert calls["j"] == 1  # the handler ran once; its results waited for the store


def test_an_instance_stream_nested_too_deeply_skips_its_input(store: EventStore) -> None:
    app = tally_app("deep")
    deep = b'{"tally_id": "t", "amount": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    metadata = app.codec.encode_metadata(Metadata(message_id="m0", causation_id="c0"))
    store.append(
        "Tally-t",
        [NewEvent(event_id("Tally-t", "c0", 0), "InitiatedBy:ptest.Added", deep, metadata)],
        ANY,
    )
    app.publish(store, Added(tally_id="t", amount=1), "inputs")
    app.publish(store, Added(tally_id="u", amount=1), "inputs")
    with Service(app, store) as service:
        name = f"{app.name}.workflow.Tally"
        assert service.wait_until(lambda: len(skipped(store, name)) == 1, 30)
        assert service.wait_idle(30)
        assert service.errors == []
    (record,) = skipped(store, name)
    assert "cannot be folded" in record.reason and "nested too deeply" in record.reason
    assert len(store.read_stream("Tally-u")) == 2


def test_one_back_off_doubles_to_five_seconds_and_a_stop_ends_its_wait() -> None:
    """The commit retry and the processor loop's resume wait by the same back-off."""
    waited: list[float] = []

    class Recording(Signal):
        def wait(self, timeout: float | None = None) -> bool:
            assert timeout is not None
            waited.append(timeout)
            return self.is_set()

    stop = Recording()
    backoff = Backoff(stop)
    assert [backoff.wait() for _ in range(8)] == [False] * 8
    assert waited == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    backoff.reset()
    stop.set()
    assert backoff.wait() is True
    assert waited[-1] == 0.1
