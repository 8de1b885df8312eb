"""``decider fork --workflow NAME --where ... --since ...`` as an operator runs it, on SQLite,
PostgreSQL and EventStoreDB (the test server): the preview writes nothing, the bulk fork forks
each failed instance where it first differs, a second run forks nothing and exits 1, and the
fixed service completes the forked instances without charging again."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from decider import Lifecycle
from decider.processors import FakeClock, Service, show
from decider.stores.protocol import EventStore
from decider.stores.uri import open_store
from tests.support.fork_app import CALLS, Poke, make_app, run_buggy
from tests.support.service import ROOT, decider_command, service_env
from tests.support.stores import events, types

WAIT = 30.0
FIXED = "tests.support.fork_app:fixed_app"
APP = "repair"  # the name of both apps in tests.support.fork_app


def decider(uri: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``decider ARGS --app <fixed app> --store URI`` as a user runs it."""
    env = service_env()
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [*decider_command(), *args, "--app", FIXED, "--store", uri],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )


def test_the_failed_instances_are_previewed_forked_once_and_completed(
    uri: str, store: EventStore
) -> None:
    CALLS.clear()
    run_buggy(store, APP, "m1")
    since = datetime.now(UTC).isoformat()
    run_buggy(store, APP, "m2", "m3")
    bulk = ("fork", "--workflow", "Repair", "--where", "failed", "--reason", "ship them")
    before = len(events(store))
    preview = decider(uri, *bulk, "--since", since, "--dry-run")
    assert preview.returncode == 0, preview.stderr
    lines = preview.stdout.splitlines()
    assert lines[0] == "dry run: nothing is written"
    assert lines[1].startswith("Repair-m2 (failed): would fork to Repair-m2~g2 at revision 4: ")
    assert "    #5 Sent:repair.Ship  (carried out anew)" in lines
    assert lines[-1] == "2 instance(s) selected: 2 would be forked, 0 not"
    assert len(events(store)) == before

    done = decider(uri, *bulk, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["selected"], report["forked"], report["dry_run"]) == (3, 3, False)
    assert [(i["stream"], i["at"], i["reused"], i["anew"]) for i in report["instances"]] == [
        (f"Repair-{o}", 4, 2, 1) for o in ("m1", "m2", "m3")
    ]
    assert report["instances"][0]["plan"]["generation"] == "Repair-m1~g2"

    again = decider(uri, *bulk)
    assert again.returncode == 1
    assert (
        again.stdout.splitlines()[0]
        == "Repair-m1 (failed): not forked: forked already, to Repair-m1~g2"
    )
    assert again.stderr == "decider: error: nothing was forked (3 instance(s) selected)\n"

    app = make_app(APP, repaired=True)
    orders = ("m1", "m2", "m3")
    with Service(app, store, clock=FakeClock()) as service:
        assert service.wait_until(
            lambda: all(
                types(store, f"Repair-{o}~g2")[-1] == "Received:repair.Shipped" for o in orders
            ),
            WAIT,
        )
        for order in orders:
            app.publish(store, Poke(order_id=order), "repair-inputs")
        assert service.wait_until(
            lambda: all(
                show(store, app, f"Repair-{o}~g2").status is Lifecycle.COMPLETED for o in orders
            ),
            WAIT,
        )
        assert service.wait_idle(WAIT)
    assert (CALLS[APP, "charge"], CALLS[APP, "ship"]) == (3, 3)


def test_bad_bulk_arguments_are_usage_errors(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'events.db'}"
    open_store(uri).close()
    cases = {
        ("fork", "--reason", "r"): "give STREAM and --at, or --workflow NAME",
        ("fork", "Repair-x", "--reason", "r"): "fork STREAM needs --at REVISION",
        ("fork", "Repair-x", "--at", "1", "--where", "failed", "--reason", "r"): "select",
        ("fork", "--workflow", "Repair", "--at", "4", "--reason", "r"): "--at goes with STREAM",
        ("fork", "--workflow", "Nope", "--reason", "r"): "no workflow 'Nope'",
        ("fork", "--workflow", "Repair", "--since", "yesterday", "--reason", "r"): "neither",
    }
    for args, said in cases.items():
        result = decider(uri, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert said in result.stderr, (args, result.stderr)
