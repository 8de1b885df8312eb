"""PostgreSQL for the tests: the server's URI and a fresh schema per test, dropped afterwards.

The server is ``PG_URI`` (default ``postgresql://postgres@127.0.0.1:5432/test``; ``make test``
starts a local one through ``.ci/ensure-postgres``). A test that needs it and cannot reach it
fails with :class:`~decider.stores.errors.StoreUnavailable`: it is never skipped.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg import sql

from decider.stores.postgres import PostgresEventStore

PG_URI = os.environ.get("PG_URI", "postgresql://postgres@127.0.0.1:5432/test")
"""The PostgreSQL server and database the tests use."""

_counter = itertools.count()


def new_schema_name() -> str:
    """A schema name no other test (in any process) uses."""
    return f"decider_t{os.getpid()}_{next(_counter)}_{uuid.uuid4().hex[:8]}"


def drop_schema(schema: str) -> None:
    """Drop ``schema`` and everything in it, if it exists."""
    with psycopg.connect(PG_URI, autocommit=True, connect_timeout=10) as connection:
        connection.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


@contextmanager
def fresh_schema() -> Iterator[str]:
    """The name of a schema that is dropped when the block ends (the store creates it)."""
    schema = new_schema_name()
    try:
        yield schema
    except BaseException:
        with contextlib.suppress(psycopg.Error):  # keep the first error (server unreachable?)
            drop_schema(schema)
        raise
    drop_schema(schema)


@contextmanager
def fresh_store(**options: Any) -> Iterator[PostgresEventStore]:
    """A store in a fresh schema, closed and dropped when the block ends."""
    with fresh_schema() as schema:
        store = PostgresEventStore(PG_URI, schema=schema, **options)
        try:
            yield store
        finally:
            store.close()


def store_fixture(**options: Any) -> Any:
    """A ``store`` fixture for a test class: a store in a fresh schema per test.

    ``class TestPostgresStore(EventStoreContract): store = store_fixture()``
    """

    @pytest.fixture
    def store(self: object) -> Iterator[PostgresEventStore]:
        with fresh_store(**options) as opened:
            yield opened

    return store


@contextmanager
def gated_store(gate: str) -> Iterator[PostgresEventStore]:
    """A fresh store whose every insert into its events runs ``gate``, PL/pgSQL statements that
    see the row as ``NEW`` (a test-only trigger, after the insert, inside the writer's
    transaction): typically a wait for an advisory lock the test holds, so a writer stops at a
    point the test chooses and the test waits on conditions, never on time."""
    with fresh_store() as store, psycopg.connect(PG_URI, autocommit=True) as connection:
        s = sql.Identifier(store.schema).as_string(connection)
        connection.execute(
            f"""
CREATE FUNCTION {s}.gate() RETURNS trigger LANGUAGE plpgsql AS $gate$
BEGIN
    {gate}
    RETURN NEW;
END
$gate$;
CREATE TRIGGER gate AFTER INSERT ON {s}.events FOR EACH ROW EXECUTE FUNCTION {s}.gate();
"""
        )
        yield store
