"""The workflow processor: chaining in a batch, stale caches, poison inputs."""

from __future__ import annotations

from typing import Any

from decider import Lifecycle, Metadata, Received, event_id
from decider.processors import App, InputSkipped, Service, show
from decider.processors.workflows.processor import WorkflowProcessor
from decider.stores.protocol import (
    ANY,
    NO_STREAM,
    EventStore,
    NewEvent,
    StreamAppend,
    TransactionalStore,
)
from tests.support.apps import Added, Closed, tally, tally_app
from tests.support.stores import types


def skipped(store: EventStore, app: App) -> list[Any]:
    stream = f"decider-skipped-{app.name}.workflow.Tally"
    return [app.codec.decode_message(e.type, e.data) for e in store.read_stream(stream)]


def test_inputs_for_one_instance_in_one_batch_chain(store: EventStore, app_name: str) -> None:
    app = tally_app(app_name)
    for amount in (1, 2, 3, 4):
        app.publish(store, Added(tally_id="t", amount=amount), "tallies")
    app.publish(store, Closed(tally_id="t"), "tallies")
    with Service(app, store) as service:
        assert service.wait_idle(30)
        processor = service.processor("workflow.Tally")
        assert isinstance(processor, WorkflowProcessor)
        assert processor.conflicts == 0
        # A completed instance leaves the cache; a late input is still recorded, as Ignored.
        assert tally.stream("t") not in processor.cache._entries
        app.publish(store, Added(tally_id="t", amount=5), "tallies")
        assert service.wait_until(lambda: len(store.read_stream(tally.stream("t"))) == 8, 30)
    view = show(store, app, tally.stream("t"))
    assert view.state == 10
    assert view.status is Lifecycle.COMPLETED
    assert [h.revision for h in view.history] == list(range(8))
    assert types(store, tally.stream("t"))[-3:] == [
        "Received:ptest.Closed",
        "Completed",
        "Ignored:ptest.Added",
    ]


def test_a_stale_cache_entry_is_reloaded_after_the_conflict(
    store: EventStore, app_name: str
) -> None:
    app = tally_app(app_name)
    with Service(app, store) as service:
        app.publish(store, Added(tally_id="t", amount=1), "tallies")
        assert service.wait_until(lambda: len(store.read_stream(tally.stream("t"))) == 2, 30)
        processor = service.processor("workflow.Tally")
        assert isinstance(processor, WorkflowProcessor)
        assert service.wait_until(lambda: tally.stream("t") in processor.cache._entries, 30)
        # Another writer (say a second service) records an input the processor never saw.
        other_id = "msg_other"
        stream = tally.stream("t")
        data = app.codec.encode_event(Received(Added(tally_id="t", amount=100)))
        metadata = app.codec.encode_metadata(
            Metadata(message_id="x", correlation_id="t", causation_id=other_id)
        )
        store.append(stream, [NewEvent(event_id(stream, other_id, 0), *data, metadata)], 1)
        app.publish(store, Added(tally_id="t", amount=10), "tallies")
        assert service.wait_until(lambda: len(store.read_stream(stream)) == 4, 30)
        assert service.wait_idle(30)
        assert processor.conflicts >= 1
        # The same message again, as the other writer handled it: skipped as a duplicate.
        app.publish(store, Added(tally_id="t", amount=100), "tallies", message_id=other_id)
        app.publish(store, Closed(tally_id="t"), "tallies")
        assert service.wait_until(lambda: show(store, app, stream).status.value == "completed", 30)
    assert show(store, app, stream).state == 111


def test_decide_raising_on_a_stale_state_decides_again_on_the_stored_one(
    store: EventStore, app_name: str
) -> None:
    app = tally_app(app_name)
    stream = tally.stream("t")
    with Service(app, store) as service:
        app.publish(store, Added(tally_id="t", amount=1), "tallies")
        processor = service.processor("workflow.Tally")
        assert isinstance(processor, WorkflowProcessor)
        assert service.wait_until(lambda: stream in processor.cache._entries, 30)
        # Another writer (a second service) adds 100, which the cached state (1) does not know.
        data = app.codec.encode_event(Received(Added(tally_id="t", amount=100)))
        metadata = app.codec.encode_metadata(
            Metadata(message_id="x", correlation_id="t", causation_id="msg_other")
        )
        store.append(stream, [NewEvent(event_id(stream, "msg_other", 0), *data, metadata)], 1)
        # Decide raises on the cached total (1 - 50 < 0), not on the stored one (101 - 50).
        app.publish(store, Added(tally_id="t", amount=-50), "tallies")
        assert service.wait_until(lambda: len(store.read_stream(stream)) == 4, 30)
        assert service.wait_idle(30)
    assert skipped(store, app) == []
    assert show(store, app, stream).state == 51


