"""Partitions of an app's work: which partition an instance belongs to, and the names and
records kept for them in the store.

An app's work splits into ``count`` partitions (:attr:`App.partitions
<decider.processors.App.partitions>`, 16 by default). An input belongs to the
partition of the instance stream it is routed to: ``crc32(stream) % count``, a hash that is the same
in every process and on every machine (Python's ``hash()`` is salted per process, so it is not
used). A partition has its own checkpoint per processor (:func:`checkpoint_name`) and its own lease
(:func:`lease_name`), so several processes can share an app's work, each committing only the
partitions it holds (see :mod:`decider.processors.group.membership`).

The count an app runs with is recorded once in the store (``decider-partitions-<app>``): a
process started with another count refuses (:class:`PartitionCountMismatch`), since the same
instance would then belong to two partitions with different checkpoints. Changing it is a
documented procedure (docs/scaling.md, "Choosing P"): stop every process, delete that stream,
and save every processor's checkpoint of each new partition as the lowest of the old ones.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

from decider import Envelope, Metadata, event_id
from decider.processors.app import decoding, streams
from decider.processors.app.definition import AppDefinition, WorkflowRegistration, by_correlation
from decider.processors.app.errors import ProcessorError
from decider.processors.app.messages import PartitionClaimed, PartitionCount
from decider.stores import Lease
from decider.stores.errors import WrongExpectedVersion
from decider.stores.protocol import ANY, NO_STREAM, EventStore, KeyedStore, NewEvent

MAX_PARTITIONS = 4096
"""The largest partition count an app may have."""


class PartitionCountMismatch(ProcessorError, ValueError):
    """The app runs with another partition count than the one recorded in the store."""

    def __init__(self, app: str, recorded: int, configured: int) -> None:
        self.recorded = recorded
        self.configured = configured
        super().__init__(
            f"app {app!r} is configured with {configured} partitions but the store records "
            f"{recorded}: every process of an app must use the same count (see docs/scaling.md "
            "to change it)"
        )


def check_count(count: int) -> int:
    """``count`` if it is a valid partition count (1 to :data:`MAX_PARTITIONS`), else
    ``ValueError``."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PARTITIONS:
        raise ValueError(f"partitions must be an int from 1 to {MAX_PARTITIONS}, got {count!r}")
    return count


def stream_key(stream: str) -> int:
    """The partition key of the instance stream ``stream`` (a 32-bit ``crc32``): the key
    stored with every event of the instance's work
    (:attr:`~decider.stores.protocol.NewEvent.partition_key`), whose partition is
    ``key % count``.

    Every generation of an instance (a fork's ``<stream>~g<n>``) has the key of the instance's
    own stream, so an instance's whole work, forked or not, stays one partition's.

    >>> stream_key("Order-o-1") % 16
    14
    >>> stream_key("Order-o-1~g2") == stream_key("Order-o-1")
    True
    """
    if streams.GENERATION in stream:
        stream = streams.generation_of(stream)[0]
    return zlib.crc32(stream.encode("utf-8", "surrogatepass"))


def partition_of(stream: str, count: int) -> int:
    """The partition of the instance stream ``stream`` among ``count``: stable everywhere.

    >>> partition_of("Order-o-1", 16)
    14
    """
    return stream_key(stream) % count


def input_key(
    app: AppDefinition,
    type_name: str,
    message: Callable[[], object],
    metadata: Metadata,
    *,
    workflow: WorkflowRegistration | None = None,
) -> int | None:
    """The partition key of an input of type ``type_name`` (its message: ``message()``,
    called only if the route needs it): :func:`stream_key` of the instance stream its route
    gives, when one workflow takes it (``workflow``, or the only one of the app's workflows
    that lists the type); ``None`` (unknown: every process of a group reads it and routes it
    itself) when several workflows or none take it, or the route fails or gives no id.
    """
    return routed_key(
        app, type_name, message, metadata.correlation_id, lambda: metadata, workflow=workflow
    )


def routed_key(
    app: AppDefinition,
    type_name: str,
    message: Callable[[], object],
    correlation_id: str | None,
    metadata: Callable[[], Metadata],
    *,
    workflow: WorkflowRegistration | None = None,
) -> int | None:
    """:func:`input_key` with the metadata made only if the route needs it (``metadata()``):
    a route :func:`by_correlation` reads ``correlation_id`` alone (a processor writing an
    input builds no :class:`Metadata` for it)."""
    if workflow is None:
        workflow = _taker(app, type_name)
        if workflow is None:
            return None
    entry = workflow.inputs.get(type_name)
    if entry is None:
        return None
    try:
        if entry.route is by_correlation:
            instance_id: object = correlation_id
        else:
            instance_id = entry.route(message(), metadata())
    except Exception:  # the workflow processor skips it, with the reason
        return None
    return _instance_key(workflow, instance_id)


