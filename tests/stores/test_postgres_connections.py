"""The PostgreSQL store keeps its connections: a thread's connection lasts its life (and is
kept for the next thread when the thread ends: a metrics endpoint's request threads share one
server backend), and a
failed write transaction (a lost lease, a conflict, a lost race for a revision, all inside a
pipelined commit) is rolled back on the same connection, never replaced, with nothing logged
of psycopg's "error ignored terminating ... pipeline aborted" kind."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import psycopg
import pytest

from decider.stores import (
    ANY,
    NO_STREAM,
    ExpectedRevision,
    StoreUnavailable,
    StreamAppend,
    WrongExpectedVersion,
)
from decider.stores.contract import new_events
from decider.stores.leases import Lease, LeaseLost
from decider.stores.postgres import PostgresEventStore
from tests.support.postgres import PG_URI, fresh_store

TTL = 30.0


@pytest.fixture
def store() -> Iterator[PostgresEventStore]:
    with fresh_store() as opened:
        yield opened


def _backend(store: PostgresEventStore) -> int:
    """The server process of this thread's connection."""
    connection, _ = store._connection()
    return connection.info.backend_pid


def _claim(store: PostgresEventStore, partition: str, owner: str) -> Lease:
    lease = store.claim_lease(partition, owner, TTL)
    assert lease is not None
    return lease


def _problems(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_threads_that_come_and_go_reuse_one_backend(store: PostgresEventStore) -> None:
    store.append("s", new_events(1), NO_STREAM)
    opened = store.connections_opened
    backends: list[int] = []

    def scrape() -> None:  # what a metrics endpoint's request thread does
        backends.append(_backend(store))
        store.read_all(None, 10)

    for _ in range(4):
        thread = threading.Thread(target=scrape)
        thread.start()
        thread.join(10)
        del thread
    assert len(set(backends)) == 1, f"a backend per thread: {backends}"
    assert store.connections_opened == opened + 1


def test_failed_partitioned_commits_keep_their_connection(
    store: PostgresEventStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    leases = [_claim(store, f"p{n}", "me") for n in range(4)]
    streams = [f"s{n}" for n in range(6)]
    for stream in streams:
        store.append(stream, new_events(1), NO_STREAM)
    opened, backend = store.connections_opened, _backend(store)

    def batch(revision: ExpectedRevision) -> list[StreamAppend]:
        return [StreamAppend(s, new_events(2), revision) for s in streams]

    def checkpoints(n: int) -> list[tuple[str, int]]:
        return [(f"cp{k}", n) for k in range(3)]

    # Conflicts: every batch's guarded inserts (at a revision the streams are past) fail in
    # the pipeline, with the rest of the batch (more inserts, checkpoints, COMMIT) queued
    # behind them; enough of them that psycopg prepares those statements on the way.
    for n in range(12):
        with pytest.raises(WrongExpectedVersion):
            # NO_STREAM: the key refuses revision 0; 5: revision 5's row is missing.
            stale = NO_STREAM if n % 2 else 5
            store.append_batch(batch(stale), checkpoints=checkpoints(n), leases=leases)
    # Lost leases: the fence fails inside the pipelined commit.
    store.release_lease(leases[2])
    taken = _claim(store, "p2", "another")
    for n in range(6):
        with pytest.raises(LeaseLost):
            store.append_batch(batch(0), checkpoints=checkpoints(n), leases=leases)
    store.release_lease(taken)
    leases[2] = _claim(store, "p2", "me")
    # And then commits that succeed, on the same connection, with the same statements.
    for revision in range(0, 12, 2):
        store.append_batch(batch(revision), checkpoints=checkpoints(revision), leases=leases)
    # Idempotent re-appends: each one's guarded insert fails (its COMMIT queued behind it, so
    # psycopg prepares that on the way), and the read-ahead try finds it stored.
    again = [StreamAppend("s0", new_events(1), 12)]
    first = store.append_batch(again, leases=leases)
    for _ in range(8):
        assert store.append_batch(again, leases=leases) == first
    store.append_batch([StreamAppend("s0", new_events(1), 13)], leases=leases)

    assert [len(store.read_stream(s)) for s in streams] == [15, 13, 13, 13, 13, 13]
    assert store.load_checkpoint("cp0") == 10
    assert (store.connections_opened, _backend(store)) == (opened, backend)
    assert _problems(caplog) == []


def test_racing_writers_keep_their_connections(
    store: PostgresEventStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Two threads (two stores: two processes' worth) append to one stream without a revision,
    fenced: each race lost for the stream's next revision is run again on the same
    connection."""
    caplog.set_level(logging.WARNING)
    other = PostgresEventStore(store._conninfo, schema=store.schema)
    try:
        lease = _claim(store, "p", "me")
        per_thread, errors = 60, []
        before = {id(s): s.connections_opened for s in (store, other)}

        def write(target: PostgresEventStore) -> None:
            try:
                for _ in range(per_thread):
                    target.append_batch(
                        [StreamAppend("shared", new_events(1), ANY)], leases=[lease]
                    )
            except Exception as exc:
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(s,)) for s in (store, other)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        assert len(store.read_stream("shared")) == 2 * per_thread
        # One connection for each writing thread, kept, and nothing more.
        assert store.connections_opened == before[id(store)] + 1
        assert other.connections_opened == before[id(other)] + 1
        assert _problems(caplog) == []
    finally:
        other.close()


def test_a_commit_on_a_killed_connection_replaces_it_once_and_says_why(
    store: PostgresEventStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    lease = _claim(store, "p", "me")
    store.append_batch([StreamAppend("s", new_events(1), NO_STREAM)], leases=[lease])
    opened = store.connections_opened
    with psycopg.connect(PG_URI, autocommit=True, connect_timeout=10) as raw:
        raw.execute("SELECT pg_terminate_backend(%s)", (_backend(store),))
    with pytest.raises(StoreUnavailable, match=store.schema):
        store.append_batch([StreamAppend("s", new_events(1), 0)], leases=[lease])
    store.append_batch([StreamAppend("s", new_events(1), 0)], leases=[lease])
    assert store.connections_opened == opened + 1
    replaced = [m for m in _problems(caplog) if "connection replaced" in m]
    assert len(replaced) == 1 and store.schema in replaced[0], _problems(caplog)
    assert len(store.read_stream("s")) == 2
