"""The PostgreSQL store's leases: a table in the store's schema, decided by the server's clock.

A claim is one ``INSERT ... ON CONFLICT DO UPDATE ... WHERE``: PostgreSQL locks the row, so two
processes that claim an expired partition at once are served one after the other, and the
second sees the first's fresh expiry and is refused. Expiry compares with the server's
``clock_timestamp()`` (not ``now()``, which stands still for a whole transaction), never with a
client's clock. The fence is the first statement of a fenced ``append_batch`` transaction:
``SELECT ... FOR SHARE`` of the partition's row, which a takeover's update must wait for; so a
takeover waits for a commit in flight, and a commit after a takeover sees the new epoch.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import psycopg
from psycopg.rows import TupleRow

from decider.stores.leases import Lease, LeaseLost, holds

_COLUMNS = "partition, owner, epoch, expires_at"
_TTL = "clock_timestamp() + %s * interval '1 second'"


def table(leases: str) -> str:
    """The statement that creates the lease table ``leases`` (a qualified name) if missing."""
    return f"""CREATE TABLE IF NOT EXISTS {leases} (
    partition  text        PRIMARY KEY,
    owner      text,                   -- NULL: released
    epoch      bigint      NOT NULL,   -- the fencing token: +1 on every change of owner
    expires_at timestamptz NOT NULL    -- by the server's clock
);
"""


@attrs.frozen
class LeaseStatements:
    """The lease statements of one schema."""

    claim: str
    renew: str
    release: str
    read: str
    fence: str
    fence_many: str
    all: str

    @classmethod
    def for_table(cls, leases: str) -> LeaseStatements:
        """The statements on the lease table ``leases`` (a qualified name)."""
        now = "clock_timestamp()"
        return cls(
            # Parameters: partition, owner, ttl.
            claim=(
                f"INSERT INTO {leases} AS l ({_COLUMNS}) VALUES (%s, %s, 1, {_TTL})"
                " ON CONFLICT (partition) DO UPDATE SET owner = excluded.owner,"
                f" epoch = CASE WHEN l.owner = excluded.owner AND l.expires_at > {now}"
                " THEN l.epoch ELSE l.epoch + 1 END,"
                " expires_at = excluded.expires_at"
                f" WHERE l.owner IS NULL OR l.expires_at <= {now} OR l.owner = excluded.owner"
                f" RETURNING {_COLUMNS}"
            ),
            # Parameters: ttl, partition, owner, epoch.
            renew=(
                f"UPDATE {leases} SET expires_at = {_TTL}"
                f" WHERE partition = %s AND owner = %s AND epoch = %s RETURNING {_COLUMNS}"
            ),
            release=(
                f"UPDATE {leases} SET owner = NULL, expires_at = to_timestamp(0)"
                " WHERE partition = %s AND owner = %s AND epoch = %s"
            ),
            read=f"SELECT {_COLUMNS} FROM {leases} WHERE partition = %s",
            fence=f"SELECT {_COLUMNS} FROM {leases} WHERE partition = %s FOR SHARE",
            fence_many=(
                f"SELECT {_COLUMNS} FROM {leases} WHERE partition = ANY(%s)"
                " ORDER BY partition FOR SHARE"
            ),
            all=f"SELECT {_COLUMNS} FROM {leases} ORDER BY partition",
        )


Connection = psycopg.Connection[TupleRow]


def claim(
    sql: LeaseStatements, connection: Connection, partition: str, owner: str, ttl: float
) -> Lease | None:
    """Run a claim (its own transaction); the lease granted, or ``None``."""
    row = connection.execute(sql.claim, (partition, owner, ttl)).fetchone()
    return None if row is None else _lease(row)


def renew(sql: LeaseStatements, connection: Connection, lease: Lease, ttl: float) -> Lease:
    """Run a renewal (its own transaction); ``LeaseLost`` if the lease is no longer held."""
    params = (ttl, lease.partition, lease.owner, lease.epoch)
    row = connection.execute(sql.renew, params).fetchone()
    if row is None:
        raise LeaseLost(lease, read(sql, connection, lease.partition))
    return _lease(row)


def release(sql: LeaseStatements, connection: Connection, lease: Lease) -> bool:
    """Free the partition if ``lease`` still holds it (its own transaction)."""
    cursor = connection.execute(sql.release, (lease.partition, lease.owner, lease.epoch))
    return cursor.rowcount == 1


def fence(sql: LeaseStatements, connection: Connection, lease: Lease) -> None:
    """Inside a write transaction: lock the partition's row against a takeover until the
    commit, and raise ``LeaseLost`` unless ``lease`` still holds it."""
    row = connection.execute(sql.fence, (lease.partition,)).fetchone()
    current = None if row is None else _lease(row)
    if not holds(current, lease):
        raise LeaseLost(lease, current)


def fence_all(sql: LeaseStatements, connection: Connection, leases: Sequence[Lease]) -> None:
    """:func:`fence` for several partitions in one statement (their rows locked in partition
    order): ``LeaseLost`` naming the first of ``leases`` no longer held."""
    if len(leases) == 1:
        fence(sql, connection, leases[0])
        return
    if not leases:
        return
    rows = connection.execute(sql.fence_many, ([lease.partition for lease in leases],))
    current = {row[0]: _lease(row) for row in rows.fetchall()}
    for lease in leases:
        now = current.get(lease.partition)
        if not holds(now, lease):
            raise LeaseLost(lease, now)


def read(sql: LeaseStatements, connection: Connection, partition: str) -> Lease | None:
    """The partition's lease as stored, or ``None``."""
    row = connection.execute(sql.read, (partition,)).fetchone()
    return None if row is None else _lease(row)


def all_leases(sql: LeaseStatements, connection: Connection) -> list[Lease]:
    """Every partition's lease, ordered by partition."""
    return [_lease(row) for row in connection.execute(sql.all).fetchall()]


def _lease(row: TupleRow) -> Lease:
    partition, owner, epoch, expires_at = row
    return Lease(partition, owner, epoch, expires_at)