def _taker(app: AppDefinition, type_name: str) -> WorkflowRegistration | None:
    """The one workflow of ``app`` that takes inputs of type ``type_name``; ``None`` when
    several or none do."""
    takers = [r for r in app.workflows.values() if type_name in r.inputs]
    return takers[0] if len(takers) == 1 else None


def _instance_key(workflow: WorkflowRegistration, instance_id: object) -> int | None:
    """:func:`stream_key` of ``workflow``'s instance ``instance_id`` (what a route gave);
    ``None`` if it is no instance id (not a non-empty ``str``, or no store holds its stream)."""
    if not isinstance(instance_id, str) or not instance_id:
        return None
    try:
        return stream_key(streams.instance_stream(workflow.workflow.name, instance_id))
    except Exception:  # the workflow processor skips its input, with the reason
        return None


ROUTER_PARTITION = 0
"""The partition whose lease the app's input router runs under (its checkpoint is that
partition's, ``<app>.router.p0``): the process holding it routes every input stored without a
key, for the whole group."""


def routes_once(store: object) -> bool:
    """Whether a group on ``store`` routes the inputs stored without a partition key once,
    in its input router (the store keeps keys: :class:`~decider.stores.protocol.KeyedStore`),
    rather than in every process (EventStoreDB, which keeps none)."""
    return isinstance(store, KeyedStore)


def lease_name(app: str, partition: int) -> str:
    """The lease of one of an app's partitions.

    >>> lease_name("shop", 3)
    'shop/3'
    """
    return f"{app}/{partition}"


def member_lease_name(app: str, owner: str) -> str:
    """The lease that says ``owner`` is a live member of the app's group."""
    return f"{app}/member/{owner}"


def member_prefix(app: str) -> str:
    """The prefix of every member lease of the app."""
    return f"{app}/member/"


def checkpoint_name(processor: str, partition: int) -> str:
    """The checkpoint of ``processor`` for one partition.

    >>> checkpoint_name("shop.workflow.Order", 3)
    'shop.workflow.Order.p3'
    """
    return streams.partition_checkpoint_name(processor, partition)


def history_stream(app: str) -> str:
    """The stream where every claim of an app's partitions under a new epoch is recorded."""
    return streams.lease_history_stream(app)


def count_stream(app: str) -> str:
    """The stream that records an app's partition count."""
    return streams.partition_count_stream(app)


def ensure_count(store: EventStore, app: AppDefinition) -> int:
    """Record ``app.partitions`` in the store if no count is recorded yet; return it.

    Raises :class:`PartitionCountMismatch` if another count is recorded.
    """
    stream = count_stream(app.name)
    for _ in range(3):
        records = store.read_stream(stream, 0, 1)
        if records:
            count = decoding.decode_message(app.codec, records[0])
            assert isinstance(count, PartitionCount)
            if count.partitions != app.partitions:
                raise PartitionCountMismatch(app.name, count.partitions, app.partitions)
            return count.partitions
        new = _record(app, stream, "count", PartitionCount(partitions=app.partitions))
        try:
            store.append(stream, [new], NO_STREAM)
        except WrongExpectedVersion:
            continue  # another process recorded one first: read it
        return app.partitions
    raise RuntimeError(f"could not record the partition count of {app.name!r}")  # pragma: no cover


def record_claim(store: EventStore, app: AppDefinition, lease: Lease) -> None:
    """Append ``lease`` (a new epoch) to the app's lease history (idempotent per epoch)."""
    stream = history_stream(app.name)
    assert lease.owner is not None
    claim = PartitionClaimed(partition=lease.partition, owner=lease.owner, epoch=lease.epoch)
    store.append(stream, [_record(app, stream, f"{lease.partition}@{lease.epoch}", claim)], ANY)


def claims(store: EventStore, app: AppDefinition) -> list[PartitionClaimed]:
    """The app's lease history, in the order recorded."""
    found = []
    for record in store.read_stream(history_stream(app.name), 0):
        claim = decoding.decode_message(app.codec, record)
        if isinstance(claim, PartitionClaimed):
            found.append(claim)
    return found


def _record(app: AppDefinition, stream: str, cause: str, message: object) -> NewEvent:
    new_id = event_id(stream, cause, 0)
    type_name, data, metadata = app.codec.encode_envelope(
        Envelope(message, Metadata(message_id=str(new_id)))
    )
    return NewEvent(new_id, type_name, data, metadata)
