"""The operator's commands through the console script, in subprocesses, on SQLite and
PostgreSQL: publish, list, show/status/parked --json, skipped, reset, cancel."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from decider import Lifecycle
from decider.processors.operate.listing import InstanceQuery, list_instances
from decider.processors.operate.operations import cancel_stream, heartbeat_name
from decider.processors.operate.skipped import list_skipped
from decider.stores.protocol import EventStore
from decider.stores.uri import open_store
from samples.traffic_fine.app import app as fines
from tests.support.ops_app import POISON_ENV, ops_app
from tests.support.postgres import PG_URI, fresh_schema
from tests.support.service import ROOT, ServiceProcess, decider_command, service_env
from tests.support.waiting import wait_until

FINES = "samples.traffic_fine:app"
OPS = "tests.support.ops_app:ops_app"
SPEEDING = {"police_report_id": "PR-1", "offense": {"maximum_speed": "50", "measured_speed": "90"}}
PARKING = {"police_report_id": "PR-2", "offense": {"location": "Meir"}}
FINE_TYPES = [
    "Began",
    "InitiatedBy:fines.PoliceReportPublished",
    "Sent:fines.GenerateTrafficFineSystemNumber",
    "Received:fines.TrafficFineSystemNumberGenerated",
    "Sent:fines.GenerateTrafficFineManualIdentificationCode",
    "Received:fines.TrafficFineManualIdentificationCodeGenerated",
    "Sent:fines.IssueTrafficFine",
    "Completed",
]


@pytest.fixture(params=["sqlite", "postgres"])
def uri(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store that does not exist yet: an SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'events.db'}"
    else:
        with fresh_schema() as schema:
            yield f"{PG_URI}?schema={schema}"


def decider(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``decider ARGS`` as a user runs it; its status, stdout and stderr."""
    return subprocess.run(
        [*decider_command(), *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env or service_env(),
        timeout=60,
        check=False,
    )


def decider_json(*args: str, stdin: str | None = None) -> Any:
    """``decider ARGS --json``: must succeed, and print one JSON document."""
    result = decider(*args, "--json", stdin=stdin)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def fail(*args: str, stdin: str | None = None) -> tuple[int, str]:
    """``decider ARGS`` that must fail: its status and its one error line."""
    result = decider(*args, stdin=stdin)
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("decider: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return result.returncode, lines[-1]


@pytest.fixture
def store(uri: str) -> Iterator[EventStore]:
    opened = open_store(uri)
    try:
        yield opened
    finally:
        opened.close()


def service(app_spec: str, uri: str, tmp_path: Path, **env: str) -> ServiceProcess:
    environment = service_env()
    environment.update(env)
    return ServiceProcess(app_spec, uri, tmp_path / "service.log", environment)


def last_run(running: ServiceProcess) -> str:
    """The log of the service process's latest run."""
    return running.log.read_text().rpartition("===== run")[2]


def test_publish_run_status_show_on_a_fresh_store(uri: str, tmp_path: Path) -> None:
    at = ["--app", FINES, "--store", uri]
    first = decider_json(
        "publish", "fines.PoliceReportPublished", json.dumps(SPEEDING), "--message-id", "m-1", *at
    )
    assert first == {
        "message_id": "m-1",
        "type": "fines.PoliceReportPublished",
        "stream": "inputs-traffic-fines",
    }
    again = decider_json(
        "publish", "fines.PoliceReportPublished", json.dumps(SPEEDING), "--message-id", "m-1", *at
    )
    assert again == first
    piped = decider_json(
        "publish", "fines.PoliceReportPublished", *at, "--correlation-id", "c-9",
        stdin=json.dumps(PARKING),
    )  # fmt: skip
    assert piped["message_id"] != "m-1"
    store = open_store(uri)
    running = service(FINES, uri, tmp_path).start()
    try:
        inputs = store.read_stream("inputs-traffic-fines")
        assert [json.loads(e.metadata)["message_id"] for e in inputs] == [
            "m-1",
            piped["message_id"],
        ]
        assert json.loads(inputs[1].metadata)["correlation_id"] == "c-9"

        def done() -> bool:
            running.check_alive()
            page = list_instances(
                store, fines, InstanceQuery(statuses=frozenset({Lifecycle.COMPLETED}))
            )
            return len(page.instances) == 2 and len(store.read_stream("fines-issued")) == 1

        wait_until(done, 60, "both reports' workflows to complete")
        assert running.terminate(signal.SIGTERM) == 0
    finally:
        running.cleanup()
        store.close()

    status = decider_json("status", *at)
    assert status["workflows"] == {"IssueTrafficFineForSpeedingViolation": {"completed": 2}}
    assert status["parked"] == []
    shown = decider_json("show", "IssueTrafficFineForSpeedingViolation-PR-1", *at)
    assert shown["status"] == "completed"
    assert [e["type"] for e in shown["events"]] == FINE_TYPES
    assert shown["events"][1]["data"] == SPEEDING
    assert shown["events"][1]["metadata"]["causation_id"] == "m-1"
    assert decider_json("parked", *at) == {"parked": []}

    page1 = decider_json("list", "--status", "completed", "--limit", "1", *at)
    assert [i["instance_id"] for i in page1["instances"]] == ["PR-1"]
    assert page1["next_after"] == page1["instances"][0]["first_position"]
    page2 = decider_json("list", "--limit", "1", "--after", str(page1["next_after"]), *at)
    assert [i["instance_id"] for i in page2["instances"]] == ["PR-2"]
    assert page2["next_after"] is None
    assert page2["instances"][0]["events"] == 3
    assert decider_json("list", "--status", "running", *at)["instances"] == []
    assert decider_json("list", "--started-before", "1h", *at)["instances"] == []
    assert len(decider_json("list", "--updated-after", "1h", *at)["instances"]) == 2
    text = decider("list", *at).stdout.splitlines()
    assert text[0].startswith("IssueTrafficFineForSpeedingViolation-PR-1  completed  events=8")

    code, error = fail("publish", "fines.Nope", "{}", *at)
    assert code == 2 and "no workflow of app 'traffic-fines' takes 'fines.Nope'" in error
    code, error = fail("publish", "fines.PoliceReportPublished", '{"x": 1}', *at)
    assert code == 2 and "cannot decode the message" in error
    code, error = fail("publish", "fines.PoliceReportPublished", "{}", "--stream", "decider-x", *at)
    assert code == 2 and "belongs to a workflow instance or to the processors" in error
    code, error = fail("list", "--stuck", "soon", *at)
    assert code == 2 and "'soon' is not a duration" in error


@pytest.mark.slow
def test_stuck_cancel_skipped_redrive_and_reset(
    uri: str, store: EventStore, tmp_path: Path
) -> None:
    at = ["--app", OPS, "--store", uri]
    for ticket_id, kind in (("t1", "plain"), ("t2", "poison")):
        decider_json(
            "publish", "ops.TicketOpened", json.dumps({"ticket_id": ticket_id, "kind": kind}), *at
        )
    decider_json("publish", "ops.ChoreAdded", '{"chore_id": "c1"}', *at)
    running = service(OPS, uri, tmp_path, **{POISON_ENV: "1"}).start()
    try:

        def handled() -> bool:
            running.check_alive()
            instances = list_instances(store, ops_app, InstanceQuery()).instances
            return len(instances) == 2 and len(list_skipped(store, ops_app)) == 1

        wait_until(handled, 60, "t1 and c1 to begin and t2 to be skipped")
        # Stuck: Ticket expects progress within 1 ms; Chore has no expectation.
        stuck = decider_json("list", "--stuck", *at)["instances"]
        assert [(i["stream"], i["stuck"]) for i in stuck] == [("Ticket-t1", True)]
        assert decider_json("list", "--stuck", "1h", *at)["instances"] == []
        over = decider_json("list", "--stuck", "0s", *at)["instances"]
        assert sorted(i["stream"] for i in over) == ["Chore-c1", "Ticket-t1"]
        assert "STUCK" in decider("list", "--workflow", "Ticket", *at).stdout
        # Reset is refused while the service runs.
        code, error = fail("reset", "workflow.Ticket", "--to", "0", "--yes", *at)
        assert code == 1 and "a service of app 'svc-ops' is running" in error
        # Cancel: recorded once, as an input for the instance.
        request = decider_json("cancel", "Ticket-t1", "--reason", "customer left", *at)
        assert request["already_requested"] is False
        repeat = decider_json("cancel", "Ticket-t1", "--reason", "again", *at)
        assert repeat == {**request, "already_requested": True}
        [recorded] = store.read_stream(cancel_stream("Ticket-t1"))
        assert recorded.type == "decider.CancelRequested"
        assert json.loads(recorded.data) == {"reason": "customer left"}
        assert json.loads(recorded.metadata)["correlation_id"] == "t1"
        code, error = fail("cancel", "Ticket-none", "--reason", "x", *at)
        assert code == 1 and "has no events" in error
        # The skipped input, listed and shown.
        [skip] = decider_json("skipped", *at)["skipped"]
        assert skip["processor"] == "svc-ops.workflow.Ticket"
        assert skip["redriven_as"] is None and "is poison" in skip["reason"]
        shown = decider_json("skipped", "show", skip["skip_id"][:8], *at)
        assert json.loads(shown["event"]["data"]) == {"ticket_id": "t2", "kind": "poison"}
        assert running.terminate(signal.SIGTERM) == 0
    finally:
        running.cleanup()

    # Fixed and re-driven: the copy is handled once, however often it is re-driven.
    [redriven] = decider_json("skipped", "redrive", "--all", *at)["redriven"]
    assert redriven["how"] == "copy" and redriven["stream"] == skip["stream"]
    assert decider_json("skipped", "redrive", skip["skip_id"], *at)["redriven"] == [redriven]
    assert decider_json("skipped", "redrive", "--all", *at)["redriven"] == []
    assert len(store.read_stream(skip["stream"])) == 4  # three published, one copy
    del running.env[POISON_ENV]  # the fixed deployment
    running.start()
    try:

        def redone() -> bool:
            running.check_alive()
            return len(list_instances(store, ops_app, InstanceQuery()).instances) == 3

        wait_until(redone, 60, "the re-driven ticket to begin")
        assert running.terminate(signal.SIGTERM) == 0
    finally:
        running.cleanup()
    [after] = decider_json("skipped", *at)["skipped"]
    assert after["redriven_as"] == redriven["event_id"]
    assert decider_json("skipped", "list", "--pending", *at)["skipped"] == []

    # Reset to before the first event, then run again: nothing is handled twice.
    before = datetime(2000, 1, 1, tzinfo=UTC).isoformat()
    assert fail("reset", "workflow.Ticket", "--to-time", before, *at, stdin="n\n")[0] == 1
    reset = decider_json("reset", "workflow.Ticket", "--to-time", before, "--yes", *at)
    assert reset["processor"] == "svc-ops.workflow.Ticket"
    assert reset["position"] == 0 and reset["previous"] > 0
    assert store.load_checkpoint("svc-ops.workflow.Ticket") == 0  # type: ignore[attr-defined]
    assert store.load_checkpoint(heartbeat_name(ops_app)) == 0  # type: ignore[attr-defined]
    counts = {i["stream"]: i["events"] for i in decider_json("list", *at)["instances"]}
    running.start()
    try:

        def caught_up() -> bool:
            running.check_alive()
            return "svc-ops.workflow.Ticket caught up" in last_run(running)

        wait_until(caught_up, 60, "the reset processor to catch up")
        assert "svc-ops.workflow.Ticket starting after position 0" in last_run(running)
        assert running.terminate(signal.SIGTERM) == 0
    finally:
        running.cleanup()
    assert {i["stream"]: i["events"] for i in decider_json("list", *at)["instances"]} == counts
    confirmed = decider("reset", "commands", "--to", "1", *at, stdin="y\n")
    assert confirmed.returncode == 0, confirmed.stderr
    assert confirmed.stdout.strip().endswith("-> 1")
