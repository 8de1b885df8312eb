"""A processor's share of its group's work (see :mod:`decider.processors.group`).

In a group, a *partitioned* processor (the workflow processors) subscribes from the lowest
checkpoint of the partitions this process holds, handles only their inputs (routed, then
filtered by partition), and commits each partition's work on its own, under its lease and with
its own checkpoint; a held partition without inputs has its checkpoint moved on every
:data:`IDLE_CHECKPOINT_EVERY` seconds. Any other processor (command, timer) is a singleton: it
runs only while this process holds its lease, and commits under it. A commit whose lease was
lost writes nothing (:class:`~decider.stores.leases.LeaseLost`): the lease is dropped and the
processor resumes with what it still holds.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from decider.processors import partitions
from decider.stores import Lease, LeaseLost
from decider.stores.protocol import RecordedEvent

if TYPE_CHECKING:
    from decider.processors.base import Context
    from decider.processors.group import PartitionGroup

IDLE_CHECKPOINT_EVERY = 1.0
"""How often (seconds) a held partition without inputs has its checkpoint moved on."""


class LeaseNotHeld(Exception):
    """In a group: this process holds no lease to commit the processor's work under."""


class Member(Protocol):
    """What a processor offers its share of the work."""

    name: str
    partitioned: bool
    context: Context
    committed: int | None

    def partition_key(self, event: RecordedEvent) -> str:
        """The stream whose partition ``event`` belongs to."""
        ...

    def on_leases_changed(self) -> None:
        """Forget what was learnt of partitions that may have moved."""
        ...

    def commit_share(self, events: Sequence[RecordedEvent], position: int) -> None:
        """Handle ``events`` (``[]``: none) and commit with the checkpoint at ``position``."""
        ...


class Share:
    """One processor's share of its group's work: the leases it works under, the checkpoint of
    each partition held, and the lease the commit in progress goes under."""

    def __init__(self, member: Member) -> None:
        self.member = member
        self._held_view: object = None
        self.owned: dict[int, Lease] | None = None
        """The partitions this subscription works on (``None``: not partitioned)."""
        self._marks: dict[int, int | None] = {}
        self._fence: tuple[str, Lease] | None = None
        self._next_idle_commit = 0.0

    @property
    def group(self) -> PartitionGroup | None:
        """The group (``None``: this process does all the work)."""
        return self.member.context.group

    def role(self) -> str:
        """The singleton lease's role: the last part of the processor's name."""
        return self.member.name.rsplit(".", 1)[-1]

    def holds_work(self) -> bool:
        """Whether this process has work of the processor to do now."""
        group = self.group
        if group is None:
            return True
        return bool(group.partitions() if self.member.partitioned else group.singleton(self.role()))

    def await_leases(self) -> bool:
        """Wait (interruptibly by stop) until this process holds something to work on; whether
        it does (else the service stops)."""
        group, stop = self.group, self.member.context.stop
        assert group is not None
        while not stop.is_set():
            self._held_view = self._holding()
            if self.holds_work():
                self.member.on_leases_changed()
                return True
            stop.wait(0.1)
        return False

    def moved(self) -> bool:
        """Whether what this process holds of this processor's work (partitions and epochs, or
        the singleton's epoch) changed since :meth:`await_leases`."""
        return self.group is not None and self._holding() != self._held_view

    def _holding(self) -> object:
        group = self.group
        if group is None:
            return None
        if self.member.partitioned:
            return frozenset((n, lease.epoch) for n, lease in group.partitions().items())
        lease = group.singleton(self.role())
        return None if lease is None else lease.epoch

    def start_position(self) -> int | None:
        """The position to subscribe after: the processor's checkpoint, or for a partitioned
        one in a group the lowest checkpoint of the partitions held."""
        member, group = self.member, self.group
        checkpoints = member.context.checkpoints
        if group is None or not member.partitioned:
            self.owned = None
            return checkpoints.load_checkpoint(member.name)
        self.owned = group.partitions()
        self._next_idle_commit = 0.0  # the first batch moves every held checkpoint on
        self._marks = {
            number: checkpoints.load_checkpoint(partitions.checkpoint_name(member.name, number))
            for number in self.owned
        }
        marks = list(self._marks.values())
        if any(mark is None for mark in marks):
            return None
        return min(mark for mark in marks if mark is not None)

    def lease_gone(self, exc: LeaseLost | LeaseNotHeld) -> None:
        """A commit found its lease lost (or none held): drop it, log, pause a moment."""
        group = self.group
        if isinstance(exc, LeaseLost) and group is not None:
            group.lost(exc.lease)
        context = self.member.context
        logger = context.logger or logging.getLogger(__name__)
        logger.warning(
            "%s: %s; resuming with the leases still held",
            self.member.name,
            exc,
            extra={"processor": self.member.name},
        )
        context.stop.wait(0.1)

    def process(self, batch: Sequence[RecordedEvent], owned: dict[int, Lease]) -> None:
        """Handle the inputs of the partitions held, each partition's work committed on its own
        under its lease, with its checkpoint past ``batch``."""
        member = self.member
        count = member.context.app.partitions
        end = batch[-1].position
        work: dict[int, list[RecordedEvent]] = defaultdict(list)
        for event in batch:
            number = partitions.partition_of(member.partition_key(event), count)
            if number in owned:
                mark = self._marks.get(number)
                if mark is None or event.position > mark:
                    work[number].append(event)
        now = time.monotonic()
        idle_due = now >= self._next_idle_commit
        if idle_due:
            self._next_idle_commit = now + IDLE_CHECKPOINT_EVERY
        for number, lease in owned.items():
            events = work.get(number, [])
            if not events and (not idle_due or self._marks.get(number) == end):
                continue
            self._fence = (partitions.checkpoint_name(member.name, number), lease)
            try:
                member.commit_share(events, end)
            except LeaseLost as exc:
                self.lease_gone(exc)
                continue
            finally:
                self._fence = None
            self._marks[number] = end
        member.committed = end

    def commit_fence(self) -> tuple[str, Lease | None]:
        """The checkpoint name and the lease to commit under now (no lease: not in a group).

        Raises :class:`LeaseNotHeld` for a singleton whose lease this process does not hold.
        """
        if self._fence is not None:
            return self._fence
        member, group = self.member, self.group
        if group is None or member.partitioned:
            return member.name, None
        lease = group.singleton(self.role())
        if lease is None:
            raise LeaseNotHeld(f"this process does not hold {self.role()!r} of its group")
        return member.name, lease