def test_poison_inputs_are_skipped_recorded_and_the_rest_goes_on(
    store: EventStore, app_name: str
) -> None:
    app = tally_app(app_name)
    app.publish(store, Added(tally_id="", amount=1), "tallies")  # route returns None
    app.publish(store, Added(tally_id="boom", amount=1), "tallies")  # route raises
    app.publish(store, Added(tally_id="t", amount=-1), "tallies")  # decide raises
    store.append("tallies", [NewEvent(event_id("x", "bad", 0), "ptest.Added", b"{nope")], ANY)
    bad_meta = NewEvent(
        event_id("x", "bad", 1), "ptest.Added", b'{"tally_id":"t","amount":5}', b"["
    )
    store.append("tallies", [bad_meta], ANY)
    app.publish(store, Added(tally_id="t", amount=7), "tallies")
    with Service(app, store) as service:
        assert service.wait_until(lambda: len(skipped(store, app)) == 5, 30)
        assert service.wait_idle(30)
        assert service.errors == []
    records = skipped(store, app)
    assert all(isinstance(r, InputSkipped) for r in records)
    reasons = [r.reason for r in records]
    assert "returned None" in reasons[0]
    assert "route raised RuntimeError" in reasons[1]
    assert "negative amounts" in reasons[2]
    assert "cannot decode the input" in reasons[3]
    assert "metadata" in reasons[4]
    assert {r.stream for r in records} == {"tallies"}
    assert [r.revision for r in records] == [0, 1, 2, 3, 4]
    # Nothing stored was lost, and the good input after the poison was handled.
    assert len(store.read_stream("tallies")) == 6
    assert show(store, app, tally.stream("t")).state == 7
    # A restart does not skip (or record) them again.
    with Service(app, store) as again:
        assert again.wait_idle(30)
    assert len(skipped(store, app)) == 5


def test_a_corrupt_instance_stream_skips_its_inputs(store: EventStore, app_name: str) -> None:
    app = tally_app(app_name)
    stream = tally.stream("c")
    store.append(stream, [NewEvent(event_id(stream, "c", 0), "Began", b"{}")], NO_STREAM)
    store.append(stream, [NewEvent(event_id(stream, "c", 1), "Received:ptest.Nope", b"{}")], 0)
    app.publish(store, Added(tally_id="c", amount=1), "tallies")
    app.publish(store, Added(tally_id="d", amount=2), "tallies")
    with Service(app, store) as service:
        assert service.wait_idle(30)
    (record,) = skipped(store, app)
    assert "cannot be folded" in record.reason
    assert show(store, app, tally.stream("d")).state == 2


def test_group_commit_covers_inputs_skips_and_checkpoint(store: EventStore, app_name: str) -> None:
    if not isinstance(store, TransactionalStore):
        return
    app = tally_app(app_name)
    seen: list[list[StreamAppend]] = []
    original = store.append_batch

    def spy(appends: Any, **fences: Any) -> Any:
        seen.append(list(appends))
        assert fences["checkpoints"]
        return original(appends, **fences)

    store.append_batch = spy  # type: ignore[method-assign]
    for i in range(5):
        app.publish(store, Added(tally_id=f"t{i}", amount=i), "tallies")
    app.publish(store, Added(tally_id="", amount=1), "tallies")
    with Service(app, store) as service:
        assert service.wait_idle(30)
    streams = {a.stream for batch in seen for a in batch}
    assert {tally.stream(f"t{i}") for i in range(5)} <= streams
    assert any(s.startswith("decider-skipped-") for s in streams)
