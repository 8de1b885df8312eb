"""The PostgreSQL server the benchmarks use: its URI, a check that it answers, fresh schemas.

The server is ``PG_URI`` (default ``postgresql://postgres@127.0.0.1:5432/test``, the one the
tests use; ``make postgres`` starts it). Every benchmark that writes to it does so in a schema of
its own, ``bench_<pid>_<8 hex digits>``, dropped when the benchmark ends, also on failure. A
server that does not answer is an error (:class:`PostgresUnavailable`), never a silent skip:
``--no-postgres`` is how to leave PostgreSQL out.

psycopg is imported inside the functions, so the other benchmarks run without it installed.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from decider.stores.redact import redact_uri

DEFAULT_URI = "postgresql://postgres@127.0.0.1:5432/test"
"""The server used when ``PG_URI`` is not set (the tests' default)."""

CONNECT_TIMEOUT = 10
"""Seconds a connection attempt may take."""


class PostgresUnavailable(RuntimeError):
    """PostgreSQL cannot be used: psycopg is missing or the server does not answer.

    The message is one line and names the server (without its password).
    """


def uri() -> str:
    """The server's URI: ``PG_URI``, else :data:`DEFAULT_URI` (read at each call)."""
    return os.environ.get("PG_URI") or DEFAULT_URI


def redact(conninfo: str) -> str:
    """``conninfo`` with any password replaced by ``***`` (for messages): the stores' one
    redaction, :func:`decider.stores.redact.redact_uri`."""
    return redact_uri(conninfo)


def check_reachable(conninfo: str) -> None:
    """Connect once; :class:`PostgresUnavailable` (one line, naming the server) if that fails."""
    try:
        import psycopg
    except ModuleNotFoundError as exc:
        raise PostgresUnavailable(
            f"cannot benchmark PostgreSQL at {redact(conninfo)}: {exc.name} is not installed"
            " (pip install -e '.[postgres]'), or pass --no-postgres"
        ) from None
    try:
        with psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise PostgresUnavailable(
            f"PostgreSQL at {redact(conninfo)} is unreachable: {reason}"
            " (start it with `make postgres`, set PG_URI, or pass --no-postgres)"
        ) from None


def new_schema_name() -> str:
    """A schema name no other benchmark (in any process) uses: ``bench_<pid>_<uuid8>``."""
    return f"bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def drop_schema(conninfo: str, schema: str) -> None:
    """Drop ``schema`` and everything in it, if it exists."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as connection:
        connection.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


@contextmanager
def fresh_schema(conninfo: str) -> Iterator[str]:
    """A new schema's name (whoever uses it first creates it), dropped when the block ends.

    When the block fails, a failure to drop is suppressed so that the block's own error (a
    server gone away, say) is the one reported.
    """
    import psycopg

    schema = new_schema_name()
    try:
        yield schema
    except BaseException:
        with contextlib.suppress(psycopg.Error):
            drop_schema(conninfo, schema)
        raise
    drop_schema(conninfo, schema)
