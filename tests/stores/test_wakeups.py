"""Subscriptions are woken by what they wait for, not by a timer.

- In a process, a commit wakes only the subscriptions whose filter passes one of its events; a
  commit of others' events (or of checkpoints and leases) costs them no read.
- Across processes on SQLite, the writer's doorbell wakes the reader at once: these tests give
  the reader a probe of an hour, so only the doorbell can deliver within the test's patience.
  The reader's look sums up what was written by type and partition: a commit of partitions a
  subscription does not hold does not make it read.
- That look reads the gists the writers kept with their commits (a few rows, however many
  events were written); rows no gist covers (plain ``sqlite3``) are summed up in the database.
- SQLite's probe reads the log only when a row there was not announced: this process's own
  commits cost a subscription that passes none of their events no read, and a writer that rings
  no bell is still found.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from decider.stores import (
    ALL,
    ANY,
    NO_STREAM,
    CaughtUp,
    Filter,
    Partitions,
    RecordedEvent,
    StreamAppend,
)
from decider.stores.contract import new_events, take
from decider.stores.memory import MemoryEventStore
from decider.stores.sqlite import SqliteEventStore
from decider.stores.sqlite import _sql as sql
from decider.stores.sqlite import store as sqlite_store
from decider.stores.sqlite._watch import BELLS, GIST_IN_HEAD, HEAD, Doorbell, Rung, bell_path
from decider.stores.subscription import CatchUpSubscription
from tests.stores.process_support import ROOT

HOUR = 3600.0


def _counted(
    store: MemoryEventStore, filter: Filter, reads: list[int | None]
) -> CatchUpSubscription:
    def read_page(after: int | None, limit: int) -> list[RecordedEvent]:
        reads.append(after)
        return store.read_all(after, limit, filter)

    def head() -> int | None:
        log = store.read_all()
        return log[-1].position if log else None

    return CatchUpSubscription(
        read_page=read_page, head=head, notifier=store._notifier, filter=filter
    )


def _reads_of(
    store: SqliteEventStore, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[int | None, Filter]]:
    """Each ``read_all`` call made on ``store`` from now on: its position and its filter."""
    reads: list[tuple[int | None, Filter]] = []
    read_all = store.read_all

    def counted(
        after: int | None = None, limit: int | None = None, filter: Filter = ALL
    ) -> list[RecordedEvent]:
        reads.append((after, filter))
        return read_all(after, limit, filter)

    monkeypatch.setattr(store, "read_all", counted)
    return reads


@attrs.frozen
class _Probing:
    """A store that probes every 10 ms, its ``read_all`` calls (:func:`_reads_of`) and a
    subscription to the ``Wanted`` events: what the probe tests watch."""

    path: Path
    store: SqliteEventStore
    reads: list[tuple[int | None, Filter]]
    sub: CatchUpSubscription


@pytest.fixture
def probing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Probing]:
    path = tmp_path / "events.db"
    store = SqliteEventStore(path, probe_interval=0.01)
    reads = _reads_of(store, monkeypatch)
    sub = store.subscribe(None, Filter(event_types=("Wanted",)))
    try:
        yield _Probing(path, store, reads, sub)
    finally:
        sub.stop()
        store.close()


def test_a_commit_of_other_events_costs_a_subscription_no_read() -> None:
    store = MemoryEventStore()
    reads: list[int | None] = []
    sub = _counted(store, Filter(event_types=("Wanted",)), reads)
    assert take(sub, 1) == [CaughtUp(position=None)]
    before = len(reads)
    store.append("other", new_events(3, "Unwanted"), NO_STREAM)
    store.append_batch([], checkpoints=[("someone", 3)])
    assert sub.poll(0) is None
    assert len(reads) == before, "a commit the filter rejects must not make it read the log"
    wanted = new_events(1, "Wanted")
    store.append("mine", wanted, NO_STREAM)
    [event] = take(sub, 1)
    assert isinstance(event, RecordedEvent) and event.id == wanted[0].id
    sub.stop()


def test_a_big_commit_wakes_only_the_subscriptions_that_read_one_of_its_events() -> None:
    """A commit of many events (matched type by type) is told to the subscriptions whose
    filter passes one of them, on its stream and type: not to one that reads none of its
    types, nor to one that reads its types on other streams."""
    store = MemoryEventStore()
    reads: dict[str, list[int | None]] = {"timers": [], "elsewhere": [], "orders": []}
    subs = {
        "timers": _counted(store, Filter(event_type_prefixes=("Scheduled:",)), reads["timers"]),
        "elsewhere": _counted(
            store,
            Filter(stream_prefixes=("payments-",), event_types=("Placed",)),
            reads["elsewhere"],
        ),
        "orders": _counted(
            store, Filter(stream_prefixes=("orders-",), event_types=("Shipped",)), reads["orders"]
        ),
    }
    for sub in subs.values():
        assert take(sub, 1) == [CaughtUp(position=None)]
    before = {name: len(r) for name, r in reads.items()}
    appends = [StreamAppend(f"orders-{i}", new_events(1, "Placed"), NO_STREAM) for i in range(200)]
    store.append_batch([*appends, StreamAppend("orders-x", new_events(1, "Shipped"), NO_STREAM)])
    assert subs["timers"].poll(0) is None
    assert subs["elsewhere"].poll(0) is None
    [shipped] = take(subs["orders"], 1)
    assert isinstance(shipped, RecordedEvent) and shipped.stream == "orders-x"
    assert len(reads["timers"]) == before["timers"], "none of the commit's types is its"
    assert len(reads["elsewhere"]) == before["elsewhere"], "its type, on streams it does not read"
    assert len(reads["orders"]) > before["orders"], "one event of the commit passes its filter"
    for sub in subs.values():
        sub.stop()


def test_a_commit_wakes_a_blocked_subscription_that_wants_it() -> None:
    store = MemoryEventStore()
    sub = store.subscribe(None, Filter(stream_prefixes=("orders-",)))
    assert take(sub, 1) == [CaughtUp(position=None)]
    got: list[object] = []
    done = threading.Event()

    def block() -> None:
        got.append(sub.poll(None))
        done.set()

    threading.Thread(target=block, daemon=True).start()
    store.append("payments-1", new_events(1), NO_STREAM)  # not its (the test above: no read)
    wanted = new_events(1)
    store.append("orders-1", wanted, NO_STREAM)
    assert done.wait(10), "the commit it wants did not wake it"
    assert [getattr(item, "id", None) for item in got] == [wanted[0].id]
    sub.stop()


_WRITER = """
import sys, uuid
from decider.stores import ANY, NewEvent
from decider.stores.sqlite import SqliteEventStore
from decider.stores.sqlite import _sql as sql
from decider.stores.sqlite import store as sqlite_store
from decider.stores.sqlite._watch import Doorbell
store = SqliteEventStore(sys.argv[1])
for line in sys.stdin:
    stream, *more = line.split()
    number = int(stream.split('-')[1])
    key = int(more[0]) if more else None
    count = int(more[1]) if len(more) > 1 else 1
    events = [
        NewEvent(uuid.UUID(int=number * 1000 + n), 'Rung', b'{}', partition_key=key)
        for n in range(count)
    ]
    store.append(stream, events, ANY)
    print('appended', flush=True)
