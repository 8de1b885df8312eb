"""The SQLite store's leases: one table, read and written inside ``BEGIN IMMEDIATE``.

The write lock is taken at ``BEGIN``, so a claim (read the row, decide, write it) and a fenced
commit (check the row, append, save the checkpoint) are each one atomic step against every
other process on the file; the rule itself is :func:`decider.stores.leases.claimed`. Expiry is
the host's clock (every process of one SQLite file runs on one host), stored as Unix seconds.
The table is created by the first lease operation; a fenced commit before it finds no lease.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

from decider.stores.leases import Lease, LeaseLost, claimed, holds

TABLE = """
CREATE TABLE IF NOT EXISTS leases (
    partition  TEXT    PRIMARY KEY,
    owner      TEXT,
    epoch      INTEGER NOT NULL,
    expires_at REAL    NOT NULL
)
"""
_READ = "SELECT partition, owner, epoch, expires_at FROM leases WHERE partition = ?"
_WRITE = (
    "INSERT INTO leases (partition, owner, epoch, expires_at) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (partition) DO UPDATE SET"
    " owner = excluded.owner, epoch = excluded.epoch, expires_at = excluded.expires_at"
)
_ALL = "SELECT partition, owner, epoch, expires_at FROM leases ORDER BY partition"
_RELEASED = datetime(1970, 1, 1, tzinfo=UTC)


def claim(connection: sqlite3.Connection, partition: str, owner: str, ttl: float) -> Lease | None:
    """Inside a write transaction: the claim's outcome, stored (``None``: refused)."""
    connection.execute(TABLE)
    granted = claimed(_read(connection, partition), partition, owner, ttl, _now())
    if granted is not None:
        _write(connection, granted)
    return granted


def renew(connection: sqlite3.Connection, lease: Lease, ttl: float) -> Lease:
    """Inside a write transaction: ``lease`` extended, stored; ``LeaseLost`` if not held."""
    connection.execute(TABLE)
    fence(connection, lease)
    renewed = Lease(lease.partition, lease.owner, lease.epoch, _now() + timedelta(seconds=ttl))
    _write(connection, renewed)
    return renewed


def release(connection: sqlite3.Connection, lease: Lease) -> bool:
    """Inside a write transaction: free the partition if ``lease`` still holds it."""
    connection.execute(TABLE)
    if not holds(_read(connection, lease.partition), lease):
        return False
    _write(connection, Lease(lease.partition, None, lease.epoch, _RELEASED))
    return True


def fence(connection: sqlite3.Connection, lease: Lease) -> None:
    """Inside a write transaction: raise ``LeaseLost`` unless ``lease`` is still held."""
    try:
        current = _read(connection, lease.partition)
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        current = None
    if not holds(current, lease):
        raise LeaseLost(lease, current)


def all_leases(connection: sqlite3.Connection) -> list[Lease]:
    """Every partition's lease, ordered by partition (none before the first claim)."""
    try:
        rows = connection.execute(_ALL).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        return []
    return [_lease(row) for row in rows]


def _read(connection: sqlite3.Connection, partition: str) -> Lease | None:
    row = connection.execute(_READ, (partition,)).fetchone()
    return None if row is None else _lease(row)


def _write(connection: sqlite3.Connection, lease: Lease) -> None:
    expires = lease.expires_at.timestamp()
    connection.execute(_WRITE, (lease.partition, lease.owner, lease.epoch, expires))


def _lease(row: tuple[str, str | None, int, float]) -> Lease:
    partition, owner, epoch, expires_at = row
    return Lease(partition, owner, epoch, datetime.fromtimestamp(expires_at, UTC))


def _now() -> datetime:
    return datetime.now(UTC)
