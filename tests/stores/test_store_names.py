"""Names a store cannot hold: PostgreSQL's own rejections are permanent errors, and the names
module's rules hold before the driver is reached (the contract proves them for every store)."""

from __future__ import annotations

import random
import string

import psycopg
import pytest

from decider.stores import NO_STREAM, InvalidName, PermanentStoreError, StoreUnavailable
from decider.stores.contract import new_events
from decider.stores.names import POSTGRES_MAX_NAME_BYTES
from decider.stores.postgres._connect import store_error
from decider.stores.sqlite import SqliteEventStore
from tests.support.postgres import fresh_store


class _NoRules:
    """Lets every name through, so a test reaches the driver's own rejection."""

    def check(self, kind: str, name: str) -> None:
        pass

    def check_stream(self, stream: str) -> None:
        pass

    def check_append(self, stream: str, events: object) -> None:
        pass


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (psycopg.errors.ProgramLimitExceeded("index row size 3016 exceeds"), PermanentStoreError),
        (psycopg.DataError("text fields cannot contain NUL (0x00) bytes"), PermanentStoreError),
        (psycopg.errors.NumericValueOutOfRange("bigint out of range"), PermanentStoreError),
        (psycopg.OperationalError("connection lost"), StoreUnavailable),
        (psycopg.errors.AdminShutdown("terminating connection"), StoreUnavailable),
        (psycopg.InterfaceError("the connection is closed"), StoreUnavailable),
    ],
)
def test_postgres_error_mapping(error: psycopg.Error, expected: type[Exception]) -> None:
    mapped = store_error("postgresql://u@h/db", error)
    assert type(mapped) is expected
    assert "postgresql://u@h/db" in str(mapped)


@pytest.mark.parametrize(
    "stream",
    [
        # Random letters: the index compresses a long repetitive name below the limit.
        pytest.param(
            "PR-" + "".join(random.Random(7).choices(string.ascii_letters, k=6000)),
            id="over-the-index-row-limit",
        ),
        pytest.param("PR-\x00", id="nul"),
    ],
)
def test_postgres_rejections_are_permanent_even_unchecked(stream: str) -> None:
    with fresh_store() as store:
        store.name_rules = _NoRules()  # type: ignore[misc,assignment]
        with pytest.raises(PermanentStoreError):
            store.append(stream, new_events(1), NO_STREAM)
        # The connection is still good: the next append goes through.
        store.append("PR-1", new_events(1), NO_STREAM)
        assert len(store.read_stream("PR-1")) == 1


def test_postgres_rejects_a_long_name_before_the_server_does() -> None:
    with fresh_store() as store:
        name = "PR-" + "x" * (POSTGRES_MAX_NAME_BYTES - 2)
        with pytest.raises(InvalidName, match=f"{POSTGRES_MAX_NAME_BYTES + 1} UTF-8 bytes"):
            store.append(name, new_events(1), NO_STREAM)


def test_sqlite_surrogate_is_invalid_not_a_unicode_error() -> None:
    store = SqliteEventStore(":memory:")
    try:
        with pytest.raises(InvalidName, match="lone surrogate"):
            store.append("PR-\ud800", new_events(1), NO_STREAM)
        assert store.read_all() == []
    finally:
        store.close()
