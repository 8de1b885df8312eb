"""The grammar of stream names: the words and the separator every stream name is built from.

The one home of stream names below both the processors and the stores: a workflow's instance
streams (:meth:`decider.Workflow.stream`), the processors' own streams (built by
:mod:`decider.processors.app.streams` from the words here) and the streams a store adapter
keeps for itself (the EventStoreDB adapter's checkpoints and leases) all come from here::

    <Workflow>-<instance id>    an instance's events                         instance_stream
    <first>-<part>-...          any other name                               stream_name
    decider-<word>-<name>       the processors' and adapters' own streams    system_stream
    decider-checkpoint-<name>   a processor's checkpoint (EventStoreDB)      checkpoint_stream
    decider-lease-<partition>   a partition's lease (EventStoreDB)           lease_stream
    decider-leaseindex          every partition claimed once (EventStoreDB)  LEASE_INDEX_STREAM

:data:`SEPARATOR` follows a workflow or handler name, which therefore cannot contain it. The
first parts in :data:`RESERVED` are the processors' own, so no workflow or handler may take
them. Nothing here checks a name against a store's limits (the processors and the stores do).
"""

from __future__ import annotations

__all__ = [
    "CHECKPOINT_PREFIX",
    "INPUTS",
    "LEASE_INDEX_STREAM",
    "LEASE_PREFIX",
    "REPLY",
    "RESERVED",
    "SEPARATOR",
    "SYSTEM",
    "TIMER",
    "TOPIC",
    "checkpoint_stream",
    "instance_stream",
    "lease_stream",
    "stream_name",
    "stream_prefix",
    "system_prefix",
    "system_stream",
]

SEPARATOR = "-"
"""Joins the parts of a stream name; ends a workflow or handler name in the names built from it."""

SYSTEM = "decider"
"""The first part of the processors' and store adapters' own streams (``decider-...``)."""

TIMER = "timer"
"""The first part of a fired timer's stream."""

TOPIC = "topic"
"""The first part of a published message's stream."""

REPLY = "reply"
"""The first part of a reply's stream."""

INPUTS = "inputs"
"""The first part of an app's default input stream (``decider publish``)."""

RESERVED = (SYSTEM, TIMER, TOPIC, REPLY)
"""First parts of the processors' own stream names: no workflow or handler may take them."""


def stream_name(first: str, *parts: str) -> str:
    """The stream name of ``first`` and ``parts`` joined by :data:`SEPARATOR`.

    >>> stream_name("topic", "orders.Shipped", "c-1")
    'topic-orders.Shipped-c-1'
    """
    return SEPARATOR.join((first, *parts))


def stream_prefix(first: str, *parts: str) -> str:
    """The prefix every stream name that starts with ``first`` and ``parts`` begins with.

    >>> stream_prefix("Order")
    'Order-'
    """
    return stream_name(first, *parts) + SEPARATOR


def instance_stream(workflow: str, instance_id: str) -> str:
    """The stream of the instance ``instance_id`` of ``workflow`` (not checked).

    >>> instance_stream("Order", "o-1")
    'Order-o-1'
    """
    return stream_name(workflow, instance_id)


def system_stream(word: str, *parts: str) -> str:
    """The processors' or an adapter's own stream ``decider-<word>-<parts>``.

    >>> system_stream("parked", "fines"), system_stream("leaseindex")
    ('decider-parked-fines', 'decider-leaseindex')
    """
    return stream_name(SYSTEM, word, *parts)


def system_prefix(word: str | None = None) -> str:
    """The prefix of the own streams of ``word`` (of every own stream: ``None``).

    >>> system_prefix("checkpoint"), system_prefix()
    ('decider-checkpoint-', 'decider-')
    """
    return stream_prefix(SYSTEM) if word is None else stream_prefix(SYSTEM, word)


CHECKPOINT_PREFIX = system_prefix("checkpoint")
"""A store that keeps checkpoints as events keeps processor ``name``'s in
``decider-checkpoint-<name>`` (EventStoreDB)."""

LEASE_PREFIX = system_prefix("lease")
"""A store that keeps leases as events keeps partition ``p``'s in ``decider-lease-<p>``
(EventStoreDB)."""

LEASE_INDEX_STREAM = system_stream("leaseindex")
"""The stream that names every partition claimed once (EventStoreDB)."""


def checkpoint_stream(name: str) -> str:
    """The stream a store that keeps checkpoints as events keeps processor ``name``'s in.

    >>> checkpoint_stream("fines.commands")
    'decider-checkpoint-fines.commands'
    """
    return CHECKPOINT_PREFIX + name


def lease_stream(partition: str) -> str:
    """The stream a store that keeps leases as events keeps ``partition``'s lease in.

    >>> lease_stream("fines.workflow.Fine.p0")
    'decider-lease-fines.workflow.Fine.p0'
    """
    return LEASE_PREFIX + partition
