"""Leases on named partitions, kept in the store itself, with a fencing epoch.

A service process that wants to work on a partition claims its lease: it names itself (the
owner) and a time to live. The store grants it when the partition is free (never claimed,
released, or expired) or already held by that owner, and refuses it otherwise. Each grant to
a new holder increments the partition's **epoch**, the fencing token: the holder passes its
:class:`Lease` to :meth:`~decider.stores.protocol.TransactionalStore.append_batch`, which checks
in the commit transaction itself that the partition still has that owner and epoch, and
otherwise raises :class:`LeaseLost` and writes nothing. So a holder that was paused past its
expiry (a GC pause, SIGSTOP, a network partition) cannot commit once another process took the
partition over: expiry gives liveness, the epoch check gives safety.

Guarantees:

- at most one owner holds a partition's current epoch; a takeover (after expiry) or a claim
  after a release always gets a higher epoch;
- a fenced ``append_batch`` commits only while the partition's owner and epoch are the ones
  given; the check and a takeover are serialised by the store (a row lock on PostgreSQL, the
  write lock on SQLite, a mutex in memory), so a commit never interleaves with a takeover;
- expiry is measured by the store's clock: the database server's on PostgreSQL
  (``clock_timestamp()``), the host's on SQLite (every process of one SQLite file runs on one
  host) and in memory.

WARNING: a lease whose expiry passed but that nobody took over still fences as held: its
owner may renew it or commit under it. Only a takeover (or a release) ends it.

WARNING: a holder should stop work at its own deadline, measured from *before* it asked for
the lease (``time.monotonic()``), and renew well before it (every ttl/3): the store's clock and
the holder's may differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

import attrs

from decider.stores.errors import StoreError


@attrs.frozen
class Lease:
    """A partition's lease as granted: who holds it, under which epoch, until when.

    ``owner`` is ``None`` for a released partition (as :meth:`LeaseStore.leases` lists it).
    ``expires_at`` is in UTC, by the store's clock.
    """

    partition: str
    owner: str | None
    epoch: int
    expires_at: datetime


class LeaseLost(StoreError):
    """The partition's lease is no longer held with this owner and epoch: another owner took it
    over, or it was released. Nothing of the operation was written."""

    def __init__(self, lease: Lease, current: Lease | None) -> None:
        self.lease = lease
        self.current = current
        if current is None:
            now = "no lease"
        elif current.owner is None:
            now = f"released at epoch {current.epoch}"
        else:
            now = f"held by {current.owner!r} at epoch {current.epoch}"
        super().__init__(
            f"lease on partition {lease.partition!r} lost: {lease.owner!r} had epoch"
            f" {lease.epoch}, now {now}"
        )


@runtime_checkable
class LeaseStore(Protocol):
    """A store that keeps partition leases with a fencing epoch (see the module docstring)."""

    def claim_lease(self, partition: str, owner: str, ttl: float) -> Lease | None:
        """Take the lease on ``partition`` for ``ttl`` seconds, or ``None`` if another owner
        holds it and it has not expired.

        A free or expired partition gets the next epoch; the owner that already holds it keeps
        its epoch and gets the new expiry.
        """
        ...

    def renew_lease(self, lease: Lease, ttl: float) -> Lease:
        """Extend ``lease`` to ``ttl`` seconds from now (same epoch); :class:`LeaseLost` if the
        partition no longer has this owner and epoch."""
        ...

    def release_lease(self, lease: Lease) -> bool:
        """Give the partition up (it is free at once); whether ``lease`` was still held."""
        ...

    def leases(self) -> list[Lease]:
        """Every partition's lease, held, expired or released, ordered by partition."""
        ...


def check_ttl(ttl: float) -> None:
    """Refuse a time to live that is not a positive number of seconds."""
    if not 0 < ttl < 10**9:
        raise ValueError(f"ttl must be a positive number of seconds, got {ttl!r}")


def claimed(
    current: Lease | None, partition: str, owner: str, ttl: float, now: datetime
) -> Lease | None:
    """The lease a claim results in, given the partition's ``current`` one at ``now`` (``None``:
    refused). The rule of :meth:`LeaseStore.claim_lease`, for stores that decide in Python."""
    expires_at = now + timedelta(seconds=ttl)
    if current is None:
        return Lease(partition, owner, 1, expires_at)
    if current.owner == owner and current.expires_at > now:
        return Lease(partition, owner, current.epoch, expires_at)
    if current.owner is None or current.expires_at <= now:
        return Lease(partition, owner, current.epoch + 1, expires_at)
    return None


def holds(current: Lease | None, lease: Lease) -> bool:
    """Whether the partition's ``current`` lease is still ``lease``'s owner and epoch."""
    return (
        current is not None
        and lease.owner is not None
        and current.owner == lease.owner
        and current.epoch == lease.epoch
    )


def batch_leases(leases: Sequence[Lease]) -> list[Lease]:
    """The leases one ``append_batch`` is fenced by: ``leases`` in their order, each partition
    once (refusing two epochs of one partition)."""
    found: dict[str, Lease] = {}
    for item in leases:
        seen = found.setdefault(item.partition, item)
        if seen != item:
            raise ValueError(f"two leases on partition {item.partition!r} in one commit")
    return list(found.values())


def batch_checkpoints(checkpoints: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """The checkpoints one ``append_batch`` stores: ``checkpoints`` in their order, each name
    once (refusing one name at two positions)."""
    found: dict[str, int] = {}
    for name, position in checkpoints:
        if found.setdefault(name, position) != position:
            raise ValueError(f"checkpoint {name!r} at two positions in one commit")
    return list(found.items())
