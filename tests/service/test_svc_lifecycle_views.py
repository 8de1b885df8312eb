"""Failed and cancelled instances show as such in every read-side view: ``status``,
``decider status``/``list --status``/``show``, and the console's instance list."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from decider import (
    Began,
    Cancelled,
    Completed,
    Failed,
    InitiatedBy,
    Lifecycle,
    Metadata,
    WorkflowEvent,
    event_id,
)
from decider.processors import App, status
from decider.processors.cli import main
from decider.processors.console.data import list_instances as console_instances
from decider.stores.protocol import NO_STREAM, NewEvent
from decider.stores.sqlite import SqliteEventStore
from tests.support.apps import Added, Closed, tally, tally_route

views = App("svc-views")
views.workflow(
    tally, inputs={Added: tally_route, Closed: tally_route}, progress_within=timedelta(minutes=5)
)
SPEC = f"{__name__}:views"
ENDINGS: dict[str, WorkflowEvent[Any, Any] | None] = {
    "t-run": None,
    "t-done": Completed(),
    "t-failed": Failed("the payment provider is gone"),
    "t-cancelled": Cancelled("the customer changed their mind"),
}
EXPECTED = {
    "Tally-t-run": Lifecycle.RUNNING,
    "Tally-t-done": Lifecycle.COMPLETED,
    "Tally-t-failed": Lifecycle.FAILED,
    "Tally-t-cancelled": Lifecycle.CANCELLED,
}


@pytest.fixture
def uri(tmp_path: Path) -> str:
    """An SQLite store with one instance in each status, written as the processors write."""
    path = tmp_path / "events.db"
    store = SqliteEventStore(str(path))
    for instance_id, ending in ENDINGS.items():
        stream = f"Tally-{instance_id}"
        events: list[WorkflowEvent[Any, Any]] = [
            Began(),
            InitiatedBy(Added(tally_id=instance_id, amount=1)),
        ]
        if ending is not None:
            events.append(ending)
        new = []
        for index, event in enumerate(events):
            type_name, data = views.codec.encode_event(event)
            id_ = event_id(stream, "test", index)
            metadata = views.codec.encode_metadata(Metadata(message_id=str(id_)))
            new.append(NewEvent(id_, type_name, data, metadata))
        store.append(stream, new, NO_STREAM)
    store.close()
    return f"sqlite:///{path}"


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main([*argv, "--app", SPEC, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_status_reads_every_terminal_state(uri: str) -> None:
    store = SqliteEventStore(uri.removeprefix("sqlite:///"))
    try:
        assert {i.stream: i.status for i in status(store, views)} == EXPECTED
        rows = console_instances(store, views)
        assert {r.stream: r.status for r in rows.rows} == EXPECTED
        for lifecycle in (Lifecycle.FAILED, Lifecycle.CANCELLED):
            page = console_instances(store, views, status_value=lifecycle.value)
            assert [r.stream for r in page.rows] == [
                s for s, lc in EXPECTED.items() if lc is lifecycle
            ]
        # Stuck as the service and `decider list --stuck` see it: running, with no event for
        # longer than the workflow's progress_within; an ended instance never is.
        soon = datetime.now(UTC) + timedelta(minutes=1)
        later = datetime.now(UTC) + timedelta(minutes=6)
        assert console_instances(store, views, stuck_only=True, now=soon).rows == []
        stuck = console_instances(store, views, stuck_only=True, now=later)
        assert [r.stream for r in stuck.rows] == ["Tally-t-run"]
        overridden = console_instances(
            store, views, stuck_only=True, stuck_after=timedelta(seconds=1), now=soon
        )
        assert [r.stream for r in overridden.rows] == ["Tally-t-run"]
    finally:
        store.close()


def test_the_cli_shows_failed_and_cancelled(uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--app", SPEC, "--store", uri]) == 0
    text = capsys.readouterr().out
    assert "  Tally: running 1, completed 1, failed 1, cancelled 1" in text
    assert "failed (1):\n  Tally-t-failed" in text
    assert "cancelled (1):\n  Tally-t-cancelled" in text
    document = _json(capsys, "status", "--store", uri)
    assert document["workflows"]["Tally"] == {
        "running": 1,
        "completed": 1,
        "failed": 1,
        "cancelled": 1,
    }
    for lifecycle in (Lifecycle.FAILED, Lifecycle.CANCELLED):
        listed = _json(capsys, "list", "--status", lifecycle.value, "--store", uri)
        assert [i["stream"] for i in listed["instances"]] == [
            s for s, lc in EXPECTED.items() if lc is lifecycle
        ]
    shown = _json(capsys, "show", "Tally-t-cancelled", "--store", uri)
    assert shown["status"] == "cancelled"
