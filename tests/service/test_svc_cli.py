"""The ``decider`` command line: argument errors, the views, and ``run`` stopped by signals."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from decider.processors import App, Service
from decider.processors.cli import main
from decider.processors.cli.running import EarlySignals
from decider.stores.sqlite import SqliteEventStore
from samples.traffic_fine.app import REPORTS_STREAM, app
from samples.traffic_fine.demo import reports
from samples.traffic_fine.messages import SpeedingViolation
from tests.support.apps import FINE_SPEEDING, Added, Closed, tally, tally_route
from tests.support.service import ROOT, ServiceProcess, completed, decider_command, service_env
from tests.support.waiting import wait_until

APP = "samples.traffic_fine:app"
WORKFLOW = "IssueTrafficFineForSpeedingViolation"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "events.db"


@pytest.fixture
def filled(db: Path) -> Iterator[Path]:
    """A store where 5 traffic-fine workflows ran to completion (in-process)."""
    store = SqliteEventStore(db)
    with Service(app, store) as service:
        app.publish_many(store, reports(5, seed=3), REPORTS_STREAM)
        assert service.wait_until(lambda: completed(store, app) == 5, 20)
        assert service.wait_idle(20)
    store.close()
    yield db


BAD_ARGUMENTS = [
    (["run", "nosuch.module:app"], "no module named 'nosuch'"),
    (["run", "samples.traffic_fine:nope"], "module 'samples.traffic_fine' has no attribute 'nope'"),
    (["run", "samples.traffic_fine.app:ISSUED_STREAM"], "is a str, not a processors.App"),
    (["run", "samples.traffic_fine"], "must be written module:attribute"),
    (["run", APP, "--store", "foo://x"], "unknown scheme 'foo'"),
    (["run", APP, "--store", "sqlite://"], "missing database path"),
    (["run", APP, "--store", "sqlite:///x.db?color=red"], "unknown parameter 'color'"),
    (["status", "--app", APP, "--store", "sqlite:///no/such/file.db"], "no SQLite database at"),
    (["status", "--app", APP, "--store", "postgresql://u@127.0.0.1:1/db"], "is unavailable"),
    (["run", APP, "--store", "postgresql://u@127.0.0.1/db?bogus=1"], 'parameter: "bogus"'),
    (["status", "--app", APP], "no store: give --store URI or set DECIDER_STORE"),
    (["status", "--store", "memory://"], "no app: give --app module:attribute or set DECIDER_APP"),
    (["status", "--app", APP, "--store", "memory://", "--workflow", "Nope"], "no workflow 'Nope'"),
    (["show", "Nope-1", "--app", APP, "--store", "memory://"], "is not the stream of a workflow"),
    (
        ["cancel", "Nope-1", "--reason", "x", "--app", APP, "--store", "memory://"],
        "is not the stream of a workflow",
    ),
    (["run", APP, "--store", "memory://", "--log-level", "LOUD"], "unknown log level 'LOUD'"),
    (["run", APP, "--store", "memory://", "--cache-size", "-1"], "--cache-size >= 0"),
    (
        ["run", APP, "--store", "memory://", "--gc-young-threshold", "-1"],
        "--gc-young-threshold >= 0",
    ),
]


@pytest.mark.parametrize(
    ("argv", "expected"), BAD_ARGUMENTS, ids=[" ".join(a) for a, _ in BAD_ARGUMENTS]
)
def test_a_bad_argument_is_one_line_and_status_2(
    argv: list[str],
    expected: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.delenv("DECIDER_STORE", raising=False)
    monkeypatch.delenv("DECIDER_APP", raising=False)
    monkeypatch.chdir(tmp_path)
    if argv[0] == "run" and "--store" not in argv:
        argv = [*argv, "--store", "sqlite:///events.db"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("decider: error: ")
    assert expected in lines[0]
    assert not (tmp_path / "events.db").exists(), "nothing is created for a bad argument"


def test_the_console_script_reports_without_a_traceback(tmp_path: Path) -> None:
    result = subprocess.run(
        [*decider_command(), "run", "nosuch.module:app", "--store", "sqlite:///events.db"],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=30,
    )
    assert result.returncode == 2
    assert result.stderr == ("decider: error: no module named 'nosuch' (app 'nosuch.module:app')\n")


def test_show_prints_every_event_and_the_folded_state(
    filled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    speeding = next(r for r in reports(5, seed=3) if isinstance(r.offense, SpeedingViolation))
    assert isinstance(speeding.offense, SpeedingViolation)
    stream = f"{WORKFLOW}-{speeding.police_report_id}"
    assert main(["show", stream, "--app", APP, "--store", f"sqlite:///{filled}"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"{stream}  (workflow {WORKFLOW}, completed, 8 events)"
    types = re.findall(r"^  #(\d+) +(\S+)  @\d+", out, flags=re.MULTILINE)
    assert [t for _, t in types] == FINE_SPEEDING
    assert [int(r) for r, _ in types] == list(range(8))
    payloads = re.findall(r"^        event:    (.*)$", out, flags=re.MULTILINE)
    assert json.loads(payloads[1])["police_report_id"] == speeding.police_report_id
    assert json.loads(payloads[1])["offense"]["measured_speed"] == speeding.offense.measured_speed
    assert out.count(f"correlation_id={speeding.police_report_id}") == 8
    assert out.rstrip().endswith("  state:  Final()\n  status: completed")
    assert "version" not in out  # the traffic-fine workflow has none


versioned = App("svc-versioned")
versioned.workflow(
    attrs.evolve(tally, version="tally-v3"), inputs={Added: tally_route, Closed: tally_route}
)


def test_show_prints_the_version_the_instance_began_under(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = SqliteEventStore(db)
    try:
        with Service(versioned, store) as service:
            versioned.publish(store, Added(tally_id="v", amount=2), "svc-tallies")
            assert service.wait_until(lambda: len(store.read_stream("Tally-v")) == 2, 20)
            assert service.wait_idle(20)
    finally:
        store.close()
    at = ["--app", f"{__name__}:versioned", "--store", f"sqlite:///{db}"]
    assert main(["show", "Tally-v", *at]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("  version: tally-v3\n  state:  2\n  status: running")
    metadata = re.findall(r"^        metadata: (.*)$", out, flags=re.MULTILINE)
    assert "workflow_version=tally-v3" in metadata[0]  # Began's
    assert "workflow_version" not in metadata[1]
    assert main(["show", "Tally-v", *at, "--json"]) == 0
    began = json.loads(capsys.readouterr().out)["events"][0]
    assert began["metadata"]["workflow_version"] == "tally-v3"


def test_status_counts_and_lists_from_the_environment(
    filled: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DECIDER_STORE", f"sqlite:///{filled}")
    monkeypatch.setenv("DECIDER_APP", APP)
    assert main(["status", "--limit", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        "app traffic-fines: 5 instances",
        f"  {WORKFLOW}: running 0, completed 5",
        "completed (5, first 2):",
    ]
    assert all(line.startswith(f"  {WORKFLOW}-PR-") for line in lines[3:5])
    assert lines[5:] == [
        "parked commands: none",
        "handlers (commands in hand: sent, not yet concluded):",
        "  generate_manual_identification_code: in hand 0, parked 0",
        "  generate_system_number: in hand 0, parked 0",
    ]
    assert main(["parked"]) == 0
    assert capsys.readouterr().out == "parked commands: none\n"
    assert main(["show", f"{WORKFLOW}-PR-99999"]) == 1
    assert (
        capsys.readouterr().err == f"decider: error: stream '{WORKFLOW}-PR-99999' has no events\n"
    )
    assert main(["retry", "b3c4a0c2-0000-5000-8000-000000000000"]) == 1


def test_run_stops_on_signals_and_resumes_from_its_checkpoints(db: Path) -> None:
    store = SqliteEventStore(db)
    service = ServiceProcess(APP, f"sqlite:///{db}", db.with_name("service.log"), service_env())
    try:
        made = reports(60, seed=11)
        app.publish_many(store, made[:50], REPORTS_STREAM)
        service.start()
        wait_until(lambda: service.check_alive() or completed(store, app) == 50, 30, "50 completed")
        assert service.terminate(signal.SIGTERM) == 0
        name = f"traffic-fines.workflow.{WORKFLOW}"
        checkpoint = store.load_checkpoint(name)
        assert checkpoint is not None
        assert service.log_lines(f"{name} stopped at position {checkpoint}")
        assert service.log_lines("progress: workflow.")

        app.publish_many(store, made[50:], REPORTS_STREAM)
        service.start()
        wait_until(lambda: service.check_alive() or completed(store, app) == 60, 30, "60 completed")
        assert service.terminate(signal.SIGINT) == 0
        assert service.log_lines(f"{name} starting after position {checkpoint}")
        # The second run handled only the new inputs: 3 per speeding report, 1 per parking one.
        new = made[50:]
        inputs = sum(3 if isinstance(r.offense, SpeedingViolation) else 1 for r in new)
        last_progress = service.log_lines("progress: workflow.")[-1]
        assert f"handled={inputs} " in last_progress, last_progress
    finally:
        service.cleanup()
        store.close()


def test_the_package_runs_with_python_dash_m() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "decider.processors.cli", "--help"],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
    )
    assert result.returncode == 0
    for command in ("run", "show", "status", "parked", "retry"):
        assert command in result.stdout


def test_a_signal_before_the_service_runs_is_remembered_not_fatal() -> None:
    with EarlySignals() as early:
        os.kill(os.getpid(), signal.SIGTERM)
        assert early.received.wait(5)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
