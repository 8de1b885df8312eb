"""The PostgreSQL store's two kinds of transaction against the horizon (see
:mod:`decider.stores.postgres.store`, "Ordering"): a write transaction, run again when it loses the
race for a stream's next revision, and a read of the log that sees this store's own writes
(it waits on the older write transactions still in flight)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from decider.stores._connections import ThreadConnections
from decider.stores.errors import StoreUnavailable
from decider.stores.postgres._append import one_row
from decider.stores.postgres._connect import forget_prepared, roll_back
from decider.stores.postgres._sql import Statements

_LOG = logging.getLogger(__name__)
_T = TypeVar("_T")
_Connection = psycopg.Connection[TupleRow]
Using = Callable[[], AbstractContextManager[_Connection]]
"""A store's ``_using``: this thread's connection, held, with psycopg's errors mapped."""

_FIRST_DELAY = 0.0002  # seconds between a read's looks at the horizon, doubling...
_MAX_DELAY = 0.005  # ...up to this
_MAX_RACES = 1000  # an ANY append racing writers of one stream; each lost race is one's win
# Pipeline mode needs libpq 14+ (psycopg[binary] bundles one); without it the same statements
# go one round trip each.
_PIPELINE = psycopg.Pipeline.is_supported()


def write_transaction(
    using: Using,
    connections: ThreadConnections[_Connection],
    body: Callable[[_Connection, bool], Callable[[], _T]],
    name: str,
) -> _T:
    """Run ``body`` in a write transaction (pipeline mode); what its result reader returns
    once the transaction ends. A transaction that loses a race for a stream's next revision
    is rolled back and run again on the same connection.

    ``body``'s second argument says whether this is the first try, on which it may let the
    store's constraints check its appends' expectations (:func:`~decider.stores.postgres.
    _append.insert_plain`): an expectation not met is then a unique or not-null violation,
    and the transaction is run again with that argument false, reading the streams first.

    A failed transaction (a lost race, ``LeaseLost``, a conflict) leaves its pipeline in step
    and is rolled back on its connection, which the thread keeps. Only a connection that cannot
    be rolled back (it broke) is replaced, and that is logged with its cause."""
    for attempt in range(_MAX_RACES):
        with using() as connection:
            try:
                finish = _run(connection, body, first_try=attempt == 0)
            except (psycopg.errors.UniqueViolation, psycopg.errors.NotNullViolation) as exc:
                if attempt and isinstance(exc, psycopg.errors.NotNullViolation):
                    _recover(connection, connections, exc, name)
                    raise  # only the first try's guard makes one: anything else is a bug
                _recover(connection, connections, exc, name)
                continue
            except BaseException as exc:
                _recover(connection, connections, exc, name)
                raise
            return finish()
    raise StoreUnavailable(
        f"PostgreSQL {name}: an append lost {_MAX_RACES} races in a row for a stream's"
        " next revision"
    )


def _run(
    connection: _Connection,
    body: Callable[[_Connection, bool], Callable[[], _T]],
    *,
    first_try: bool,
) -> Callable[[], _T]:
    """``BEGIN``, ``body`` and ``COMMIT``, down one pipeline where libpq has them."""
    if not _PIPELINE:
        connection.execute("BEGIN")
        finish = body(connection, first_try)
        connection.execute("COMMIT")
        return finish
    with connection.pipeline() as pipeline:
        try:
            connection.execute("BEGIN")
            finish = body(connection, first_try)
            connection.execute("COMMIT")
        except BaseException:
            # Sync here, so the pipeline ends in step: the statements queued behind the
            # failure come back aborted (errors of no cause of their own, ignored), and
            # leaving the pipeline has nothing left to fail on (psycopg would log "error
            # ignored terminating ... pipeline aborted" and the connection's state would be
            # left to chance).
            if not connection.closed:
                with contextlib.suppress(psycopg.Error):
                    pipeline.sync()
            raise
    return finish


def _recover(
    connection: _Connection,
    connections: ThreadConnections[_Connection],
    cause: BaseException,
    name: str,
) -> None:
    """Roll back a failed write transaction on its connection; where that cannot be done (the
    connection broke), forget the connection, so the thread's next use opens another, and say
    so once, with the cause.

    A transaction the server failed (``INERROR``: a statement of the pipeline failed, so the
    ones behind it were skipped) also has psycopg's prepared statements reset
    (:func:`~decider.stores.postgres._connect.forget_prepared`); one that failed in Python (a
    lost lease, a conflict, found from what was read) ran every statement it sent."""
    aborted = (
        not connection.closed and connection.info.transaction_status == TransactionStatus.INERROR
    )
    roll_back(connection)
    if (
        not connection.closed
        and connection.info.transaction_status == TransactionStatus.IDLE
        and (not aborted or forget_prepared(connection))
    ):
        return
    connections.drop_connection(connection)
    reason = " ".join(str(cause).split()) or type(cause).__name__
    _LOG.warning(
        "PostgreSQL %s: a connection replaced after a failed transaction (%s: %s)",
        name,
        type(cause).__name__,
        reason,
    )


def read_below_horizon(
    using: Using,
    sql: Statements,
    written: int,
    reads: Sequence[tuple[str, tuple[object, ...]]],
    *,
    head: bool = False,
) -> list[list[Any]]:
    """Run ``reads`` (statements with their parameters, in order, in one round trip) once the
    horizon has passed transaction ``written`` (the store's last write; ``0``: it has not
    written), waiting on the locks of the older write transactions still in flight and looking
    again after a short, growing delay while another transaction keeps it back; each read's
    rows. With ``head``, the log's head (``sql.head``'s row) comes first, read before them.

    The wait and the look at the horizon are one statement (with the head, if asked for), so
    a read is two statements: the look sees the horizon as the statement began, before its
    wait. Passed then, nothing older was in flight and nothing was waited on; not passed, the
    look is taken again at once (the wait has let the older appends end), and after a delay
    only from then on (a transaction that holds no append lock keeps the horizon back).
    """
    delay = 0.0
    with using() as connection:
        while True:
            with connection.pipeline() if _PIPELINE else contextlib.nullcontext():
                if written:
                    look = connection.execute(
                        sql.wait_older_head if head else sql.wait_older, (written,)
                    )
                elif head:
                    look = connection.execute(sql.head)
                cursors = [connection.execute(statement, params) for statement, params in reads]
            if written:
                row = one_row(look)
                passed = row[1] > written
                heads = [[(row[2],)]] if head else []
            else:
                passed = True
                heads = [look.fetchall()] if head else []
            if passed:
                return heads + [cursor.fetchall() for cursor in cursors]
            if delay:
                time.sleep(delay)
            delay = min(delay * 2, _MAX_DELAY) if delay else _FIRST_DELAY
