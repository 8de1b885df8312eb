"""``decider reset`` as an operator runs it: on an app that ran partitioned it moves every
partition's checkpoint (or ``--partition N``'s), says which, and says so when it changed
nothing; a running service is refused before any question is asked."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from pathlib import Path

import pytest

from decider.processors import Service
from decider.processors.app.streams import workflow_processor_name
from decider.processors.cli import main
from decider.processors.group.membership import PartitionGroup
from decider.processors.group.partitions import checkpoint_name
from decider.processors.operate.operations import beat
from decider.stores.sqlite import SqliteEventStore
from samples.traffic_fine.app import REPORTS_STREAM, make_app
from samples.traffic_fine.workflow import workflow
from tests.processors.test_proc_traffic_fine import all_completed, check_exactly_once, report
from tests.support.partitions import member

SPEC = "samples.traffic_fine.app:app"
PROCESSOR = f"workflow.{workflow.name}"
N = 10


def run_partitioned(db: Path) -> None:
    """Run the app in a group of one until the N reports completed and it is idle."""
    app = make_app()
    with contextlib.closing(SqliteEventStore(db)) as store:
        group = PartitionGroup(store, app, owner="solo", ttl=30)
        with member(Service(app, store, group=group)) as service:
            assert service.wait_until(lambda: all_completed(store, app, N), 30)
            assert service.wait_idle(30)
        check_exactly_once(store, N)


def decider(
    capsys: pytest.CaptureFixture[str], db: Path, *args: str, stdin: str = ""
) -> tuple[int, str, str]:
    """``decider ARGS --app ... --store ...`` in-process: status, stdout, stderr."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO(stdin))
        code = main([*args, "--app", SPEC, "--store", f"sqlite:///{db}"])
    out, err = capsys.readouterr()
    return code, out, err


def test_reset_of_a_partitioned_app_moves_every_partition_and_the_next_run_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "events.db"
    app = make_app()
    with contextlib.closing(SqliteEventStore(db)) as store:
        app.publish_many(store, [report(i) for i in range(N)], REPORTS_STREAM)
    run_partitioned(db)

    code, out, err = decider(capsys, db, "reset", PROCESSOR, "--to", "0", "--yes")
    assert code == 0, err
    name = workflow_processor_name(app.name, workflow.name)
    lines = out.splitlines()
    # Its own checkpoint (unused so far: it never ran unpartitioned) and all 16 partitions'.
    assert lines[0] == f"{name}: checkpoint - -> 0"
    assert len(lines) == 17
    assert all(line.endswith(" -> 0") and "checkpoint - " not in line for line in lines[1:])
    assert lines[1].startswith(f"{checkpoint_name(name, 0)}: checkpoint ")
    with contextlib.closing(SqliteEventStore(db)) as store:
        assert {store.load_checkpoint(checkpoint_name(name, p)) for p in range(16)} == {0}

    # A second reset to the same place changes nothing, and says so.
    code, out, err = decider(capsys, db, "reset", PROCESSOR, "--to", "0", "--yes")
    assert (code, out) == (1, "")
    assert err == (
        f"decider: error: nothing changed: {name} already resumes after position 0 "
        "in all 16 partitions\n"
    )

    # The next run reads every input again (deduplicated: nothing is done twice).
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="decider.processors.engine.base"):
        run_partitioned(db)
    assert f"{name} starting after position 0" in caplog.messages

    # One partition: only its checkpoint moves; JSON says what moved.
    code, out, err = decider(
        capsys, db, "reset", PROCESSOR, "--to", "0", "--partition", "3", "--yes", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["partitions"] == 16 and doc["partition"] == 3
    [moved] = doc["moved"]
    assert moved["checkpoint"] == checkpoint_name(name, 3) and moved["position"] == 0
    assert moved["previous"] > 0
    code, out, err = decider(capsys, db, "reset", PROCESSOR, "--to", "0", "--partition", "16")
    assert code == 1
    assert err == (
        "decider: error: no partition 16: app 'traffic-fines' ran in 16 partitions (0-15) "
        "on this store\n"
    )


def test_reset_of_an_app_that_never_ran_partitioned_moves_its_one_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "events.db"
    app = make_app()
    with contextlib.closing(SqliteEventStore(db)) as store:
        app.publish_many(store, [report(i) for i in range(3)], REPORTS_STREAM)
        with Service(app, store) as service:
            assert service.wait_until(lambda: all_completed(store, app, 3), 30)
            assert service.wait_idle(30)
    code, out, err = decider(capsys, db, "reset", "timers", "--to", "0", "--yes")
    assert code == 0, err
    [line] = out.splitlines()
    assert line.startswith("traffic-fines.timers: checkpoint ") and line.endswith(" -> 0")
    code, out, err = decider(capsys, db, "reset", "timers", "--to", "0", "--partition", "0")
    assert code == 1
    assert "no partition 0: app 'traffic-fines' never ran partitioned on this store" in err


def test_reset_refuses_a_running_service_before_asking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "events.db"
    app = make_app()
    with contextlib.closing(SqliteEventStore(db)) as store:
        store.save_checkpoint(workflow_processor_name(app.name, workflow.name), 5)
        beat(store, app)  # a service is alive
    code, out, err = decider(capsys, db, "reset", PROCESSOR, "--to", "0", stdin="y\n")
    assert code == 1 and out == ""
    assert "[y/N]" not in err
    assert err.startswith("decider: error: a service of app 'traffic-fines' is running")
    with contextlib.closing(SqliteEventStore(db)) as store:
        assert store.load_checkpoint(workflow_processor_name(app.name, workflow.name)) == 5
