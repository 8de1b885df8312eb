"""Several OS processes on one SQLite file: nothing lost, doubled or reordered."""

from __future__ import annotations

import uuid
from pathlib import Path

from decider.stores import ANY, CaughtUp, RecordedEvent
from decider.stores.contract import new_events, take
from decider.stores.sqlite import SqliteEventStore
from tests.stores.process_support import (
    check_a_subscription_sees_another_process,
    check_two_writers,
    finish,
    go,
    start_worker,
)


def _uri(db: Path) -> str:
    return f"sqlite:///{db}?synchronous=NORMAL"


def test_two_processes_appending_to_one_file(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    SqliteEventStore(db).close()  # create the schema once, before the race
    workers = [start_worker(_uri(db), name, 300) for name in ("a", "b")]
    go(*workers)
    results = [finish(worker) for worker in workers]
    store = SqliteEventStore(db)
    try:
        check_two_writers(store, results, 300)
    finally:
        store.close()


def test_a_subscription_sees_another_process_append(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    store = SqliteEventStore(db, probe_interval=0.02)
    try:
        check_a_subscription_sees_another_process(store, _uri(db))
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
