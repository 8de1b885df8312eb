"""The messages the processors themselves write, registered like any other message.

- ``decider.CommandFailed``: fed back to a workflow instance as an input when one of its
  commands is parked, so ``decide`` can compensate (only to workflows that list it as input);
- ``decider.CommandParked`` / ``decider.ParkedCommandRetried``: the parked-command ledger,
  stream ``decider-parked-<app name>``;
- ``decider.InputSkipped``: a poison input a processor skipped, stream
  ``decider-skipped-<processor name>``;
- ``decider.PartitionCount`` / ``decider.PartitionClaimed``: a partitioned app's count and
  lease history (:mod:`decider.processors.group.partitions`);
- :class:`ForkMark`: the last event of an instance generation that was forked (stored as a
  ``Cancelled`` event whose data also holds the fork, so every reader sees the generation
  ended; :mod:`decider.processors.client.forking`).
"""

from __future__ import annotations

import attrs

from decider import REGISTRY, message
from decider.system import CommandFailed

__all__ = [
    "CANCEL_TYPE",
    "COMMAND_FAILED",
    "PARKED",
    "RETRIED",
    "CommandFailed",
    "CommandParked",
    "ForkMark",
    "InputSkipped",
    "ParkedCommandRetried",
    "PartitionClaimed",
    "PartitionCount",
]


@message("decider.CommandParked")
@attrs.frozen(kw_only=True)
class CommandParked:
    """A command was set aside after its retries ran out (or its failure was final).

    ``stream`` and ``revision`` locate the workflow event that recorded it.
    """

    command_id: str
    command_type: str
    stream: str
    revision: int
    reason: str
    attempts: int
    traceback: str | None = None
    """The traceback (bounded) of the exception the handler raised, if it raised one."""


@message("decider.ParkedCommandRetried")
@attrs.frozen(kw_only=True)
class ParkedCommandRetried:
    """Someone asked for a parked command to be carried out again."""

    command_id: str
    command_type: str
    stream: str
    revision: int


@message("decider.InputSkipped")
@attrs.frozen(kw_only=True)
class InputSkipped:
    """A processor skipped a stored event it could not handle; the event itself is untouched."""

    processor: str
    reason: str
    stream: str
    revision: int
    position: int
    event_type: str
    event_id: str
    traceback: str | None = None
    """The traceback (bounded) of the exception that made the input a skip (user code that
    raised in a route, ``decide`` or ``evolve``; a decode error), if there was one."""


COMMAND_FAILED = REGISTRY.name_of(CommandFailed)
"""The stored type name of :class:`CommandFailed`."""

PARKED = REGISTRY.name_of(CommandParked)
"""The stored type name of :class:`CommandParked`."""

RETRIED = REGISTRY.name_of(ParkedCommandRetried)
"""The stored type name of :class:`ParkedCommandRetried`."""

CANCEL_TYPE = "decider.CancelRequested"
"""The stored type of a cancel request (fields: ``reason``), an input to the instance."""


@message("decider.PartitionCount")
@attrs.frozen(kw_only=True)
class PartitionCount:
    """The partition count an app's processes run with (stream ``decider-partitions-<app>``)."""

    partitions: int


@message("decider.InputRouted")
@attrs.frozen(kw_only=True)
class InputRouted:
    """An input stored without a partition key, routed once for the group (stream
    ``decider-routed-<app>``, stored with the partition key of the instance it goes to): the
    processor of ``workflow`` in the process holding that partition handles the input at
    ``stream``/``revision`` (whose id is ``event_id``) when it reads this record."""

    workflow: str
    stream: str
    revision: int
    event_id: str


ROUTED = "decider.InputRouted"
"""The stored type name of :class:`InputRouted`."""


@message("decider.RoutingStarted")
@attrs.frozen(kw_only=True)
class RoutingStarted:
    """The first event of ``decider-routed-<app>``: the input router routes every input of
    unknown key after ``position`` (those up to it were handled by the workflow processors
    themselves, before the router existed)."""

    position: int


@message("decider.PartitionClaimed")
@attrs.frozen(kw_only=True)
class PartitionClaimed:
    """A process took a partition's lease under a new epoch (stream ``decider-leases-<app>``)."""

    partition: str
    owner: str
    epoch: int


@attrs.frozen(kw_only=True)
class ForkMark:
    """The end of an instance generation that was forked: stored as a ``Cancelled`` event
    whose ``reason`` says so, and whose other fields the workflow processor reads to send the
    instance's later inputs to the new generation.

    Not a registered message: the codec decodes it as ``Cancelled(reason)``
    (:func:`~decider.processors.app.decoding.fork_mark` reads the rest).
    """

    reason: str
    """What the ``Cancelled`` event says: ``forked to <stream> at revision <n>: <why>``."""
    instance: str
    """The instance's own stream (generation 1), which every input is routed to."""
    forked_to: str
    """The new generation's stream."""
    at: int
    """The revision of this generation up to which the new one took its inputs."""
    why: str
    """The operator's reason."""
    reused: list[str] = attrs.Factory(list)
    """The ids of the commands and timers (of this generation or earlier ones) whose results
    the new generation reuses."""
    void: list[str] = attrs.Factory(list)
    """The ids of the commands and timers of this generation and earlier ones that the new
    generation does not reuse: an input they caused (a result, a fired timer) reaches no
    generation."""
