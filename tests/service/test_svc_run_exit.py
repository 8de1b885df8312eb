"""``decider run`` ends cleanly when a processor dies: one CRITICAL line, status 1, no
traceback of the service's own error (the cause is still logged by the service)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from decider import Metadata
from decider.processors import App
from decider.stores.sqlite import SqliteEventStore
from tests.support.apps import Added, tally
from tests.support.service import ROOT, decider_command, service_env


def _interrupting(message: Added, metadata: Metadata) -> str:
    """A route that lets a ``KeyboardInterrupt`` escape: the one thing that ends a thread."""
    raise KeyboardInterrupt


dying = App("svc-dying")
dying.workflow(tally, inputs={Added: _interrupting})
publisher = App("svc-dying")  # the same app as publishers see it: App.publish routes the input
publisher.workflow(tally, inputs={Added: lambda message, _: message.tally_id})


def test_run_exits_with_status_1_and_one_line_when_a_processor_dies(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    store = SqliteEventStore(str(path))
    publisher.publish(store, Added(tally_id="t", amount=1), "inputs")
    store.close()
    result = subprocess.run(
        [
            *decider_command(),
            "run",
            f"{__name__}:dying",
            "--store",
            f"sqlite:///{path}",
            "--log-format",
            "json",
        ],
        check=False,
        cwd=ROOT,
        env=service_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert "ProcessorDied" not in result.stderr  # caught, not a traceback
    last = json.loads(result.stderr.strip().splitlines()[-1])
    assert last["level"] == "CRITICAL"
    assert last["processor"] == "svc-dying.workflow.Tally"
    assert "ended unexpectedly" in last["message"] and "exiting with status 1" in last["message"]
