"""What the telemetry says is true: gauges of the commands parked now and the skipped inputs
pending (read from the store: the processors' counters only count what one process did since
it started, so they read 0 in a process started after the parks); log lines that carry the
trace and span id; retry lines that name the instance stream; commit spans in the trace of the
inputs they commit."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from decider.processors import RetryPolicy, Service, list_parked
from decider.processors.engine import telemetry
from decider.processors.engine.logs import JsonFormatter, TraceContextFilter, configure
from decider.processors.operate.skipped import list_skipped
from decider.stores.memory import MemoryEventStore
from decider.stores.sqlite import SqliteEventStore
from tests.service.test_svc_telemetry import scrape, value
from tests.support import apps
from tests.support.failing_app import INPUTS, BookingRequested, app
from tests.support.service import ServiceProcess, service_env
from tests.support.waiting import wait_until


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


def _run_failing(store: SqliteEventStore, bookings: int) -> None:
    """Publish one booking that decide rejects and ``bookings`` whose charge is parked, and run
    a service until they are."""
    app.publish(store, BookingRequested(booking_id="bad", hotel="nowhere"), INPUTS)
    for index in range(bookings):
        app.publish(store, BookingRequested(booking_id=f"b{index}", hotel="ritz"), INPUTS)
    with Service(app, store) as service:
        assert service.wait_until(
            lambda: len(list_parked(store, app)) == bookings and len(list_skipped(store, app)) == 1,
            30,
        )


def test_gauges_count_what_is_parked_and_skipped_now_whoever_did_it(tmp_path: Path) -> None:
    db = tmp_path / "events.db"
    store = SqliteEventStore(db)
    try:
        _run_failing(store, 3)
    finally:
        store.close()
    running = ServiceProcess(
        "tests.support.failing_app:app", f"sqlite:///{db}", tmp_path / "service.log",
        service_env(), options=["--metrics-port", "0"],
    )  # fmt: skip
    try:
        running.start()
        wait_until(
            lambda: running.check_alive() or bool(running.log_lines("metrics served on")),
            timeout=30,
            what="the metrics endpoint",
        )
        line = running.log_lines("metrics served")[0]
        port = int(re.findall(r"127\.0\.0\.1:(\d+)/metrics", line)[0])
        seen: list[dict[str, list[Any]]] = []

        def parked_now() -> float | None:
            seen.append(scrape(port))
            family = "decider_commands_parked"
            return value(seen[-1], family, family, decider_app="failing")

        wait_until(lambda: running.check_alive() or parked_now() == 3, 30, "3 parked")
    finally:
        running.cleanup()
    samples = seen[-1]
    skipped = "decider_inputs_skipped"
    assert value(samples, skipped, skipped, decider_processor="failing.workflow.Booking") == 1
    assert value(samples, skipped, skipped, decider_processor="failing.commands") == 0
    # Why the counter read 0 with 3 parked: it counts this process's parks since it started.
    counter = "decider_processor_parked"
    total = value(samples, counter, f"{counter}_total", decider_processor="failing.commands")
    assert total == 0


def test_log_lines_carry_the_trace_and_span_id_of_their_input(
    tmp_path: Path, exporter: InMemorySpanExporter, capsys: pytest.CaptureFixture[str]
) -> None:
    configure(logging.WARNING, "json")
    store = SqliteEventStore(tmp_path / "events.db")
    try:
        _run_failing(store, 1)
    finally:
        store.close()
        logging.getLogger().handlers = [
            h for h in logging.getLogger().handlers if h.get_name() != "decider.stderr"
        ]
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line[:1] == "{"]
    [skip] = [line for line in lines if " skips " in line["message"]]
    [process] = [
        s for s in exporter.get_finished_spans()
        if s.name == "process bookings" and any(e.name == "exception" for e in s.events)
    ]  # fmt: skip
    assert process.context is not None
    assert skip["trace_id"] == f"{process.context.trace_id:032x}"
    assert skip["span_id"] == f"{process.context.span_id:016x}"
    [park] = [line for line in lines if " parks " in line["message"]]
    assert len(park["trace_id"]) == 32 and len(park["span_id"]) == 16


def test_a_config_file_s_formatter_gets_the_ids_from_the_filter(
    exporter: InMemorySpanExporter,
) -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(TraceContextFilter())
    logger = logging.getLogger("decider.test.trace_ids")
    logger.addHandler(handler)
    try:
        logger.warning("outside")
        with telemetry.publish_span("somewhere", "x.Y"):
            logger.warning("inside")
    finally:
        logger.removeHandler(handler)
    outside, inside = (json.loads(line) for line in out.getvalue().splitlines())
    assert "trace_id" not in outside
    [span] = exporter.get_finished_spans()
    assert span.context is not None
    assert inside["trace_id"] == f"{span.context.trace_id:032x}"


def test_a_retry_line_names_the_instance_stream(caplog: pytest.LogCaptureFixture) -> None:
    retry = RetryPolicy(max_attempts=2, initial_delay=0, jitter=0)
    jobs, _ = apps.job_app("retrying", retry=retry)
    store = MemoryEventStore()
    caplog.set_level(logging.WARNING, logger="decider")
    jobs.publish(store, apps.JobRequested(job_id="j1", action="fail"), "jobs")
    with Service(jobs, store) as service:
        assert service.wait_until(lambda: len(list_parked(store, jobs)) == 1, 30)
    [line] = [r for r in caplog.records if "retrying in" in r.getMessage()]
    assert f"of {apps.job.stream('j1')} failed (attempt 1 of 2)" in line.getMessage()
    assert getattr(line, "stream", None) == apps.job.stream("j1")


def test_commit_spans_are_children_of_the_inputs_they_commit(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    store = SqliteEventStore(tmp_path / "events.db")
    try:
        _run_failing(store, 1)
    finally:
        store.close()
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    commits = [s for s in spans if s.name.startswith("commit ") and s.links]
    assert commits
    for commit in commits:
        assert commit.parent is not None, commit.name
        parent = by_id[commit.parent.span_id]
        assert parent.context is not None and commit.context is not None
        assert commit.context.trace_id == parent.context.trace_id
        assert commit.parent.span_id in {link.context.span_id for link in commit.links}
