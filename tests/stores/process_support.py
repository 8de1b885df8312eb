"""Worker processes that append to one store at once, and the checks of what they wrote.

Each worker (``store_worker.py``) opens the store by URI, appends to its own stream and to a
shared one, and reports the ids it wrote; :func:`check_two_writers` checks the log against
those reports: nothing lost, doubled or reordered.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from decider.stores.contract import new_events, take
from decider.stores.protocol import ANY, CaughtUp, EventStore, RecordedEvent

WORKER = Path(__file__).with_name("store_worker.py")
ROOT = Path(__file__).resolve().parents[2]

Written = dict[str, list[str]]
"""A worker's report: stream name -> the ids it wrote there, in order."""


def start_worker(uri: str, name: str, count: int) -> subprocess.Popen[str]:
    """A worker process on ``uri``, opened and waiting for :func:`go`."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), uri, name, str(count)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert worker.stdout is not None
    assert worker.stdout.readline().strip() == "ready"
    return worker


def go(*workers: subprocess.Popen[str]) -> None:
    """Let the workers start appending."""
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()


def finish(worker: subprocess.Popen[str]) -> Written:
    """Wait for ``worker`` to end well; its report."""
    out, _ = worker.communicate(timeout=120)
    assert worker.returncode == 0, out
    written: Written = json.loads(out.strip().splitlines()[-1])
    return written


def check_two_writers(store: EventStore, results: list[Written], each: int) -> None:
    """Workers ``a`` and ``b`` made ``each`` appends each: the log holds every event once, in
    strictly increasing positions, and every stream holds its writer's events in order."""
    log = store.read_all()
    positions = [e.position for e in log]
    assert all(a < b for a, b in itertools.pairwise(positions))
    counts = Counter(str(e.id) for e in log)
    assert len(log) == 2 * each and set(counts.values()) == {1}
    own_count = each - (each + 2) // 3
    for name, written in zip(("a", "b"), results, strict=True):
        own = store.read_stream(f"own-{name}")
        assert [str(e.id) for e in own] == written[f"own-{name}"]
        assert [e.revision for e in own] == list(range(own_count))
    shared = store.read_stream("shared")
    assert [e.revision for e in shared] == list(range(2 * (each - own_count)))
    for written in results:
        mine = set(written["shared"])
        assert [str(e.id) for e in shared if str(e.id) in mine] == written["shared"]
    assert {str(e.id) for e in shared} == {i for r in results for i in r["shared"]}


def check_a_subscription_sees_another_process(store: EventStore, uri: str) -> None:
    """A caught-up subscription of ``store`` receives, in order, what a worker process that
    opened the same store by ``uri`` appends."""
    store.append("before", new_events(1), ANY)
    subscription = store.subscribe()
    try:
        assert isinstance(take(subscription, 2)[1], CaughtUp)
        worker = start_worker(uri, "other", 3)
        go(worker)
        written = finish(worker)
        items = take(subscription, 3)
    finally:
        subscription.stop()
    ids = [str(i.id) for i in items if isinstance(i, RecordedEvent)]
    assert ids == [written["shared"][0], *written["own-other"]]
