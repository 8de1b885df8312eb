"""PostgreSQL: writers of one stream that were found racing take turns from then on.

Two writers that append to a stream at once without an expected revision (``ANY``: every
process of a group copying its results to one stream) both read the stream's last revision and
insert the next; the second fails on the ``(stream, revision)`` key and redoes its whole batch.
The store learns the stream from that lost race (it moved on between the two tries) and from
then on takes the stream's advisory lock before reading it, so the next such pair waits for the
lock instead of racing.

Each append stops inside its transaction, after its row is inserted, at a gate (a test-only
trigger that waits for an advisory lock the test holds); the test waits on conditions (who is
waiting on which lock), never on time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import decider.stores.postgres._transactions as transactions
from decider.stores import ANY, StreamAppend
from decider.stores.contract import new_events, wait_until
from decider.stores.postgres import PostgresEventStore
from decider.stores.postgres._append import Contended
from decider.stores.postgres._sql import STREAM_CLASS, stream_lock_key
from tests.support.postgres import PG_URI, gated_store

GATE_CLASS = 0x6374_6431  # "ctd1": the gate's advisory lock
STREAM = "shared"


def _connect() -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(PG_URI, autocommit=True, connect_timeout=10)


@pytest.fixture
def gated() -> Iterator[PostgresEventStore]:
    """A store whose inserts into :data:`STREAM` wait for advisory lock ``(GATE_CLASS, 1)``."""
    with gated_store(
        f"IF NEW.stream = '{STREAM}' THEN"
        f" PERFORM pg_advisory_xact_lock_shared({GATE_CLASS}, 1); END IF;"
    ) as store:
        yield store


def _waiting(control: psycopg.Connection[Any], where: str, params: tuple[object, ...]) -> int:
    [(count,)] = control.execute(
        f"SELECT count(*) FROM pg_locks WHERE NOT granted AND {where}", params
    ).fetchall()
    return int(count)


class _Writers:
    """Appends to :data:`STREAM` on threads of their own (a connection each)."""

    def __init__(self, store: PostgresEventStore) -> None:
        self.store = store
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def start(self) -> None:
        events = new_events(1)

        def append() -> None:
            try:
                self.store.append_batch([StreamAppend(STREAM, events, ANY)])
            except BaseException as exc:
                self.errors.append(exc)

        thread = threading.Thread(target=append, daemon=True)
        self.threads.append(thread)
        thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(30)
        self.threads.clear()
        assert not self.errors, self.errors


def _races(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """The lost races (and other failed tries) of write transactions, as they happen."""
    found: list[BaseException] = []
    recover: Callable[..., None] = transactions._recover

    def counted(connection: Any, connections: Any, cause: BaseException, name: str) -> None:
        found.append(cause)
        recover(connection, connections, cause, name)

    monkeypatch.setattr(transactions, "_recover", counted)
    return found


def test_a_stream_raced_for_once_is_locked_from_then_on(
    gated: PostgresEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    races = _races(monkeypatch)
    writers = _Writers(gated)
    with _connect() as control:
        gate = ("locktype = 'advisory' AND classid = %s AND objid = 1", (GATE_CLASS,))
        # 1. A race: the first writer waits at the gate with its row inserted; the second,
        # reading the stream before that row is committed, inserts the same revision and
        # waits on the first's transaction; the gate opens, and the second loses.
        control.execute("SELECT pg_advisory_lock(%s, 1)", (GATE_CLASS,))
        writers.start()
        wait_until(lambda: _waiting(control, *gate) == 1)
        writers.start()
        wait_until(lambda: _waiting(control, "locktype = 'transactionid'", ()) == 1)
        control.execute("SELECT pg_advisory_unlock(%s, 1)", (GATE_CLASS,))
        writers.join()
        assert [type(race) for race in races] == [psycopg.errors.UniqueViolation]

        # 2. The stream is contended now: the second writer waits for its lock, before
        # reading it, while the first holds it at the gate; then reads the first's row.
        key = stream_lock_key(gated.schema, STREAM)
        control.execute("SELECT pg_advisory_lock(%s, 1)", (GATE_CLASS,))
        writers.start()
        wait_until(lambda: _waiting(control, *gate) == 1)
        writers.start()
        stream_lock = "locktype = 'advisory' AND classid = %s AND objid = %s"
        wait_until(lambda: _waiting(control, stream_lock, (STREAM_CLASS, key & 0xFFFFFFFF)) == 1)
        control.execute("SELECT pg_advisory_unlock(%s, 1)", (GATE_CLASS,))
        writers.join()
    assert len(races) == 1  # no second race
    assert [e.revision for e in gated.read_stream(STREAM)] == [0, 1, 2, 3]


def test_contended_streams_are_those_that_moved_between_tries() -> None:
    contended = Contended("schema")
    assert contended.keys(["a", "b"]) == []
    contended.learn({"a": 3, "b": None, "c": 1}, {"a": 4, "b": None, "c": 1, "d": 0})
    assert contended.keys(["a", "b", "c", "d"]) == [stream_lock_key("schema", "a")]
    contended.learn({"b": None}, {"b": 0})
    assert contended.keys(["b", "a"]) == sorted(
        [stream_lock_key("schema", "a"), stream_lock_key("schema", "b")]
    )
