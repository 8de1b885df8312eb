"""Tracing in-process: spans of inputs, timers and replies joined into one trace through the
stored metadata; without an SDK, a stored trace context is passed on unchanged."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracer, NoOpTracerProvider, Span, SpanKind

from decider import Codec, Metadata
from decider.processors import Service
from decider.processors.engine import telemetry
from decider.stores import NO_STREAM, NewEvent
from decider.stores.memory import MemoryEventStore
from tests.support.apps import RemindMe, reminder, reminder_app


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    telemetry.set_tracer_provider(provider)
    try:
        yield spans
    finally:
        telemetry.set_tracer_provider(None)


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.trace_id)


def test_a_reminder_s_input_timer_and_reply_are_one_trace(
    exporter: InMemorySpanExporter,
) -> None:
    store = MemoryEventStore()
    app = reminder_app("traced")
    app.publish(store, RemindMe(reminder_id="r", seconds=0), "reminders")
    with Service(app, store) as service:
        assert service.wait_until(lambda: bool(store.read_stream("reply-" + _first_id(store))), 30)
        assert service.wait_until(
            lambda: any(e.type == "Completed" for e in store.read_stream(reminder.stream("r"))), 30
        )
        assert service.wait_idle(30)
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    (send,) = [s for s in spans if s.name == "send reminders"]
    assert send.kind is SpanKind.PRODUCER
    assert send.attributes is not None and send.attributes["messaging.system"] == "decider"
    traced = [s for s in spans if not s.name.startswith("commit ")]
    assert {trace_id(s) for s in traced} == {trace_id(send)}
    for span in traced:
        if span is not send:
            assert span.parent is not None and span.parent.span_id in by_id, span.name
    # input -> Scheduled -> fire -> the fired message's input -> Completed.
    (fire,) = [s for s in spans if s.name.startswith("fire timer-")]
    assert fire.parent is not None
    scheduling = by_id[fire.parent.span_id]
    assert scheduling.name == "process reminders"
    assert scheduling.attributes is not None
    assert scheduling.attributes["decider.instance_id"] == "r"
    assert [e.name for e in scheduling.events] == ["route", "load", "decide"]
    fired = [s for s in spans if s.parent is not None and s.parent.span_id == fire.context.span_id]
    assert fire.attributes is not None
    assert [s.name for s in fired] == [f"process {fire.attributes['messaging.destination.name']!s}"]
    # The reply was copied by the command processor, in a span of the Replied command.
    replies = [s for s in spans if s.attributes and s.attributes.get("decider.processor") == (
        "traced.commands")]  # fmt: skip
    assert replies
    # The commits link to the inputs they committed.
    commits = [s for s in spans if s.name == "commit traced.workflow.Reminder"]
    linked = {link.context.span_id for c in commits for link in c.links}
    assert scheduling.context is not None and scheduling.context.span_id in linked


def _first_id(store: MemoryEventStore) -> str:
    (published,) = store.read_stream("reminders")
    return str(json.loads(published.metadata)["message_id"])


def test_without_an_sdk_a_stored_trace_context_is_passed_on_unchanged() -> None:
    store = MemoryEventStore()
    app = reminder_app("untraced")
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    # The publisher traces (its own provider); the service has no SDK.
    with provider.get_tracer("test").start_as_current_span("request") as request:
        app.publish(store, RemindMe(reminder_id="r", seconds=3600), "reminders")
    with Service(app, store) as service:
        assert service.wait_until(lambda: len(store.read_stream(reminder.stream("r"))) >= 3, 30)
        assert service.wait_idle(30)
    parent = f"00-{request.get_span_context().trace_id:032x}-"
    written = store.read_stream(reminder.stream("r"))
    assert all(json.loads(e.metadata)["traceparent"].startswith(parent) for e in written)


def test_nothing_traced_leaves_the_stored_metadata_as_it_was() -> None:
    store = MemoryEventStore()
    app = reminder_app("plain")
    app.publish(store, RemindMe(reminder_id="r", seconds=3600), "reminders")
    with Service(app, store) as service:
        assert service.wait_until(lambda: len(store.read_stream(reminder.stream("r"))) >= 3, 30)
        assert service.wait_idle(30)
    for event in [*store.read_stream("reminders"), *store.read_stream(reminder.stream("r"))]:
        assert "traceparent" not in json.loads(event.metadata)


def test_trace_fields_round_trip_and_old_metadata_decodes_without_them(tmp_path: Path) -> None:
    codec = Codec()
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    metadata = Metadata(message_id="m", traceparent=parent, tracestate="k=v")
    assert codec.decode_metadata(codec.encode_metadata(metadata)) == metadata
    old = codec.decode_metadata(b'{"message_id": "m", "causation_id": "c"}')
    assert old.traceparent is None and old.tracestate is None
    assert telemetry.extract(old) is None
    assert telemetry.extract(metadata) is not None
    with pytest.raises(Exception, match="traceparent"):
        codec.decode_metadata(b'{"message_id": "m", "traceparent": 7}')


class _CountingTracer(NoOpTracer):
    """A tracer of no SDK that counts the spans asked of it."""

    def __init__(self) -> None:
        self.asked = 0

    def start_span(self, *args: Any, **kwargs: Any) -> Span:
        self.asked += 1
        return super().start_span(*args, **kwargs)

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        self.asked += 1
        return super().start_as_current_span(*args, **kwargs)


class _NoSdk(NoOpTracerProvider):
    def __init__(self, tracer: _CountingTracer) -> None:
        self.tracer = tracer

    def get_tracer(self, *args: Any, **kwargs: Any) -> _CountingTracer:
        return self.tracer


@pytest.fixture
def no_sdk() -> Iterator[_CountingTracer]:
    tracer = _CountingTracer()
    telemetry.set_tracer_provider(_NoSdk(tracer))
    try:
        yield tracer
    finally:
        telemetry.set_tracer_provider(None)


def test_without_an_sdk_the_hooks_ask_for_no_span(no_sdk: _CountingTracer) -> None:
    """No SDK: no span is started, not even a no-op one, for a handler's call, a commit, a
    publish, a timer or an input; what they wrap still runs and returns."""
    store = MemoryEventStore()
    store.append("s", [NewEvent(uuid.uuid4(), "t", b"{}", b'{"message_id":"m"}')], NO_STREAM)
    (recorded,) = store.read_stream("s")
    assert not telemetry.tracing()
    assert telemetry.call_handler("p", "t", "c", 2, lambda: 42) == 42
    with (
        telemetry.commit_span("p", 1, 5),
        telemetry.publish_span("s", "t"),
        telemetry.timer_span("p", "s", "id", Metadata(message_id="m")),
    ):
        pass
    assert telemetry.input_span("p", recorded) is None
    assert telemetry.capture() is None
    assert telemetry.inject(metadata := Metadata(message_id="m")) is metadata
    telemetry.annotate("decide", {"decider.events": 1})
    assert no_sdk.asked == 0


def test_without_an_sdk_a_handler_s_call_carries_the_command_s_trace_context(
    no_sdk: _CountingTracer,
) -> None:
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    context = telemetry.extract(Metadata(message_id="m", traceparent=parent))
    written = telemetry.call_handler(
        "p", "t", "c", 1, lambda: telemetry.inject(Metadata(message_id="r")), context
    )
    assert written.traceparent == parent
    assert telemetry.capture() is None  # the context is left as it was after the call
