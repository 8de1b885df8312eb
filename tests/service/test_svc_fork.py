"""``decider fork`` as an operator runs it, on SQLite, PostgreSQL and EventStoreDB (the test
server): the preview writes nothing, the fork repairs the instance, and a fork killed
(SIGKILL) at any point of its commit leaves, once run again, exactly one new generation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from decider import Lifecycle
from decider.processors import FakeClock, Service, show
from decider.stores.protocol import EventStore
from tests.support.fork_app import CALLS, Order, Poke, make_app
from tests.support.service import ROOT, decider_command, service_env
from tests.support.stores import events, instance_streams, types

WAIT = 30.0
FIXED = "tests.support.fork_app:fixed_app"
APP = "repair"  # the name of both apps in tests.support.fork_app


def env() -> dict[str, str]:
    """A process's environment, this checkout's ``decider`` first on its path."""
    found = service_env()
    found["PYTHONPATH"] = str(ROOT)
    return found


def decider(*args: str) -> subprocess.CompletedProcess[str]:
    """``decider ARGS`` as a user runs it."""
    return subprocess.run(
        [*decider_command(), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env(),
        timeout=120,
        check=False,
    )


def fork_cli(uri: str, stream: str, *options: str) -> subprocess.CompletedProcess[str]:
    result = decider(
        "fork", stream, "--at", "4", "--reason", "ship charged orders", "--app", FIXED,
        "--store", uri, *options,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result


def run_buggy(store: EventStore, *orders: str) -> None:
    """The orders through the buggy code, in this process: charged, then failed."""
    buggy = make_app(APP, repaired=False)
    CALLS.clear()
    with Service(buggy, store, clock=FakeClock()) as service:
        for order in orders:
            buggy.publish(store, Order(order_id=order, amount=5), "repair-inputs")
        assert service.wait_until(
            lambda: all(types(store, f"Repair-{o}")[-1:] == ["Failed"] for o in orders),
            WAIT,
        )
        assert service.wait_idle(WAIT)


def generations(store: EventStore, stream: str) -> list[str]:
    return sorted(s for s in instance_streams(store, stream) if s.startswith(f"{stream}~g"))


def test_preview_then_fork_then_the_fixed_service_completes_it(uri: str, store: EventStore) -> None:
    run_buggy(store, "c1")
    before = len(events(store))
    preview = fork_cli(uri, "Repair-c1", "--dry-run")
    assert preview.stdout.splitlines()[0] == "dry run: nothing is written"
    assert "#5 Sent:repair.Ship  (carried out anew)" in preview.stdout
    assert "Sent:repair.Charge  (reuses " in preview.stdout
    assert len(events(store)) == before
    done = json.loads(fork_cli(uri, "Repair-c1", "--json").stdout)
    assert done["generation"] == "Repair-c1~g2"
    assert done["anew"] == ["Sent:repair.Ship"]
    assert len(done["reused"]) == 2
    assert not done["already"]
    listed = json.loads(decider("list", "--app", FIXED, "--store", uri, "--json").stdout)
    forked = {i["stream"]: i["forked_to"] for i in listed["instances"]}
    assert forked == {"Repair-c1": "Repair-c1~g2", "Repair-c1~g2": None}
    text = decider("list", "--app", FIXED, "--store", uri).stdout.splitlines()
    (old,) = [line for line in text if line.startswith("Repair-c1 ")]
    assert old.split()[1] == "failed" and old.endswith("  forked to Repair-c1~g2"), old
    (new,) = [line for line in text if line.startswith("Repair-c1~g2 ")]
    assert new.split()[1] == "running" and "forked to" not in new, new
    shown = decider("show", "Repair-c1", "--app", FIXED, "--store", uri)
    assert "forked to: Repair-c1~g2" in shown.stdout, shown.stderr

    app = make_app(APP, repaired=True)
    with Service(app, store, clock=FakeClock()) as service:
        assert service.wait_until(
            lambda: types(store, "Repair-c1~g2")[-1] == "Received:repair.Shipped", WAIT
        )
        app.publish(store, Poke(order_id="c1"), "repair-inputs")
        assert service.wait_until(
            lambda: show(store, app, "Repair-c1~g2").status is Lifecycle.COMPLETED, WAIT
        )
        assert service.wait_idle(WAIT)
    assert (CALLS[APP, "charge"], CALLS[APP, "ship"]) == (1, 1)
    assert types(store, "Repair-c1")[-1] == "Cancelled"
    assert "Received:repair.Poke" not in types(store, "Repair-c1")


@pytest.mark.parametrize("point", ["before", "between", "after"])
def test_a_fork_killed_in_its_commit_leaves_one_new_generation_once_run_again(
    uri: str, store: EventStore, point: str
) -> None:
    run_buggy(store, "k1")
    crashed = subprocess.run(
        [sys.executable, "-m", "tests.support.fork_crash", uri, "Repair-k1", "4", point],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env(),
        timeout=120,
        check=False,
    )
    assert crashed.returncode == -9, crashed.stderr
    written = {"before": [], "between": ["Repair-k1~g2"], "after": ["Repair-k1~g2"]}[point]
    assert generations(store, "Repair-k1") == written
    assert (types(store, "Repair-k1")[-1] == "Cancelled") is (point == "after")

    again = fork_cli(uri, "Repair-k1")
    first_line = again.stdout.splitlines()[0]
    word = "was forked" if point == "after" else "forks"
    assert first_line.startswith(f"Repair-k1 {word} to Repair-k1~g2 at revision 4"), first_line
    once_more = fork_cli(uri, "Repair-k1")
    assert once_more.stdout.splitlines()[0].startswith("Repair-k1 was forked to Repair-k1~g2")
    assert generations(store, "Repair-k1") == ["Repair-k1~g2"]
    assert types(store, "Repair-k1").count("Cancelled") == 1
    assert len(types(store, "Repair-k1~g2")) == 6