"""


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[tuple[SqliteEventStore, subprocess.Popen[str]]]:
    path = tmp_path / "events.db"
    reader = SqliteEventStore(path, probe_interval=HOUR)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    process = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    yield reader, process
    assert process.stdin is not None
    process.stdin.close()
    process.wait(30)
    reader.close()


def _append_there(process: subprocess.Popen[str], stream: str) -> None:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(stream + "\n")
    process.stdin.flush()
    assert process.stdout.readline().strip() == "appended"


def test_another_process_s_append_wakes_a_sqlite_subscription_without_its_probe(
    writer: tuple[SqliteEventStore, subprocess.Popen[str]],
) -> None:
    reader, process = writer
    sub = reader.subscribe(None, Filter(stream_prefixes=("rung-",)))
    try:
        assert isinstance(take(sub, 1)[0], CaughtUp)
        for number in range(1, 4):
            _append_there(process, f"rung-{number}")
            # The probe would look again in an hour: only the doorbell delivers in time.
            [event] = take(sub, 1, timeout=10)
            assert isinstance(event, RecordedEvent) and event.stream == f"rung-{number}"
    finally:
        sub.stop()


def test_a_subscription_takes_only_what_it_wants_from_another_process(
    writer: tuple[SqliteEventStore, subprocess.Popen[str]],
) -> None:
    reader, process = writer
    sub = reader.subscribe(None, Filter(stream_prefixes=("wanted-",)))
    try:
        assert isinstance(take(sub, 1)[0], CaughtUp)
        _append_there(process, "other-1")
        _append_there(process, "wanted-2")
        [event] = take(sub, 1, timeout=10)
        assert isinstance(event, RecordedEvent) and event.stream == "wanted-2"
        assert reader.read_stream("other-1", 0, 10)  # it was written, and passed over
    finally:
        sub.stop()


def test_another_process_s_commit_of_partition_3_costs_a_holder_of_partition_5_no_read(
    writer: tuple[SqliteEventStore, subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, process = writer
    five = Filter(partitions=Partitions(count=8, held=frozenset({5}), unknown=False))
    reads = _reads_of(reader, monkeypatch)
    sub, everything = reader.subscribe(None, five), reader.subscribe(None)
    try:
        assert isinstance(take(sub, 1)[0], CaughtUp)
        assert isinstance(take(everything, 1)[0], CaughtUp)
        before = [f for _, f in reads].count(five)
        for number in range(1, 4):
            _append_there(process, f"three-{number} {3 + 8 * number}")
        _append_there(process, "burst-4 11 200")  # more rows than one look used to read
        # The unfiltered one was woken by the same looks, in the same pass.
        streams = [getattr(item, "stream", None) for item in take(everything, 203, timeout=10)]
        assert streams == ["three-1", "three-2", "three-3"] + ["burst-4"] * 200
        assert sub.poll(0) is None
        assert [f for _, f in reads].count(five) == before, (
            "commits of partition 3 made partition 5's read"
        )
        _append_there(process, "five-5 13")
        [event] = take(sub, 1, timeout=10)
        assert isinstance(event, RecordedEvent) and event.stream == "five-5"
    finally:
        sub.stop()
        everything.stop()


def _write_silently(path: Path, stream: str, event_type: str, key: int | None) -> None:
    """Append one event to ``stream`` as a writer that keeps no gist and rings no bell would
    (plain sqlite3): its data and metadata copied from the log's first row."""
    with contextlib.closing(sqlite3.connect(path)) as plain, plain:
        plain.execute(
            "INSERT INTO events (stream, revision, event_id, type, data, metadata,"
            " recorded_at, partition_key) SELECT ?, 0, randomblob(16), ?,"
            " data, metadata, recorded_at, ? FROM events WHERE position = 1",
            (stream, event_type, key),
        )


