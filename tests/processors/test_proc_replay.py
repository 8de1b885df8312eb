"""Exactly-once outcomes across a crash, and one retry request per park.

A crash between writing a command's outcome and storing the checkpoint (EventStoreDB, which
has no transactions, is the store where this window exists) is simulated on every store by
:class:`NonAtomic`: it hides ``append_batch``, so the processors take the non-transactional
path, and it drops the command processor's checkpoints, as if each run crashed before them.
On a transactional store, a commit that meets an existing result stream must stay one
transaction with its checkpoint. ``retry_parked`` is raced by a store whose ledger append lets
another park and another retry of the same command happen between the read and the write.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from decider import Metadata, event_id
from decider.processors import (
    App,
    CommandParked,
    NotParked,
    ParkedCommandRetried,
    Service,
    list_parked,
    retry_parked,
)
from decider.stores.errors import StoreUnavailable
from decider.stores.protocol import (
    ALL,
    ANY,
    NO_STREAM,
    CheckpointStore,
    EventStore,
    ExpectedRevision,
    Filter,
    NewEvent,
    RecordedEvent,
    Subscription,
    TransactionalStore,
)
from tests.processors.test_proc_commands import FAST, completed
from tests.support.apps import DoWork, JobRequested, WorkDone, job, job_app
from tests.support.stores import counts


class NonAtomic:
    """A store without transactions whose checkpoints named in ``dropped`` are never stored."""

    def __init__(self, inner: EventStore, dropped: str) -> None:
        self.inner = inner
        self.dropped = dropped
        assert isinstance(inner, CheckpointStore)
        self.checkpoints: CheckpointStore = inner

    def append(self, stream: str, events: Sequence[NewEvent], expected: ExpectedRevision) -> Any:
        return self.inner.append(stream, events, expected)

    def read_stream(
        self, stream: str, from_revision: int = 0, limit: int | None = None
    ) -> list[RecordedEvent]:
        return self.inner.read_stream(stream, from_revision, limit)

    def read_all(
        self, after_position: int | None = None, limit: int | None = None, filter: Filter = ALL
    ) -> list[RecordedEvent]:
        return self.inner.read_all(after_position, limit, filter)

    def subscribe(self, after_position: int | None = None, filter: Filter = ALL) -> Subscription:
        return self.inner.subscribe(after_position, filter)

    def close(self) -> None:
        """The fixture closes the inner store."""

    def load_checkpoint(self, name: str) -> int | None:
        return self.checkpoints.load_checkpoint(name)

    def save_checkpoint(self, name: str, position: int) -> None:
        if name != self.dropped:
            self.checkpoints.save_checkpoint(name, position)


def set_handler(app: App, func: Any) -> None:
    object.__setattr__(app.handlers["ptest.DoWork"], "func", func)


def fail(command: DoWork, command_id: str) -> list[object]:
    raise RuntimeError(f"cannot do {command.job_id} now")


def succeed(command: DoWork, command_id: str) -> list[object]:
    return [WorkDone(job_id=command.job_id)]


def recording(seen: list[str], handler: Callable[[DoWork, str], list[object]]) -> Any:
    """``handler``, noting in ``seen`` the command ids it is asked to carry out."""

    def record(command: DoWork, command_id: str) -> list[object]:
        seen.append(command_id)
        return handler(command, command_id)

    return record


def test_stored_results_are_not_undone_by_a_replay_that_fails(
    store: EventStore, app_name: str
) -> None:
    crashing = NonAtomic(store, f"{app_name}.commands")
    assert not isinstance(crashing, TransactionalStore)
    app, calls = job_app(app_name, retry=FAST)
    app.publish(store, JobRequested(job_id="j", action="ok"), "jobs")
    with Service(app, crashing) as service:
        assert service.wait_until(lambda: completed(store, app, "j"), 30)
        assert service.wait_idle(30)
    assert calls["j"] == 1 and store.load_checkpoint(f"{app_name}.commands") is None  # type: ignore[attr-defined]
    # The next run sees the command again; its handler would now fail every attempt.
    replayed: list[str] = []
    set_handler(app, recording(replayed, fail))
    with Service(app, crashing) as service:
        assert service.wait_idle(30)
        assert service.errors == []
    assert replayed == []
    assert list_parked(store, app) == []
    found = counts(store)
    assert sum(1 for s in found if s.startswith("do_work-")) == 1
    assert not any(s.startswith("decider-failed-") for s in found)


def test_a_stored_park_is_not_undone_by_a_replay_that_succeeds(
    store: EventStore, app_name: str
) -> None:
    crashing = NonAtomic(store, f"{app_name}.commands")
    app, calls = job_app(app_name, retry=FAST)
    app.publish(store, JobRequested(job_id="j", action="fail"), "jobs")
    with Service(app, crashing) as service:
        assert service.wait_until(lambda: completed(store, app, "j"), 30)
        assert service.wait_idle(30)
    assert calls["j"] == FAST.max_attempts and len(list_parked(store, app)) == 1
    replayed: list[str] = []
    set_handler(app, recording(replayed, succeed))
    with Service(app, crashing) as service:
        assert service.wait_idle(30)
        assert service.errors == []
    assert replayed == []
    (parked,) = list_parked(store, app)
    found = counts(store)
    assert not any(s.startswith("do_work-") for s in found)
    assert found[f"decider-failed-Job-{parked.command_id}"] == 1
    # A retry is a new round: carried out again, and once more not undone by a replay.
    set_handler(app, recording(replayed, succeed))
    retry_parked(store, app, parked.command_id, force=True)
    with Service(app, crashing) as service:
        assert service.wait_until(lambda: list_parked(store, app) == [], 30)
        assert service.wait_idle(30)
    assert replayed == [parked.command_id]
    set_handler(app, fail)
    with Service(app, crashing) as service:
        assert service.wait_idle(30)
    assert list_parked(store, app) == []
    assert counts(store)[f"decider-failed-Job-{parked.command_id}"] == 1


def park(store: EventStore, app: App, command_id: str, round_key: str = "") -> None:
    """Record in the ledger that ``command_id`` was parked (as the command processor does)."""
    ledger = f"decider-parked-{app.name}"
    message = CommandParked(
        command_id=command_id,
        command_type="ptest.DoWork",
        stream=job.stream(command_id),
        revision=1,
        reason="broken",
        attempts=1,
    )
    new_id = event_id(ledger, f"{command_id}/{round_key}", 0)
    type_name, data = app.codec.encode_message(message)
    metadata = app.codec.encode_metadata(Metadata(message_id=str(new_id)))
    store.append(ledger, [NewEvent(new_id, type_name, data, metadata)], ANY)


class Interleaving:
    """A store whose first ledger append lets another park and another retry happen first."""

    def __init__(self, inner: EventStore, app: App, command_id: str) -> None:
        self.inner = inner
        self.app = app
        self.command_id = command_id
        self.interleaved: str | None = None

    def append(self, stream: str, events: Sequence[NewEvent], expected: ExpectedRevision) -> Any:
        if self.interleaved is None:
            self.interleaved = ""
            park(self.inner, self.app, "another")  # the ledger grows between read and write
            self.interleaved = retry_parked(self.inner, self.app, self.command_id)
        return self.inner.append(stream, events, expected)

    def read_stream(
        self, stream: str, from_revision: int = 0, limit: int | None = None
    ) -> list[RecordedEvent]:
        return self.inner.read_stream(stream, from_revision, limit)


def test_a_command_already_requeued_is_not_requeued_again(store: EventStore, app_name: str) -> None:
    app, _ = job_app(app_name)
    park(store, app, "c1")
    racing = Interleaving(store, app, "c1")
    try:
        retry_parked(racing, app, "c1")  # type: ignore[arg-type]
    except NotParked as exc:
        assert "c1" in str(exc)
    else:
        raise AssertionError("a second retry of one park must not be queued")
    assert racing.interleaved
    ledger = store.read_stream(f"decider-parked-{app_name}")
    retries = [e for e in ledger if e.type == "decider.ParkedCommandRetried"]
    assert [str(e.id) for e in retries] == [racing.interleaved]
    request = app.codec.decode_message(retries[0].type, retries[0].data)
    assert isinstance(request, ParkedCommandRetried) and request.command_id == "c1"
    # In sequence too; and once parked again, it can be retried again.
    try:
        retry_parked(store, app, "c1")
    except NotParked:
        pass
    else:
        raise AssertionError("a command already re-queued is not parked")
    assert [c.command_id for c in list_parked(store, app)] == ["another"]
    park(store, app, "c1", round_key=racing.interleaved)
    again = retry_parked(store, app, "c1")
    assert again != racing.interleaved
    assert [c.command_id for c in list_parked(store, app)] == ["another"]


def test_a_conflict_keeps_outcomes_and_checkpoint_in_one_transaction(
    store: EventStore, app_name: str
) -> None:
    if not isinstance(store, TransactionalStore):
        pytest.skip("no transactions: the replay tests above cover this store")
    app, _ = job_app(app_name, retry=FAST)
    calls: dict[str, int] = {}

    def flipping(command: DoWork, command_id: str) -> list[object]:
        calls[command.job_id] = calls.get(command.job_id, 0) + 1
        if command.job_id == "a" and calls["a"] == 1:
            # An earlier run stored other results: this batch's commit meets a conflict.
            other = NewEvent(event_id("elsewhere", command_id, 0), "ptest.WorkDone", b"{}", b"")
            store.append(f"do_work-{command_id}", [other], NO_STREAM)
        if command.job_id == "b" and calls["b"] > 1:
            raise RuntimeError("b would fail if asked again")
        return [WorkDone(job_id=command.job_id)]

    set_handler(app, flipping)
    crashes: list[str] = []
    save = store.save_checkpoint  # type: ignore[attr-defined]

    def crash_once(name: str, position: int) -> None:
        if name == f"{app_name}.commands" and not crashes:
            crashes.append(name)
            raise StoreUnavailable("the process died before the checkpoint")
        save(name, position)

    store.save_checkpoint = crash_once  # type: ignore[attr-defined]
    app.publish_many(store, [JobRequested(job_id=j, action="ok") for j in "ab"], "jobs")
    with Service(app, store) as service:
        assert service.wait_until(lambda: completed(store, app, "b"), 30)
        assert service.wait_idle(30)
    assert calls["b"] == 1
    assert list_parked(store, app) == []
    assert not any(s.startswith("decider-failed-") for s in counts(store))
