"""Failures and timers at process level, through ``decider run`` and the other CLI commands.

(c) A handler that always fails: its command is parked after its retries (``decider parked``
lists it), the workflow receives ``decider.CommandFailed`` and compensates, every other
workflow completes; ``decider retry`` runs it again (three more attempts, parked again).
(d) A timer due while the service is down fires once after the restart.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from decider.processors import list_parked
from decider.processors.cli import main
from decider.stores.sqlite import SqliteEventStore
from tests.support.apps import (
    JOB_ABANDONED,
    JOB_DONE,
    REMINDER,
    JobRequested,
    RemindMe,
    chores_app,
    job,
    reminder,
)
from tests.support.effects import read_effects
from tests.support.service import ServiceProcess, completed, service_env
from tests.support.stores import instance_streams
from tests.support.waiting import wait_until

APP = "tests.support.apps:chores_app"


@pytest.fixture
def chores(tmp_path: Path) -> Iterator[tuple[SqliteEventStore, ServiceProcess, Path]]:
    db = tmp_path / "events.db"
    store = SqliteEventStore(db)
    effects = tmp_path / "effects.db"
    service = ServiceProcess(APP, f"sqlite:///{db}", tmp_path / "service.log", service_env(effects))
    yield store, service, effects
    service.cleanup()
    store.close()


def test_failing_handler_parks_and_the_workflow_compensates(
    chores: tuple[SqliteEventStore, ServiceProcess, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    store, service, effects_db = chores
    doomed = {"E-03", "E-11"}
    errands = [
        JobRequested(job_id=job_id, action="fail" if job_id in doomed else "ok")
        for job_id in (f"E-{n:02d}" for n in range(20))
    ]
    service.start()
    chores_app.publish_many(store, errands, "errands")
    wait_until(
        lambda: service.check_alive() or completed(store, chores_app) == 20,
        30,
        "20 errands completed",
    )
    streams = instance_streams(store, job.stream(""))
    for errand in (e.job_id for e in errands):
        expected = JOB_ABANDONED if errand in doomed else JOB_DONE
        assert [e.type for e in streams[job.stream(errand)]] == expected, errand
    sent = {e.job_id: str(streams[job.stream(e.job_id)][2].id) for e in errands}
    effects = read_effects(str(effects_db))
    assert {c: calls for c, (_, calls) in effects.items()} == {
        command_id: 3 if errand in doomed else 1 for errand, command_id in sent.items()
    }
    parked = {p.command_id: p for p in list_parked(store, chores_app)}
    assert set(parked) == {sent[e] for e in doomed}
    assert {p.attempts for p in parked.values()} == {3}
    assert all("cannot do" in p.reason for p in parked.values())

    uri = ["--app", APP, "--store", service.uri]
    assert main(["parked", *uri]) == 0
    listed = capsys.readouterr().out
    assert "parked commands (2):" in listed
    for command_id in parked:
        assert command_id in listed
    assert main(["status", *uri, "--workflow", "Job", "--limit", "0"]) == 0
    assert "Job: running 0, completed 20" in capsys.readouterr().out

    # Its job has completed (compensated): a retry is refused unless forced.
    retried = sent["E-11"]
    assert main(["retry", retried, *uri]) == 1
    assert "which has ended (completed)" in capsys.readouterr().err
    # Forced, retried by the running service: three more attempts, parked again, fed back.
    assert main(["retry", retried, "--force", *uri]) == 0
    assert f"retry of {retried} requested" in capsys.readouterr().out
    wait_until(
        lambda: service.check_alive() or read_effects(str(effects_db))[retried][1] == 6,
        30,
        "three more attempts of the retried command",
    )
    wait_until(
        lambda: (
            service.check_alive()
            or retried in {p.command_id for p in list_parked(store, chores_app)}
        ),
        30,
        "the retried command parked again",
    )
    # Parking and feeding the failure back are two steps; the second lands in the instance's
    # stream. The instance had completed: the second failure is recorded, not acted upon.
    abandoned_and_ignored = [*JOB_ABANDONED, "Ignored:decider.CommandFailed"]
    wait_until(
        lambda: (
            service.check_alive()
            or [e.type for e in store.read_stream(job.stream("E-11"))] == abandoned_and_ignored
        ),
        30,
        "the second failure recorded as Ignored",
    )
    assert service.terminate() == 0
    events = store.read_stream(job.stream("E-11"))
    assert [e.type for e in events] == abandoned_and_ignored
    capsys.readouterr()
    assert main(["retry", retried, "--force", *uri, "--json"]) == 0  # parked again: retried
    request = json.loads(capsys.readouterr().out)
    assert request["command_id"] == retried and request["request_id"]
    assert main(["retry", sent["E-00"], *uri]) == 1
    assert "is not parked" in capsys.readouterr().err


@pytest.mark.slow
def test_a_timer_due_while_the_service_is_down_fires_once_after_restart(
    chores: tuple[SqliteEventStore, ServiceProcess, Path],
) -> None:
    store, service, _ = chores
    service.start()
    chores_app.publish(store, RemindMe(reminder_id="R-1", seconds=2.0), "reminders")
    stream = reminder.stream("R-1")
    wait_until(
        lambda: service.check_alive() or len(store.read_stream(stream)) == 4,
        20,
        "the Scheduled and Replied events recorded",
    )
    assert service.terminate(signal.SIGINT) == 0
    scheduled = store.read_stream(stream)[2]
    assert scheduled.type == "Scheduled:ptest.Reminded"
    assert len(store.read_stream(stream)) == 4, "the timer fired before the service stopped"
    recorded = json.loads(scheduled.metadata)["recorded_at"]
    due = datetime.fromisoformat(recorded) + timedelta(seconds=2)

    # Down until the timer is due: the wall clock is the condition.
    wait_until(lambda: _now() > due, 10, "the timer's due time to pass")
    assert not store.read_stream(f"timer-{scheduled.id}")
    service.start()
    wait_until(
        lambda: service.check_alive() or completed(store, chores_app) == 1,
        20,
        "the reminder completed after the restart",
    )
    assert service.terminate() == 0
    assert [e.type for e in store.read_stream(stream)] == REMINDER
    fired = store.read_stream(f"timer-{scheduled.id}")
    assert [e.type for e in fired] == ["ptest.Reminded"]
    assert json.loads(store.read_stream(stream)[4].metadata)["causation_id"] == str(fired[0].id)
    assert any("fired 1 timer(s)" in line for line in service.log_lines("timers"))


def _now() -> datetime:
    return datetime.now(UTC)
