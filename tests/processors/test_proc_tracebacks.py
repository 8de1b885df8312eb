"""The traceback of an exception raised in user code (``decide`` or a handler) is kept, bounded,
with the skip record and the park record; shown by ``decider skipped show``, ``decider
parked`` and the console; logged with the WARNING / ERROR line; recorded on the span."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from decider.codec import format_traceback
from decider.processors import Service, list_parked
from decider.processors.cli import main
from decider.processors.console import pages
from decider.processors.engine import telemetry
from decider.processors.operate.skipped import list_skipped
from decider.stores.sqlite import SqliteEventStore
from tests.support.failing_app import INPUTS, BookingRequested, app

APP = "tests.support.failing_app:app"
HERE = "tests/support/failing_app.py"


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


@pytest.fixture
def ran(tmp_path: Path, exporter: InMemorySpanExporter) -> Iterator[str]:
    """A store where one booking was skipped (decide raised) and one charge parked."""
    path = tmp_path / "events.db"
    store = SqliteEventStore(path)
    try:
        app.publish(store, BookingRequested(booking_id="b1", hotel="nowhere"), INPUTS)
        app.publish(store, BookingRequested(booking_id="b2", hotel="ritz"), INPUTS)
        with Service(app, store) as service:
            assert service.wait_until(
                lambda: len(list_skipped(store, app)) == 1 and len(list_parked(store, app)) == 1,
                30,
            )
            assert service.wait_idle(30)
    finally:
        store.close()
    yield f"sqlite:///{path}"


def _deep_frames(traceback: str | None, *functions: str) -> None:
    assert traceback is not None
    assert HERE in traceback
    for function in functions:
        assert f", in {function}\n" in traceback, traceback


def test_the_skip_record_keeps_the_traceback_of_decide(ran: str) -> None:
    store = SqliteEventStore(ran.removeprefix("sqlite:///"))
    try:
        [skipped] = list_skipped(store, app)
    finally:
        store.close()
    assert "KeyError('missing_key')" in skipped.reason
    _deep_frames(skipped.traceback, "decide", "_price", "_rate_of")
    assert skipped.traceback is not None
    assert skipped.traceback.endswith("KeyError: 'missing_key'")
    assert "UserCodeFailed" not in skipped.traceback  # the user's exception, not our wrapper


def test_the_park_record_keeps_the_traceback_of_the_handler(ran: str) -> None:
    store = SqliteEventStore(ran.removeprefix("sqlite:///"))
    try:
        [parked] = list_parked(store, app)
    finally:
        store.close()
    _deep_frames(parked.traceback, "charge", "_card_token")
    assert parked.traceback is not None and parked.traceback.endswith("KeyError: 'card_token'")


def test_skipped_show_and_parked_print_the_traceback(
    ran: str, capsys: pytest.CaptureFixture[str]
) -> None:
    at = ["--app", APP, "--store", ran]
    assert main(["skipped", "--json", *at]) == 0
    [record] = json.loads(capsys.readouterr().out)["skipped"]
    assert record["traceback"].endswith("KeyError: 'missing_key'")

    assert main(["skipped", "show", record["skip_id"], *at]) == 0
    shown = capsys.readouterr().out
    assert "traceback:\n    Traceback (most recent call last):" in shown
    assert ", in _rate_of\n" in shown and "    KeyError: 'missing_key'" in shown

    assert main(["parked", *at]) == 0
    listed = capsys.readouterr().out
    assert ", in _card_token\n" in listed and "    KeyError: 'card_token'" in listed
    assert main(["parked", "--json", *at]) == 0
    [command] = json.loads(capsys.readouterr().out)["parked"]
    assert command["traceback"].endswith("KeyError: 'card_token'")


def test_the_console_shows_the_traceback_under_the_reason(ran: str) -> None:
    store = SqliteEventStore(ran.removeprefix("sqlite:///"))
    try:
        parked, skipped = list_parked(store, app), list_skipped(store, app)
    finally:
        store.close()
    chrome = pages.Chrome(app=app, actions=False)
    for page in (pages.parked_table(chrome, parked), pages.skipped_page(chrome, skipped)):
        assert "<summary>Traceback</summary>" in page
        assert "KeyError: &#x27;" in page or "KeyError: &#39;" in page


def test_the_warning_and_error_lines_carry_the_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteEventStore(tmp_path / "events.db")
    caplog.set_level(logging.WARNING, logger="decider")
    try:
        app.publish(store, BookingRequested(booking_id="b1", hotel="nowhere"), INPUTS)
        app.publish(store, BookingRequested(booking_id="b2", hotel="ritz"), INPUTS)
        with Service(app, store) as service:
            assert service.wait_until(lambda: len(list_parked(store, app)) == 1, 30)
            assert service.wait_until(lambda: len(list_skipped(store, app)) == 1, 30)
    finally:
        store.close()
    skip = [r for r in caplog.records if " skips " in r.getMessage()]
    park = [r for r in caplog.records if " parks " in r.getMessage()]
    assert skip and skip[0].levelno == logging.WARNING and skip[0].exc_info
    assert isinstance(skip[0].exc_info[1], KeyError)
    assert park and park[0].levelno == logging.ERROR and park[0].exc_info
    assert isinstance(park[0].exc_info[1], KeyError)
    text = logging.Formatter().formatException(skip[0].exc_info)
    assert ", in _rate_of\n" in text


def test_the_input_and_handler_spans_record_the_exception(
    ran: str, exporter: InMemorySpanExporter
) -> None:
    spans = exporter.get_finished_spans()
    failed = {
        span.name: span for span in spans if any(event.name == "exception" for event in span.events)
    }
    assert "process bookings" in failed and "handle ftest.Charge" in failed, sorted(failed)
    for span in failed.values():
        [event] = [e for e in span.events if e.name == "exception"]
        assert event.attributes is not None
        assert event.attributes["exception.type"] == "KeyError"
        assert HERE in str(event.attributes["exception.stacktrace"])
        assert span.status.status_code.name == "ERROR"


def test_a_long_traceback_is_bounded_keeping_its_end() -> None:
    def recurse(n: int) -> None:
        if n == 0:
            raise KeyError("deep")
        recurse(n - 1)

    try:
        recurse(200)
    except KeyError as exc:
        text = format_traceback(exc, limit=300)
    assert len(text) <= 300
    assert text.startswith("…\n") and text.endswith("KeyError: 'deep'")
