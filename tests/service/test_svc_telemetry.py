"""Tracing and metrics of ``decider run`` processes: one trace from a publish to Completed
across two service processes, and the Prometheus endpoint of ``--metrics-port``."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from decider.stores.protocol import EventStore
from samples.traffic_fine.messages import PoliceReportPublished, SpeedingViolation
from tests.support.service import ServiceProcess, completed, service_env
from tests.support.traced_app import HOLD_ENV, REPORTS, app
from tests.support.tracing import SPANS_ENV, read_spans, span_record
from tests.support.waiting import wait_until

APP = "tests.support.traced_app:app"
CODE_HANDLER = "handle fines.GenerateTrafficFineManualIdentificationCode"
REPORT = PoliceReportPublished(
    police_report_id="PR-7",
    offense=SpeedingViolation(maximum_speed="50", measured_speed="90"),
)


def spawn(
    processes: list[ServiceProcess], name: str, uri: str, tmp_path: Path, *options: str, **env: str
) -> ServiceProcess:
    environment = service_env()
    environment.pop(HOLD_ENV, None)
    environment.pop(SPANS_ENV, None)
    environment.update(env)
    process = ServiceProcess(APP, uri, tmp_path / f"{name}.log", environment, options=options)
    processes.append(process)
    return process


def has_span(path: Path, name: str, **attributes: Any) -> bool:
    return any(
        span["name"] == name and all(span["attributes"].get(k) == v for k, v in attributes.items())
        for span in read_spans(path)
    )


def test_one_trace_from_publish_to_completed_across_two_service_processes(
    sqlite_store: tuple[str, EventStore], processes: list[ServiceProcess], tmp_path: Path
) -> None:
    uri, events = sqlite_store
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("test").start_as_current_span("report received") as root:
        app.publish(events, REPORT, REPORTS)
    trace_id = f"{root.get_span_context().trace_id:032x}"

    # The first process carries the instance up to the code command, whose handler it holds.
    first_spans, second_spans = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first = spawn(processes, "first", uri, tmp_path, **{SPANS_ENV: str(first_spans), HOLD_ENV: "1"})
    first.start()
    wait_until(
        lambda: first.check_alive() or has_span(first_spans, CODE_HANDLER),
        timeout=30,
        what="the first process to call the code handler",
    )
    assert first.terminate() == 0
    assert completed(events, app) == 0
    # The second process goes on from the checkpoints to Completed.
    second = spawn(processes, "second", uri, tmp_path, **{SPANS_ENV: str(second_spans)})
    second.start()
    wait_until(
        lambda: second.check_alive() or has_span(second_spans, "handle fines.IssueTrafficFine"),
        timeout=30,
        what="the second process to issue the fine",
    )
    assert completed(events, app) == 1
    assert second.terminate() == 0

    ours = [span_record(span) for span in exporter.get_finished_spans()]
    theirs = {"first": read_spans(first_spans), "second": read_spans(second_spans)}
    traced = [s for spans in theirs.values() for s in spans if not s["name"].startswith("commit")]
    assert theirs["first"] and theirs["second"]
    # One trace: every span but the commits (linked to it instead) is in the publisher's trace.
    assert {s["trace_id"] for s in traced} == {trace_id}
    every = {s["span_id"]: s for s in [*ours, *traced]}
    for span in traced:
        assert span["parent_id"] in every, f"{span['name']}: its parent is not in the trace"
    # The second process's spans continue the first's: the code command's span has its parent
    # (the workflow's decision to send it) in the first process.
    first_ids = {s["span_id"] for s in theirs["first"]}
    code = [s for s in theirs["second"] if s["name"] == CODE_HANDLER]
    assert code and code[0]["attributes"]["decider.outcome"] == "ok"
    command_span = every[code[0]["parent_id"]]
    assert command_span["parent_id"] in first_ids
    assert command_span["attributes"]["messaging.system"] == "decider"
    assert command_span["attributes"]["decider.processor"] == "traced-fines.commands"
    # The held attempt in the first process is an error span.
    held = [s for s in theirs["first"] if s["name"] == CODE_HANDLER]
    assert held[0]["status"] == "ERROR" and held[0]["attributes"]["decider.attempt"] == 1
    # The workflow's input spans name the instance; the one that completed it is in the second.
    decided = [s for s in theirs["second"] if s["attributes"].get("decider.instance_id") == "PR-7"]
    assert decided, "no workflow input span of the second process names the instance"
    # Commits are linked to the inputs they commit.
    commits = [s for spans in theirs.values() for s in spans if s["name"].startswith("commit")]
    assert any(set(c["links"]) & set(every) for c in commits)
    # The stored events carry the trace: the instance's Completed event is in it.
    stream = events.read_stream("IssueTrafficFineForSpeedingViolation-PR-7")
    done = [e for e in stream if e.type == "Completed"]
    assert json.loads(done[0].metadata)["traceparent"].split("-")[1] == trace_id


def scrape(port: int) -> dict[str, list[Any]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def value(samples: dict[str, list[Any]], family: str, sample: str, **labels: str) -> float | None:
    for found in samples.get(family, []):
        if found.name == sample and all(found.labels.get(k) == v for k, v in labels.items()):
            return float(found.value)
    return None


def test_the_metrics_endpoint_shows_lag_and_handler_latency_during_a_run(
    sqlite_store: tuple[str, EventStore], processes: list[ServiceProcess], tmp_path: Path
) -> None:
    uri, events = sqlite_store
    app.publish(events, REPORT, REPORTS)
    running = spawn(processes, "metrics", uri, tmp_path, "--metrics-port", "0", **{HOLD_ENV: "1"})
    running.start()
    wait_until(
        lambda: running.check_alive() or bool(running.log_lines("metrics served on")),
        timeout=30,
        what="the metrics endpoint",
    )
    port = int(re.findall(r"127\.0\.0\.1:(\d+)/metrics", running.log_lines("metrics served")[0])[0])
    commands = "traced-fines.commands"
    workflow = "traced-fines.workflow.IssueTrafficFineForSpeedingViolation"

    family = "decider_handler_duration_seconds"
    lags = "decider_processor_lag_positions"

    def held(samples: dict[str, list[Any]]) -> bool:
        """The code command's first attempt failed and waits: the command processor lags
        behind it, the workflow processor (nothing left to decide) does not."""
        failed = value(
            samples, family, f"{family}_count",
            decider_command_type="fines.GenerateTrafficFineManualIdentificationCode",
            decider_outcome="failed",
        )  # fmt: skip
        return (
            failed == 1
            and bool(value(samples, lags, lags, decider_processor=commands))
            and value(samples, lags, lags, decider_processor=workflow) == 0
        )

    seen: list[dict[str, list[Any]]] = []

    def scraped() -> dict[str, list[Any]]:
        seen.append(scrape(port))
        return seen[-1]

    wait_until(
        lambda: running.check_alive() or held(scraped()),
        timeout=30,
        what="the held command in the metrics",
    )
    samples = seen[-1]
    lag_seconds = value(
        samples, "decider_processor_lag_seconds", "decider_processor_lag_seconds",
        decider_processor=commands,
    )  # fmt: skip
    assert lag_seconds is not None and lag_seconds >= 0
    ok = value(
        samples, family, f"{family}_count",
        decider_command_type="fines.GenerateTrafficFineSystemNumber", decider_outcome="ok",
    )  # fmt: skip
    assert ok == 1
    running_instances = value(
        samples, "decider_instances", "decider_instances",
        decider_workflow="IssueTrafficFineForSpeedingViolation", decider_status="running",
    )  # fmt: skip
    assert running_instances == 1
    assert value(samples, "decider_processor_inputs", "decider_processor_inputs_total",
                 decider_processor=workflow) == 2  # fmt: skip
    # Both inputs reached the workflow processor, among the other events it was delivered.
    delivered = value(samples, "decider_processor_delivered", "decider_processor_delivered_total",
                      decider_processor=workflow)  # fmt: skip
    assert delivered is not None and delivered >= 2

    # Held longer than its progress_within, the instance counts as stuck.
    def stuck() -> float | None:
        return value(
            scrape(port), "decider_instances_stuck", "decider_instances_stuck",
            decider_workflow="IssueTrafficFineForSpeedingViolation",
        )  # fmt: skip

    wait_until(lambda: running.check_alive() or stuck() == 1, timeout=30, what="a stuck count")
    assert running.terminate() == 0
