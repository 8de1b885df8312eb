"""Opening the PostgreSQL store's connections, and the one place psycopg's errors become the
store's: the store's options checked (``synchronous_commit``, the schema, the conninfo), the
keyword arguments of ``psycopg.connect``, the store's name without its password, and the
rollback of a failed transaction. :mod:`decider.stores.postgres.store` re-exports the public
constants."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import conninfo as pgconninfo
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from decider.stores.errors import PermanentStoreError, StoreError, StoreUnavailable

_Connection = psycopg.Connection[TupleRow]

SYNCHRONOUS_COMMIT_LEVELS = ("on", "off", "local", "remote_write", "remote_apply")
"""The accepted values of ``synchronous_commit`` (PostgreSQL's setting of that name)."""

DEFAULT_CONNECT_TIMEOUT = 10
"""Seconds a connection attempt may take when the conninfo does not say (``connect_timeout``)."""

_MAX_SCHEMA_BYTES = 63  # PostgreSQL's identifier limit (NAMEDATALEN - 1)


def connect_options(
    conninfo: str, schema: str, synchronous_commit: str
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The ``synchronous_commit`` level, the conninfo's parameters and the keyword arguments of
    ``psycopg.connect``; ``ValueError`` for an option the store cannot take."""
    level = synchronous_commit.lower()
    if level not in SYNCHRONOUS_COMMIT_LEVELS:
        raise ValueError(
            f"synchronous_commit must be one of {', '.join(SYNCHRONOUS_COMMIT_LEVELS)},"
            f" got {synchronous_commit!r}"
        )
    if not schema or len(schema.encode()) > _MAX_SCHEMA_BYTES or "\x00" in schema:
        raise ValueError(f"schema must be a name of 1 to 63 bytes, got {schema!r}")
    try:
        params = pgconninfo.conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())
        raise ValueError(f"malformed PostgreSQL conninfo: {reason}") from None
    ports = str(params.get("port") or "").split(",")
    if not all(p.strip().isdigit() for p in ports if p.strip()):
        raise ValueError(f"port must be a number, got {params['port']!r}")
    kwargs: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in params:
        kwargs["connect_timeout"] = DEFAULT_CONNECT_TIMEOUT
    if "application_name" not in params:
        kwargs["application_name"] = "decider"
    return level, params, kwargs


def roll_back(connection: _Connection) -> None:
    """End a failed transaction, if one is open (a broken connection has none to end)."""
    if not connection.closed and connection.info.transaction_status in (
        TransactionStatus.INTRANS,
        TransactionStatus.INERROR,
    ):
        with contextlib.suppress(psycopg.Error):
            connection.execute("ROLLBACK")


def forget_prepared(connection: _Connection) -> bool:
    """After a failed pipeline: make psycopg forget the statements it believes prepared, and
    deallocate them all on the server before the connection's next statement; ``False`` where
    this psycopg has no such cache to reset (the caller then replaces the connection).

    psycopg counts a statement's runs and, at the fifth, queues its ``Parse`` and marks it
    prepared at once; in pipeline mode nothing takes that mark back when the pipeline aborts
    before the ``Parse`` runs, so the next use fails with ``prepared statement "_pg3_N" does
    not exist``. There is no public way to reset the cache (a ``ROLLBACK`` does it only the
    first time psycopg sees one): this uses its private ``_prepared.clear()``, which the
    store's tests exercise (a failed batch with its statements prepared, then another).
    """
    prepared = getattr(connection, "_prepared", None)
    clear = getattr(prepared, "clear", None)
    if not callable(clear):
        return False
    clear()
    return True


def store_error(name: str, exc: psycopg.Error) -> StoreError:
    """The one place where psycopg's errors become the store's.

    Data the server can never take (a NUL in text, an index row over the size limit, a value
    out of range) is a :class:`PermanentStoreError`; failures to connect, lost connections,
    timeouts, cancellations, deadlocks and serialisation failures may pass:
    :class:`StoreUnavailable`; anything else is a :class:`StoreError`. All name the database
    without its password.
    """
    # libpq spreads a message over lines (a hint on the next one): keep errors to one line.
    reason = " ".join(str(exc).split()) or type(exc).__name__
    # ProgramLimitExceeded (an index row too big) is an OperationalError: test it first.
    if isinstance(exc, psycopg.DataError | psycopg.errors.ProgramLimitExceeded):
        return PermanentStoreError(f"PostgreSQL {name} cannot store this: {reason}")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return StoreUnavailable(f"PostgreSQL {name} is unavailable: {reason}")
    return StoreError(f"PostgreSQL {name}: {reason}")


def describe(params: Mapping[str, Any], schema: str) -> str:
    """``postgresql://user@host:port/dbname?schema=...``, from the parts given (no password)."""
    user = params.get("user")
    host = params.get("host") or params.get("hostaddr") or ""
    port = params.get("port")
    dbname = params.get("dbname") or ""
    where = (f"{user}@" if user else "") + host + (f":{port}" if port else "")
    suffix = "" if schema == "public" else f"?schema={schema}"
    return f"postgresql://{where}/{dbname}{suffix}"
