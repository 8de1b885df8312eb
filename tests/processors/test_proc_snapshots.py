"""Snapshots: a cold instance is restored from its latest snapshot and the events after it.

On memory, SQLite and PostgreSQL (the stores that are a ``SnapshotStore``); the EventStoreDB
adapter keeps none, and its instances fold their streams as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decider import StateCodec, Workflow, advance, start
from decider.processors import App, Signal, SystemClock, show
from decider.processors.engine.base import Context
from decider.processors.workflows import processor as workflow_processor
from decider.processors.workflows.cache import HandledIds
from decider.processors.workflows.processor import WorkflowProcessor
from decider.stores import EventStore, Snapshot, SnapshotStore
from decider.stores.memory import MemoryEventStore
from tests.support.apps import Added, Closed, tally, tally_route
from tests.support.stores import open_store

INPUTS = "tallies"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def snap_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    """A fresh store of each kind that keeps snapshots."""
    opened, cleanups = open_store(request.param, tmp_path)
    try:
        yield opened
    finally:
        for cleanup in cleanups:
            cleanup()


def snapshot_app(every: int, state_version: str = "1") -> tuple[App, Workflow[Any, int, Any]]:
    workflow = attrs.evolve(tally, snapshot_every=every, state_version=state_version)
    app = App("snaps")
    app.workflow(workflow, inputs={Added: tally_route, Closed: tally_route})
    return app, workflow


def processor(app: App, store: EventStore) -> WorkflowProcessor:
    """A new processor: an empty cache, as after a process start."""
    context = Context(app, store, store, SystemClock(), Signal(), lambda: None)  # type: ignore[arg-type]
    return WorkflowProcessor(context, app.workflows["Tally"])


def feed(app: App, store: EventStore, proc: WorkflowProcessor, message: object, **kw: Any) -> None:
    """Publish ``message`` and have ``proc`` handle it (one batch of one input)."""
    app.publish(store, message, INPUTS, **kw)
    proc.process([store.read_stream(INPUTS)[-1]])


def test_every_snapshot_store_keeps_the_latest_of_a_stream(snap_store: EventStore) -> None:
    assert isinstance(snap_store, SnapshotStore)
    assert snap_store.load_snapshot("Tally-a") is None
    snap_store.save_snapshot("Tally-a", Snapshot(9, "1", b"nine"))
    snap_store.save_snapshot("Tally-a", Snapshot(4, "1", b"four"))  # late: kept out
    assert snap_store.load_snapshot("Tally-a") == Snapshot(9, "1", b"nine")
    snap_store.save_snapshot("Tally-a", Snapshot(4, "2", b"new shape"))  # new code: replaces
    assert snap_store.load_snapshot("Tally-a") == Snapshot(4, "2", b"new shape")
    snap_store.save_snapshot("Tally-a", Snapshot(19, "2", b"later"))
    assert snap_store.load_snapshot("Tally-a") == Snapshot(19, "2", b"later")
    assert snap_store.load_snapshot("Tally-b") is None


def test_a_cold_instance_is_restored_from_its_snapshot_and_tail(snap_store: EventStore) -> None:
    app, workflow = snapshot_app(every=4)
    warm = processor(app, snap_store)
    for amount in range(1, 7):
        feed(app, snap_store, warm, Added(tally_id="t", amount=amount))
    assert warm.snapshots.written == 1  # at 4 events
    assert isinstance(snap_store, SnapshotStore)
    stored = snap_store.load_snapshot(workflow.stream("t"))
    assert stored is not None and stored.revision == 3
    cold = processor(app, snap_store)
    feed(app, snap_store, cold, Added(tally_id="t", amount=100))
    assert cold.snapshots.restored == 1
    assert cold.cache.get(workflow.stream("t")).instance.state == 121  # type: ignore[union-attr]
    assert show(snap_store, app, workflow.stream("t")).state == 121


def test_an_input_handled_before_the_snapshot_is_still_deduplicated(
    snap_store: EventStore,
) -> None:
    app, workflow = snapshot_app(every=3)
    warm = processor(app, snap_store)
    feed(app, snap_store, warm, Added(tally_id="t", amount=1), message_id="msg_first")
    feed(app, snap_store, warm, Added(tally_id="t", amount=2), message_id="msg_second")
    assert warm.snapshots.written == 1
    stream = workflow.stream("t")
    # Began, InitiatedBy, Received: the snapshot holds the whole stream.
    assert len(snap_store.read_stream(stream)) == 3
    cold = processor(app, snap_store)
    # The same message ids again, published to another input stream: the snapshot keeps no
    # ids, so only a lookup in the store can tell that they were handled.
    for message_id in ("msg_first", "msg_second"):
        app.publish(snap_store, Added(tally_id="t", amount=50), "other", message_id=message_id)
    cold.process(snap_store.read_stream("other"))
    assert cold.snapshots.restored == 1
    assert len(snap_store.read_stream(stream)) == 3
    assert show(snap_store, app, stream).state == 3


def test_a_restored_instance_recognises_a_duplicate_older_than_its_snapshot(
    snap_store: EventStore,
) -> None:
    app, workflow = snapshot_app(every=4)
    stream = workflow.stream("t")
    warm = processor(app, snap_store)
    for index in range(1, 7):
        feed(app, snap_store, warm, Added(tally_id="t", amount=index), message_id=f"msg_{index}")
    assert isinstance(snap_store, SnapshotStore)
    stored = snap_store.load_snapshot(stream)
    assert stored is not None and stored.revision == 3  # inputs 1-3 before it, 4-6 after
    assert b"msg_" not in stored.data  # the snapshot holds the state, not the handled ids
    before = len(snap_store.read_stream(stream))
    # A process restart, then redeliveries (under new positions, as a republish would be)
    # of an input older than the snapshot and of one after it, between two new inputs.
    cold = processor(app, snap_store)
    for message_id, amount in [("msg_7", 7), ("msg_2", 50), ("msg_5", 50), ("msg_8", 8)]:
        app.publish(snap_store, Added(tally_id="t", amount=amount), "again", message_id=message_id)
    cold.process(snap_store.read_stream("again"))
    assert cold.snapshots.restored == 1
    assert cold.handled == 2
    assert cold.inputs.looked_up >= 1  # msg_2 is older than the ids the restore gave
    assert len(snap_store.read_stream(stream)) == before + 2
    assert show(snap_store, app, stream).state == sum(range(1, 9))


def test_an_instance_keeps_only_its_recent_ids_and_looks_older_ones_up(
    snap_store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workflow_processor, "RECENT_IDS", 2)
    app, workflow = snapshot_app(every=1_000)  # no snapshot is due: folded from the stream
    stream = workflow.stream("t")
    proc = processor(app, snap_store)
    for index in range(1, 5):
        feed(app, snap_store, proc, Added(tally_id="t", amount=index), message_id=f"msg_{index}")
    entry = proc.cache.get(stream)
    assert entry is not None and len(entry.handled) == 2 and not entry.handled.complete
    for message_id in ("msg_1", "msg_4"):  # evicted from memory, and still in it
        app.publish(snap_store, Added(tally_id="t", amount=50), "again", message_id=message_id)
    cold = processor(app, snap_store)  # folds all 4 inputs, keeps 2 ids
    cold.process(snap_store.read_stream("again"))
    proc.process(snap_store.read_stream("again"))
    assert (cold.handled, proc.handled) == (0, 4)
    # Only msg_1 is looked up by each (and, before it, proc's fresh msg_4: its ids were no
    # longer complete once msg_1 was evicted); msg_4 is among the recent ids.
    assert (cold.inputs.looked_up, proc.inputs.looked_up) == (1, 2)
    assert show(snap_store, app, stream).state == 10


@pytest.mark.parametrize("bad", ["garbage", "old version", "wrong revision"])
def test_a_snapshot_that_does_not_fit_is_ignored_and_rebuilt(
    snap_store: EventStore, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    app, workflow = snapshot_app(every=3, state_version="2")
    warm = processor(app, snap_store)
    for amount in (1, 2, 3, 4):
        feed(app, snap_store, warm, Added(tally_id="t", amount=amount))
    stream = workflow.stream("t")
    assert isinstance(snap_store, SnapshotStore)
    good = snap_store.load_snapshot(stream)
    assert good is not None and good.revision == 2
    old = attrs.evolve(workflow, state_version="1")
    spoilt = {
        "garbage": Snapshot(3, "2", b'{"not": "a snapshot'),
        "old version": Snapshot(3, "1", StateCodec(old).encode(start(old))),
        # Decodes, but claims another revision than the number of events it holds.
        "wrong revision": Snapshot(3, "2", good.data),
    }[bad]
    snap_store.save_snapshot(stream, spoilt)
    cold = processor(app, snap_store)
    with caplog.at_level(logging.WARNING, logger="decider"):
        feed(app, snap_store, cold, Added(tally_id="t", amount=10))
    assert cold.snapshots.ignored == 1 and cold.snapshots.restored == 0
    assert "ignoring the snapshot of Tally-t" in caplog.text
    assert show(snap_store, app, stream).state == 20
    # Folded from the stream, so rebuilt at once: the next cold load restores it.
    assert cold.snapshots.written == 1
    again = processor(app, snap_store)
    feed(app, snap_store, again, Closed(tally_id="t"))
    assert again.snapshots.restored == 1
    assert show(snap_store, app, stream).status.value == "completed"


def test_a_long_stream_from_before_snapshots_gets_one_on_its_first_load(
    snap_store: EventStore,
) -> None:
    app, workflow = snapshot_app(every=5)
    plain_app = App("snaps")
    plain_app.workflow(tally, inputs={Added: tally_route, Closed: tally_route})
    plain = processor(plain_app, snap_store)
    for amount in range(7):
        feed(plain_app, snap_store, plain, Added(tally_id="t", amount=amount))
    assert plain.snapshots.enabled is False
    cold = processor(app, snap_store)
    feed(app, snap_store, cold, Added(tally_id="t", amount=1))
    assert cold.snapshots.written == 1
    assert isinstance(snap_store, SnapshotStore)
    assert snap_store.load_snapshot(workflow.stream("t")) is not None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    amounts=st.lists(st.integers(0, 50), min_size=1, max_size=25),
    every=st.integers(1, 6),
    restarts=st.sets(st.integers(0, 24)),
)
def test_snapshot_and_tail_fold_to_the_full_fold(
    amounts: list[int], every: int, restarts: set[int]
) -> None:
    store = MemoryEventStore()
    app, workflow = snapshot_app(every=every)
    stream = workflow.stream("t")
    proc = processor(app, store)
    for index, amount in enumerate(amounts):
        if index in restarts:
            proc = processor(app, store)  # a process restart: cold from the snapshot
        feed(app, store, proc, Added(tally_id="t", amount=amount))
        snapshot = store.load_snapshot(stream)
        if snapshot is None:
            continue
        restored = StateCodec(workflow, app.codec).decode(snapshot.data)
        records = store.read_stream(stream)
        tail = [app.codec.decode_event(r.type, r.data) for r in records[snapshot.revision + 1 :]]
        full = [app.codec.decode_event(r.type, r.data) for r in records]
        assert advance(workflow, restored.instance, tail) == advance(
            workflow, start(workflow), full
        )
        # The state only: handled inputs are looked up in the store, not carried along.
        assert restored.handled == frozenset()
    assert show(store, app, stream).state == sum(amounts)


@settings(max_examples=300, deadline=None)
@given(
    limit=st.none() | st.integers(0, 5),
    batches=st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=8), max_size=6),
)
def test_handled_ids_keep_the_most_recent_and_know_when_they_are_complete(
    limit: int | None, batches: list[list[str]]
) -> None:
    ids = HandledIds(limit=limit)
    window: list[str] = []
    handled: set[str] = set()
    for batch in batches:
        # One id in a set: a workflow processor's batch with one input of the instance.
        ids.update(set(batch) if len(set(batch)) == 1 else batch)
        handled.update(batch)
        for message_id in batch:  # the model: least recently handled first
            if message_id in window:
                window.remove(message_id)
            window.append(message_id)
            if limit is not None and len(window) > limit:
                window.pop(0)
        assert list(ids) == window
        # Complete exactly when every handled id is still known: then absence means "new".
        assert ids.complete == (set(ids) == handled)
        copied = ids.copy()
        assert (list(copied), copied.complete) == (window, ids.complete)
