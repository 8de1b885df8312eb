"""The command line's plumbing: a closed pipe, shell completion, log formats and config files,
and re-driving a skipped command (in-process, on the in-memory store)."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from decider import Metadata, event_id
from decider.processors import Service
from decider.processors.app.messages import ParkedCommandRetried
from decider.processors.app.streams import parked_stream
from decider.processors.cli import main
from decider.processors.cli.operate import parse_duration, parse_time
from decider.processors.engine.logs import JsonFormatter, TextFormatter, configure
from decider.processors.operate.listing import InstanceQuery, list_instances
from decider.processors.operate.skipped import find_skipped, list_skipped, redrive
from decider.processors.operate.stuck import StuckWatcher
from decider.stores.memory import MemoryEventStore
from decider.stores.protocol import ANY, NewEvent
from decider.stores.sqlite import SqliteEventStore
from samples.traffic_fine.app import REPORTS_STREAM, app
from samples.traffic_fine.demo import reports
from tests.support.ops_app import ChoreAdded, TicketClosed, TicketOpened, ops_app
from tests.support.service import ROOT, decider_command, service_env
from tests.support.waiting import wait_until


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    db = tmp_path / "events.db"
    store_uri = f"sqlite:///{db}"
    db.touch()
    process = subprocess.Popen(
        [*decider_command(), "list", "--app", "samples.traffic_fine:app", "--store", store_uri],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**service_env(), "DECIDER_STORE": store_uri},
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before the command writes anything
    error = process.stderr.read().decode()
    assert process.wait(timeout=60) == 141, error
    assert error == ""


def test_completion_prints_shell_code_and_completes_subcommands(tmp_path: Path) -> None:
    code = subprocess.run(
        [*decider_command(), "completion", "bash"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=60,
    ).stdout
    assert "complete " in code and "decider" in code
    answer = tmp_path / "completions"
    line = "decider sk"
    env = {
        **service_env(),
        "_ARGCOMPLETE": "1",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
    }
    subprocess.run(decider_command(), env=env, cwd=ROOT, timeout=60, check=False)
    assert answer.read_text().split() == ["skipped"]


def test_the_json_and_text_formats_carry_the_extra_context() -> None:
    record = logging.LogRecord("decider.processors.x", logging.INFO, "f", 1, "%s ok", ("a",), None)
    record.processor = "app.commands"
    record.position = 42
    doc = json.loads(JsonFormatter().format(record))
    assert doc["message"] == "a ok" and doc["logger"] == "decider.processors.x"
    assert doc["processor"] == "app.commands" and doc["position"] == 42
    assert doc["level"] == "INFO" and doc["time"].endswith("+00:00")
    text = TextFormatter().format(record)
    assert text.endswith("INFO decider.processors.x: a ok processor=app.commands position=42")


def test_a_log_config_file_is_applied_and_a_bad_one_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "logging.toml"
    good.write_text(
        "[formatters.json]\n"
        '"()" = "decider.processors.engine.logs.JsonFormatter"\n'
        "[handlers.err]\n"
        'class = "logging.StreamHandler"\n'
        'formatter = "json"\n'
        "[loggers.decider]\n"
        'level = "WARNING"\n'
        'handlers = ["err"]\n'
        "propagate = false\n"
    )
    try:
        configure(logging.INFO, config=good)
        logger = logging.getLogger("decider.processors.somewhere")
        assert logger.getEffectiveLevel() == logging.WARNING
        handler = logging.getLogger("decider").handlers[0]
        assert isinstance(handler.formatter, JsonFormatter)
    finally:
        decider_logger = logging.getLogger("decider")
        decider_logger.handlers.clear()
        decider_logger.propagate = True
        decider_logger.setLevel(logging.NOTSET)
    bad = tmp_path / "logging.yaml"
    bad.write_text("version: 1\n")
    argv = ["run", "samples.traffic_fine:app", "--store", "memory://", "--log-config", str(bad)]
    assert main(argv) == 2
    assert "must end in .json or .toml" in capsys.readouterr().err


def test_run_writes_json_log_lines(tmp_path: Path) -> None:
    log = tmp_path / "service.log"
    arguments = ["run", "samples.traffic_fine:app", "--store", f"sqlite:///{tmp_path / 'e.db'}"]
    with log.open("w") as out:
        process = subprocess.Popen(
            [*decider_command(), *arguments, "--log-format", "json", "--log-level", "debug"],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=service_env(),
        )
    try:
        # Each of the three processors logs its start from its own thread: stop after all.
        wait_until(
            lambda: log.read_text().count("starting after position") >= 3,
            60,
            "the three processors to start",
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    # A logger per module under `decider`, which --log-level set for all of them.
    loggers = {line["logger"] for line in lines}
    assert loggers >= {"decider.processors.service.service", "decider.processors.engine.base"}
    assert all(name.startswith("decider.") for name in loggers)
    assert any(line["message"] == "service 'traffic-fines' stopped" for line in lines)
    # Context in extra fields, each a key of its own.
    started = [line for line in lines if "starting after position" in line["message"]]
    assert {line["processor"] for line in started} == {
        "traffic-fines.workflow.IssueTrafficFineForSpeedingViolation",
        "traffic-fines.commands",
        "traffic-fines.timers",
    }
    assert all("position" in line for line in started)
    assert any(line.get("app") == "traffic-fines" for line in lines)


def test_durations_and_times() -> None:
    now = datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert parse_duration("90") == timedelta(seconds=90)
    assert parse_duration("1d2h3m4s") == timedelta(days=1, hours=2, minutes=3, seconds=4)
    assert parse_time("15m", now) == now - timedelta(minutes=15)
    assert parse_time("2026-01-31T10:00:00", now) == datetime(2026, 1, 31, 10, tzinfo=UTC)
    assert parse_time("2026-01-31T10:00:00+01:00", now).utcoffset() == timedelta(hours=1)


def test_list_filters_by_time_and_stuck_measured_against_now() -> None:
    store = MemoryEventStore()
    with Service(app, store) as service:
        app.publish_many(store, reports(3, seed=1), REPORTS_STREAM)
        assert service.wait_idle(20)
    everything = list_instances(store, app, InstanceQuery(limit=None)).instances
    assert len(everything) == 3
    later = max(i.updated_at for i in everything) + timedelta(hours=1)
    assert not list_instances(store, app, InstanceQuery(stuck=True), now=later).instances
    stuck = list_instances(
        store, app, InstanceQuery(stuck=True, stuck_for=timedelta(minutes=1)), now=later
    )
    running = [i for i in everything if i.status.value == "running"]
    assert [i.stream for i in stuck.instances] == [i.stream for i in running]
    first = everything[0].started_at
    assert not list_instances(store, app, InstanceQuery(started_before=first)).instances
    with pytest.raises(KeyError, match="no workflow 'Nope'"):
        list_instances(store, app, InstanceQuery(workflow="Nope"))


def test_a_skipped_command_is_redriven_through_the_ledger_once() -> None:
    store = MemoryEventStore()
    stream = "IssueTrafficFineForSpeedingViolation-PR-9"
    metadata = Metadata(message_id="m", correlation_id="PR-9")
    began = NewEvent(event_id(stream, "m", 0), "Began", b"{}", app.codec.encode_metadata(metadata))
    broken = NewEvent(
        event_id(stream, "m", 1),
        "Sent:fines.GenerateTrafficFineSystemNumber",
        b'{"no": "police_report_id"}',
        app.codec.encode_metadata(metadata),
    )
    store.append(stream, [began, broken], ANY)
    with Service(app, store) as service:
        assert service.wait_until(lambda: len(list_skipped(store, app)) == 1, 20)
    [skipped] = list_skipped(store, app)
    assert skipped.processor == "traffic-fines.commands"
    assert find_skipped(store, app, skipped.skip_id[:6]) == skipped
    first = redrive(store, app, skipped)
    assert redrive(store, app, skipped) == first
    assert first.how == "retry" and first.stream == parked_stream(app.name)
    [request] = store.read_stream(parked_stream(app.name))
    retried = app.codec.decode_message(request.type, request.data)
    assert retried == ParkedCommandRetried(
        command_id=str(broken.id),
        command_type="fines.GenerateTrafficFineSystemNumber",
        stream=stream,
        revision=1,
    )
    assert list_skipped(store, app, pending_only=True) == []


def test_a_stuck_instance_is_reported_once_per_stall() -> None:
    store = MemoryEventStore()
    clock = [datetime.now(UTC)]
    watcher = StuckWatcher(store, ops_app, now=lambda: clock[0])
    assert watcher.active
    with Service(ops_app, store) as service:
        ops_app.publish(store, TicketOpened(ticket_id="t1", kind="plain"), "in")
        ops_app.publish(store, ChoreAdded(chore_id="c1"), "in")
        assert service.wait_idle(20)
        clock[0] = datetime.now(UTC) + timedelta(seconds=1)
        [stuck] = watcher.poll()
        assert (stuck.stream, stuck.workflow) == ("Ticket-t1", "Ticket")  # Chore: no setting
        assert watcher.poll() == []
        assert watcher.stuck_counts() == {"Ticket": 1}
        ops_app.publish(store, TicketOpened(ticket_id="t1", kind="again"), "in")
        assert service.wait_idle(20)
        clock[0] = datetime.now(UTC) + timedelta(seconds=1)
        assert [s.stream for s in watcher.poll()] == ["Ticket-t1"]  # progressed, stalled anew
        ops_app.publish(store, TicketClosed(ticket_id="t1"), "in")
        assert service.wait_idle(20)
        assert watcher.poll() == []
        assert watcher.stuck_counts() == {}


def test_run_warns_once_of_a_stuck_instance(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    store = SqliteEventStore(db)
    ops_app.publish(store, TicketOpened(ticket_id="t1", kind="plain"), "in")
    store.close()
    log = tmp_path / "service.log"
    arguments = ["run", "tests.support.ops_app:ops_app", "--store", f"sqlite:///{db}"]
    with log.open("w") as out:
        process = subprocess.Popen(
            [*decider_command(), *arguments, "--progress-interval", "0.1"],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=service_env(),
        )
    try:
        wait_until(lambda: "progress: " in log.read_text(), 60, "a progress line")
        wait_until(lambda: "is stuck" in log.read_text(), 60, "the stuck warning")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    warnings = [line for line in log.read_text().splitlines() if "is stuck" in line]
    assert len(warnings) == 1, warnings
    assert "WARNING" in warnings[0] and "stream=Ticket-t1 workflow=Ticket" in warnings[0]
