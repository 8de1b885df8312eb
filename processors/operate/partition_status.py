"""Partitions as the operator sees them: joining a group from the CLI, and ``decider status``'s
partition listing (owner, lease expiry, checkpoint and lag per processor: each workflow
processor, the command processor and the timer processor). A partition's lag counts the
inputs of that partition only that its processor has left to do (see
:mod:`decider.processors.operate.progress`: a timer not due yet is not counted)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import attrs

from decider.processors.app.definition import AppDefinition
from decider.processors.group import partitions
from decider.processors.group.membership import PartitionGroup
from decider.processors.operate import progress
from decider.stores import LeaseStore
from decider.stores.protocol import CheckpointStore, EventStore, TransactionalStore

LAG_CAP = 10_000
"""Lag is counted up to this many inputs (a larger lag shows as ``>=`` it)."""


def join_group(
    store: EventStore, app: AppDefinition, mode: str, ttl: float
) -> PartitionGroup | None:
    """The group ``decider run --partitions MODE`` joins: ``None`` for ``all`` (this process
    does all the work), a :class:`PartitionGroup` for ``auto``.

    Raises ``ValueError`` naming the problem if the store keeps no leases or cannot fence a
    commit with one (EventStoreDB without an atomic multi-stream append), or
    :class:`~decider.processors.group.partitions.PartitionCountMismatch` (a ``ValueError``) if the
    store records another partition count than the app's.
    """
    if mode == "all":
        return None
    if not isinstance(store, LeaseStore):
        raise ValueError(
            f"{type(store).__name__} keeps no leases, which --partitions auto needs "
            "(SQLite, PostgreSQL, EventStoreDB and memory stores keep them)"
        )
    if not isinstance(store, TransactionalStore):
        raise ValueError(
            f"{type(store).__name__} cannot fence a commit with its lease (it has no atomic "
            "multi-stream append), which --partitions auto needs: on EventStoreDB use "
            "KurrentDB 26.1, or 25.1 with kurrentdbclient (see docs/esdb.md), or --partitions all"
        )
    partitions.ensure_count(store, app)
    return PartitionGroup(store, app, ttl=ttl)


@attrs.frozen
class ProcessorLag:
    """One processor's checkpoint in a partition and its inputs after it."""

    processor: str
    checkpoint: int | None
    lag: int
    """Inputs of this partition the processor has left to do after the checkpoint, up to
    LAG_CAP (a timer counts once due; the command processor's may hold commands concluded
    since its checkpoint)."""


@attrs.frozen
class PartitionRow:
    """One partition: its lease (owner ``None``: free) and each processor's lag."""

    partition: int
    owner: str | None
    epoch: int
    expires_at: datetime | None
    processors: list[ProcessorLag]


def partition_rows(store: EventStore, app: AppDefinition) -> list[PartitionRow]:
    """Every partition of ``app`` as recorded in ``store``; empty if the app never ran
    partitioned there (no partition count recorded) or the store keeps no leases."""
    if not isinstance(store, LeaseStore) or not isinstance(store, CheckpointStore):
        return []
    if not store.read_stream(partitions.count_stream(app.name), 0, 1):
        return []
    leases = {lease.partition: lease for lease in store.leases()}
    work: dict[int, list[ProcessorLag]] = {}
    for row in progress.progress(store, app, datetime.now(UTC)):
        if row.partition is not None:
            lag = ProcessorLag(row.processor, row.checkpoint, min(row.pending, LAG_CAP))
            work.setdefault(row.partition, []).append(lag)
    rows = []
    for number in range(app.partitions):
        lease = leases.get(partitions.lease_name(app.name, number))
        rows.append(
            PartitionRow(
                number,
                None if lease is None else lease.owner,
                0 if lease is None else lease.epoch,
                None if lease is None else lease.expires_at,
                work.get(number, []),
            )
        )
    return rows


def partition_lines(rows: list[PartitionRow]) -> list[str]:
    """``decider status``'s partition lines."""
    if not rows:
        return []
    lines = [f"partitions: {len(rows)}"]
    for row in rows:
        owner = row.owner or "free"
        expiry = (
            ""
            if row.owner is None or row.expires_at is None
            else f" until {row.expires_at:%H:%M:%S}"
        )
        parts = [_lag_text(lag) for lag in row.processors]
        lines.append(f"  {row.partition}: {owner} epoch {row.epoch}{expiry}; {', '.join(parts)}")
    return lines


def _lag_text(lag: ProcessorLag) -> str:
    checkpoint = "-" if lag.checkpoint is None else str(lag.checkpoint)
    more = ">=" if lag.lag >= LAG_CAP else ""
    return f"{lag.processor.rsplit('.', 1)[-1]} @{checkpoint} lag {more}{lag.lag}"


def partition_document(rows: list[PartitionRow]) -> list[dict[str, Any]]:
    """``decider status --json``'s ``partitions`` entry."""
    return [
        {
            "partition": row.partition,
            "owner": row.owner,
            "epoch": row.epoch,
            "expires_at": None if row.expires_at is None else row.expires_at.isoformat(),
            "processors": [
                {"processor": lag.processor, "checkpoint": lag.checkpoint, "lag": lag.lag}
                for lag in row.processors
            ],
        }
        for row in rows
    ]