def _statements_of(store: SqliteEventStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each statement ``store`` runs through its one-statement queries from now on."""
    statements: list[str] = []
    query = store._query

    def counted(statement: str, params: tuple[object, ...]) -> list[Any]:
        statements.append(statement)
        return query(statement, params)

    monkeypatch.setattr(store, "_query", counted)
    return statements


def test_another_process_s_commits_are_summed_up_from_their_gists_not_their_rows(
    writer: tuple[SqliteEventStore, subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, process = writer
    sub = reader.subscribe(None, Filter(stream_prefixes=("rung-",)))
    try:
        assert isinstance(take(sub, 1)[0], CaughtUp)
        statements = _statements_of(reader, monkeypatch)
        for number in range(1, 4):
            _append_there(process, f"rung-{number} {number} 50")
            assert len(take(sub, 50, timeout=10)) == 50
        assert sql.GISTS_SINCE in statements
        assert sql.WRITTEN_BETWEEN not in statements, "the look read the commits' rows"
    finally:
        sub.stop()


def test_rows_no_gist_covers_are_summed_up_in_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "events.db"
    store = SqliteEventStore(path, probe_interval=HOUR)
    five = Filter(partitions=Partitions(count=8, held=frozenset({5}), unknown=False))
    sub = store.subscribe(None, five)
    try:
        store.append("first", new_events(1), NO_STREAM)
        assert isinstance(take(sub, 1)[0], CaughtUp)
        statements = _statements_of(store, monkeypatch)
        # A writer that keeps no gist (plain sqlite3), and a bell rung for it.
        _write_silently(path, "plain", store.read_stream("first")[0].type, 13)
        Doorbell(str(path)).ring()
        [event] = take(sub, 1, timeout=10)  # the probe would look in an hour
        assert isinstance(event, RecordedEvent) and event.stream == "plain"
        assert sql.WRITTEN_BETWEEN in statements
    finally:
        sub.stop()
        store.close()


def test_a_store_forgets_the_gists_no_look_reads_any_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "_KEEP_GISTS", 10)
    store = SqliteEventStore(tmp_path / "events.db", synchronous="OFF")
    try:
        for number in range(sqlite_store._PRUNE_GISTS_EVERY):
            store.append(f"s-{number}", new_events(1), NO_STREAM)
        kept = store._query("SELECT last FROM commit_gists ORDER BY last", ())
        assert [last for (last,) in kept] == list(range(55, 65))
    finally:
        store.close()


def test_a_probe_looks_at_rows_no_bell_announced_and_reads_only_what_it_wants(
    probing: _Probing,
) -> None:
    store, reads, sub = probing.store, probing.reads, probing.sub
    store.append("first", new_events(1, "Unwanted"), NO_STREAM)
    assert take(sub, 1) == [CaughtUp(position=1)]
    before = len(reads)
    for stream, event_type in (("silent-1", "Unwanted"), ("silent-2", "Wanted")):
        # A writer that rings no bell (plain sqlite3): only a probe finds its rows.
        _write_silently(probing.path, stream, event_type, None)
        if event_type == "Unwanted":
            assert sub.poll(0.3) is None  # about 30 probes
            assert len(reads) == before, "a probe read rows its subscription does not want"
    [event] = take(sub, 1, timeout=10)
    assert isinstance(event, RecordedEvent) and event.stream == "silent-2"
    assert [after for after, _ in reads[before:]] == [2], "one read, past the unwanted row"


def test_the_doorbell_is_beside_the_file_and_an_in_memory_store_has_none(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    store = SqliteEventStore(path)
    store.subscribe(None).stop()  # reading and listening make no bell...
    assert not (tmp_path / "events.db-bell").exists()
    store.append("s", new_events(1), ANY)  # ...the first commit does
    assert (tmp_path / "events.db-bell").exists()
    store.close()
    memory = SqliteEventStore(":memory:")
    memory.append("s", new_events(1), ANY)
    memory.close()


def test_a_sqlite_probe_rereads_no_row_announced_and_still_finds_a_silent_writer(
    probing: _Probing,
) -> None:
    store, reads, sub = probing.store, probing.reads, probing.sub
    assert take(sub, 1) == [CaughtUp(position=None)]
    store.append("other", new_events(3, "Unwanted"), NO_STREAM)
    before = len(reads)
    assert sub.poll(0.3) is None  # about 30 probes
    assert len(reads) == before, "a probe must not read rows this process announced"
    wanted = new_events(1, "Wanted")  # passed over unread, the rows before it stay so
    store.append("mine", wanted, NO_STREAM)
    [mine] = take(sub, 1, timeout=10)
    assert isinstance(mine, RecordedEvent) and mine.id == wanted[0].id
    assert [after for after, _ in reads[before:]] == [3], (
        "the read after the probes starts past the rows passed over"
    )
    # A writer that rings no bell (plain sqlite3): only the probe can find its row.
    _write_silently(probing.path, "silent", "Wanted", None)
    [event] = take(sub, 1, timeout=10)
    assert isinstance(event, RecordedEvent) and event.stream == "silent"


def test_a_holder_of_some_partitions_listens_to_their_keyed_bells_only(
    writer: tuple[SqliteEventStore, subprocess.Popen[str]],
) -> None:
    reader, process = writer
    five = Filter(partitions=Partitions(count=8, held=frozenset({5}), unknown=False))
    sub = reader.subscribe(None, five)
    try:
        assert reader._watch is not None
        keyed = {f"events.db-bell-{bell}".encode() for bell in range(5, BELLS, 8)}
        assert set(reader._watch._bells) == {b"events.db-bell", *keyed}
        assert isinstance(take(sub, 1)[0], CaughtUp)
        _append_there(process, "three-1 11")
        # The probe would look again in an hour: only the keyed bell delivers in time.
        _append_there(process, "five-2 13")
        [event] = take(sub, 1, timeout=10)
        assert isinstance(event, RecordedEvent) and event.stream == "five-2"
        everything = reader.subscribe(None)  # reads every partition: every bell
        assert set(reader._watch._bells) == {
            b"events.db-bell",
            *(f"events.db-bell-{bell}".encode() for bell in range(BELLS)),
        }
        everything.stop()
        assert set(reader._watch._bells) == {b"events.db-bell", *keyed}
    finally:
        sub.stop()


def test_a_process_s_own_keyed_commits_make_its_watch_look_at_nothing(
    writer: tuple[SqliteEventStore, subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, process = writer
    five = Filter(partitions=Partitions(count=8, held=frozenset({5}), unknown=False))
    sub = reader.subscribe(None, five)

    def append_mine(number: int) -> None:
        [new] = new_events(1)
        reader.append(f"mine-{number}", [attrs.evolve(new, partition_key=13)], NO_STREAM)
        assert len(take(sub, 1, timeout=10)) == 1

    try:
        assert isinstance(take(sub, 1)[0], CaughtUp)
        append_mine(0)  # makes bell 13 (a bell made is looked at once)
        _append_there(process, "theirs-1 13")
        assert len(take(sub, 1, timeout=10)) == 1
        statements = _statements_of(reader, monkeypatch)
        for number in range(1, 4):
            # Each rings bell 13, which this process listens to: the head file says the rows
            # rung for are this process's own, announced already.
            append_mine(number)
        # Another process's: announced from the head file's record of it (it begins where
        # the watch's announcements end), and read.
        _append_there(process, "theirs-4 13")
        [event] = take(sub, 1, timeout=10)
        assert isinstance(event, RecordedEvent) and event.stream == "theirs-4"
        assert statements.count(sql.GISTS_SINCE) == 0, "the watch queried"
    finally:
        sub.stop()


def test_the_head_file_keeps_the_record_of_the_commit_that_raised_it(tmp_path: Path) -> None:
    """Doorbell.rung: the head, with the record of the commit that raised it (the log's head
    before it, its gist); the head alone where an older decider wrote only the head, or where
    the gist was unknown or too long."""
    path = str(tmp_path / "events.db")
    bell = Doorbell(path)
    try:
        bell.ring([("s", "T", 3)], 12, 10, (0, '[["T"],[3],0]'))
        assert bell.rung() == Rung(12, 10, 0, '[["T"],[3],0]')
        bell.ring([("s", "T", 3)], 11, 10, (0, '[["U"],[3],0]'))  # never moves back
        assert bell.rung() == Rung(12, 10, 0, '[["T"],[3],0]')
        bell.ring([("s", "T", 3)], 14, 12, (0, "x" * (GIST_IN_HEAD + 1)))
        assert bell.rung() == Rung(14)
        bell.ring([("s", "T", 3)], 15, 14, (4, '[["T"],[3],0]'))
        with open(bell_path(path, HEAD), "r+b") as head:  # an older decider: the head alone
            head.write(struct.pack("<q", 16))
        assert bell.rung() == Rung(16)
    finally:
        bell.close()
