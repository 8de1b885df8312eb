"""Consumer groups: a store that hands events out to competing consumers (an optional ability).

EventStoreDB/KurrentDB call them *persistent subscriptions*: the server keeps the group's
position, gives each event of the group's filter to one connected consumer at a time, waits
for that consumer's answer, and redelivers what is not answered in time. A consumer answers
each :class:`Delivery` with

- ``ack``: done; the server will not send it again (unless it restarts before checkpointing);
- ``nack`` with :attr:`Nack.RETRY`: send it again (``retry_count`` + 1); past the group's
  ``max_retry_count`` the server parks it instead;
- ``nack`` with :attr:`Nack.PARK`: set it aside in the group's parked stream now;
  ``replay_parked`` sends everything parked again.

Only the EventStoreDB adapter has this ability (:class:`ConsumerGroupStore`); the processors
ask for it with ``isinstance`` and never import the adapter.
"""

from __future__ import annotations

import enum
import uuid
from typing import Protocol, runtime_checkable

import attrs

from decider.stores.protocol import Filter, RecordedEvent


class Nack(enum.Enum):
    """What a negative acknowledgement asks of the server."""

    RETRY = "retry"
    """Deliver it again (to any consumer), or park it past the group's retry count."""
    PARK = "park"
    """Park it now: it goes to the group's parked stream until replayed."""


@attrs.frozen(kw_only=True)
class GroupSettings:
    """How the server runs a group; used when the group is created (an existing group keeps
    the settings it was created with)."""

    consumer_strategy: str = "RoundRobin"
    """``RoundRobin``, ``DispatchToSingle``, ``Pinned`` or ``PinnedByCorrelation``."""
    message_timeout: float = 30.0
    """Seconds a consumer has to answer a delivery before the server sends it again."""
    max_retry_count: int = 10
    """Redeliveries (nacks or timeouts) after which the server parks an event itself."""
    max_subscriber_count: int = 0
    """How many consumers may connect at once (0: no limit)."""
    checkpoint_after: float = 2.0
    """Seconds between the server's checkpoints of the group's position."""
    min_checkpoint_count: int = 10
    """Answered events before the server writes a checkpoint."""
    max_checkpoint_count: int = 1000
    """Answered events after which the server writes a checkpoint at once."""


@attrs.frozen
class Delivery:
    """One event handed to this consumer, to answer with ``ack`` or ``nack``."""

    event: RecordedEvent
    ack_id: uuid.UUID
    """What the answer names: the event's id, or the id of the parked link it came through."""
    retry_count: int
    """How many times the server sent it before (0: the first delivery)."""
    replayed: bool
    """Whether it comes from the group's parked stream (``replay_parked``)."""


@attrs.frozen
class GroupInfo:
    """What the server says of a group now."""

    in_flight: int
    """Deliveries not answered yet, over every consumer."""
    retry_buffer: int
    """Events waiting to be sent again."""
    parked: int
    """Events in the parked stream not replayed since."""
    last_known_position: int | None
    """The position of the last event the group has seen of its source (``None``: none)."""
    checkpoint: int | None = None
    """The group's checkpoint: every event up to this position is answered (``None``: none
    written yet)."""
    max_retry_count: int = 10
    """The group's setting: redeliveries after which the server parks an event itself."""


@attrs.frozen
class ParkedLink:
    """An entry of a group's parked stream: the event it points to."""

    stream: str
    revision: int


class GroupReader(Protocol):
    """One consumer's connection to a group (one ``Read`` call)."""

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        ...

    def poll(self, timeout: float | None) -> Delivery | None:
        """The next delivery, waiting up to ``timeout`` seconds; ``None`` on timeout or once
        stopped. A failure of the connection is raised here (a store error)."""
        ...

    def wake(self) -> None:
        """Make a blocked :meth:`poll` (or the next, if none is blocked) return ``None`` at
        once: the consumer's own work (an answer) is ready. Safe from any thread."""
        ...

    def ack(self, delivery: Delivery) -> None:
        """Answer ``delivery``: done."""
        ...

    def nack(self, delivery: Delivery, action: Nack) -> None:
        """Answer ``delivery``: not done (retry it, or park it)."""
        ...

    def stop(self) -> None:
        """End the connection (the answers given so far are sent first); what this consumer
        holds unanswered goes to the other consumers."""
        ...


class ConsumerGroup(Protocol):
    """A named group of consumers over the store's global log, with a filter."""

    name: str

    def ensure(self, settings: GroupSettings, *, start: int | None) -> bool:
        """Create the group if it does not exist, starting at position ``start`` (inclusive;
        ``None``: the beginning of the log); whether it was created now."""
        ...

    def read(self, buffer_size: int) -> GroupReader:
        """Connect as one more consumer, holding at most ``buffer_size`` unanswered
        deliveries at once."""
        ...

    def info(self) -> GroupInfo:
        """The group's state on the server."""
        ...

    def replay_parked(self) -> None:
        """Ask the server to deliver every parked event again (in the background)."""
        ...

    def parked(self) -> list[ParkedLink]:
        """What the group's parked stream holds now (not replayed since), oldest first."""
        ...

    def delete(self) -> None:
        """Remove the group (its consumers are disconnected)."""
        ...


@runtime_checkable
class ConsumerGroupStore(Protocol):
    """A store whose server runs consumer groups (EventStoreDB/KurrentDB)."""

    def consumer_group(self, name: str, filter: Filter) -> ConsumerGroup:
        """The group ``name`` over the events ``filter`` selects (created by
        :meth:`ConsumerGroup.ensure`). Events the server lets through but ``filter`` does
        not select are acknowledged by the reader and never delivered."""
        ...
