"""Several OS processes on one SQLite file: nothing lost, doubled or reordered."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

from stores import ANY, CaughtUp, RecordedEvent
from stores.contract import new_events, take
from stores.sqlite import SqliteEventStore

WORKER = Path(__file__).with_name("sqlite_worker.py")
ROOT = Path(__file__).resolve().parents[2]


def _start(db: Path, name: str, count: int) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), str(db), name, str(count)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert worker.stdout is not None
    assert worker.stdout.readline().strip() == "ready"
    return worker


def _finish(worker: subprocess.Popen[str]) -> dict[str, list[str]]:
    out, _ = worker.communicate(timeout=60)
    assert worker.returncode == 0, out
    written: dict[str, list[str]] = json.loads(out.strip().splitlines()[-1])
    return written


def test_two_processes_appending_to_one_file(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    SqliteEventStore(db).close()  # create the schema once, before the race
    workers = [_start(db, name, 300) for name in ("a", "b")]
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    results = [_finish(worker) for worker in workers]

    store = SqliteEventStore(db)
    try:
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
    finally:
        store.close()


def test_a_subscription_sees_another_process_append(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    store = SqliteEventStore(db, probe_interval=0.02)
    try:
        store.append("before", new_events(1), ANY)
        with store.subscribe() as subscription:
            assert isinstance(take(subscription, 2)[1], CaughtUp)
            worker = _start(db, "other", 3)
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
            written = _finish(worker)
            items = take(subscription, 3)
        ids = [str(i.id) for i in items if isinstance(i, RecordedEvent)]
        assert ids == [written["shared"][0], *written["own-other"]]
    finally:
        store.close()


def test_a_subscription_sees_another_store_object_append(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    reader, writer = SqliteEventStore(db), SqliteEventStore(db)
    try:
        with reader.subscribe() as subscription:
            assert take(subscription, 1) == [CaughtUp(position=None)]
            events = new_events(2)
            writer.append(f"s-{uuid.uuid4()}", events, ANY)
            items = take(subscription, 2)
        assert [i.id for i in items if isinstance(i, RecordedEvent)] == [e.id for e in events]
    finally:
        reader.close()
        writer.close()
