"""Several OS processes on one PostgreSQL schema: nothing lost, doubled or reordered."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from decider.stores import CaughtUp
from decider.stores.contract import take
from decider.stores.postgres import PostgresEventStore
from tests.stores.process_support import (
    check_a_subscription_sees_another_process,
    check_two_writers,
    finish,
    go,
    start_worker,
)
from tests.support.postgres import PG_URI, fresh_store


@pytest.fixture
def store() -> Iterator[PostgresEventStore]:
    with fresh_store() as opened:  # creates the schema once, before any race
        yield opened


def _uri(store: PostgresEventStore) -> str:
    joiner = "&" if "?" in PG_URI else "?"
    return f"{PG_URI}{joiner}schema={store.schema}&synchronous_commit=off"


def test_two_processes_appending_to_one_schema(store: PostgresEventStore) -> None:
    workers = [start_worker(_uri(store), name, 300) for name in ("a", "b")]
    go(*workers)
    check_two_writers(store, [finish(worker) for worker in workers], 300)


def test_a_subscription_sees_another_process_append(store: PostgresEventStore) -> None:
    check_a_subscription_sees_another_process(store, _uri(store))


def test_a_live_subscription_reads_every_event_of_concurrent_writers_in_order(
    store: PostgresEventStore,
) -> None:
    """Catch-up readers never skip an event whose transaction committed late."""
    with store.subscribe() as subscription:
        assert take(subscription, 1) == [CaughtUp(position=None)]
        workers = [start_worker(_uri(store), name, 150) for name in ("a", "b")]
        go(*workers)
        received = take(subscription, 300, timeout=120)
        for worker in workers:
            finish(worker)
    assert received == store.read_all()
