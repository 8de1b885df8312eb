"""Several OS processes on one PostgreSQL schema: nothing lost, doubled or reordered."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from stores import ANY, CaughtUp, RecordedEvent
from stores.contract import new_events, take
from stores.postgres import PostgresEventStore
from tests.pg_support import PG_URI, fresh_store

WORKER = Path(__file__).with_name("postgres_worker.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store() -> Iterator[PostgresEventStore]:
    with fresh_store() as opened:  # creates the schema once, before any race
        yield opened


def _start(schema: str, name: str, count: int) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), PG_URI, schema, name, str(count)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert worker.stdout is not None
    assert worker.stdout.readline().strip() == "ready"
    return worker


def _go(worker: subprocess.Popen[str]) -> None:
    assert worker.stdin is not None
    worker.stdin.write("go\n")
    worker.stdin.flush()


def _finish(worker: subprocess.Popen[str]) -> dict[str, list[str]]:
    out, _ = worker.communicate(timeout=120)
    assert worker.returncode == 0, out
    written: dict[str, list[str]] = json.loads(out.strip().splitlines()[-1])
    return written


def test_two_processes_appending_to_one_schema(store: PostgresEventStore) -> None:
    workers = [_start(store.schema, name, 300) for name in ("a", "b")]
    for worker in workers:
        _go(worker)
    results = [_finish(worker) for worker in workers]

    log = store.read_all()
    positions = [e.position for e in log]
    assert all(a < b for a, b in itertools.pairwise(positions))
    counts = Counter(str(e.id) for e in log)
    assert len(log) == 600 and set(counts.values()) == {1}
    for name, written in zip(("a", "b"), results, strict=True):
        own = store.read_stream(f"own-{name}")
        assert [str(e.id) for e in own] == written[f"own-{name}"]
        assert [e.revision for e in own] == list(range(200))
    shared = store.read_stream("shared")
    assert [e.revision for e in shared] == list(range(200))
    for written in results:
        mine = set(written["shared"])
        assert [str(e.id) for e in shared if str(e.id) in mine] == written["shared"]
    assert {str(e.id) for e in shared} == {i for r in results for i in r["shared"]}


def test_a_subscription_sees_another_process_append(store: PostgresEventStore) -> None:
    store.append("before", new_events(1), ANY)
    with store.subscribe() as subscription:
        assert isinstance(take(subscription, 2)[1], CaughtUp)
        worker = _start(store.schema, "other", 3)
        _go(worker)
        written = _finish(worker)
        items = take(subscription, 3)
    ids = [str(i.id) for i in items if isinstance(i, RecordedEvent)]
    assert ids == [written["shared"][0], *written["own-other"]]


def test_a_live_subscription_reads_every_event_of_concurrent_writers_in_order(
    store: PostgresEventStore,
) -> None:
    """Catch-up readers never skip an event whose transaction committed late."""
    with store.subscribe() as subscription:
        assert take(subscription, 1) == [CaughtUp(position=None)]
        workers = [_start(store.schema, name, 150) for name in ("a", "b")]
        for worker in workers:
            _go(worker)
        received = take(subscription, 300, timeout=120)
        for worker in workers:
            _finish(worker)
    assert received == store.read_all()
