"""A processor's share of its group's work (see :mod:`decider.processors.group.membership`).

Every processor's work splits into the app's partitions: an input of a workflow processor
belongs to the partition of the instance it is routed to, a command (a ``Sent``, ``Published``
or ``Replied`` event) or a timer (a ``Scheduled`` event) to the partition of the instance
stream that recorded it (:meth:`Member.partition_key`). Without a group, one process does all
the work under one *key*, :data:`ALL`, with the processor's own checkpoint (as before
partitions existed). In a group, each partition the process holds is a key of its own: the
processor subscribes from the lowest checkpoint of the partitions held, to their events only
(:meth:`Share.read_filter`: the store filters by the partition key kept with each event, and
sends the events of unknown key too), works only on theirs (:meth:`Share.key_of`), and commits
each partition's work under its lease and with its own
checkpoint (:meth:`Share.fenced`), or several partitions' work in one transaction under all
their leases (:meth:`Share.fenced_together`; the commit engine,
:meth:`~decider.processors.engine.committing.Committing.commit_partitions`, decides which). A
commit whose lease was lost writes nothing
(:class:`~decider.stores.leases.LeaseLost`): the partition is dropped and the processor goes on
with what it still holds.

Switching between the two modes needs no migration: a partition's checkpoint counts the
processor's own checkpoint when that is later (what a run without a group stored), and a run
without a group starts from the lowest partition checkpoint when that is later than its own
(every partition checkpointed by a group run). Either is a low-water mark of work done, and
work done stays done, so the later of the two is safe (:meth:`Share.stored_mark`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

import attrs

from decider.processors.engine.context import Context
from decider.processors.group import partitions
from decider.stores import Lease, LeaseLost
from decider.stores.protocol import Filter, Partitions, RecordedEvent

if TYPE_CHECKING:
    from decider.processors.group.membership import PartitionGroup

IDLE_CHECKPOINT_EVERY = 1.0
"""How often (seconds) a held partition without inputs has its checkpoint moved on."""

ALL = -1
"""The key of the work of a processor that runs without a group: all of it."""


class LeaseNotHeld(Exception):
    """In a group: a commit outside the fence of a partition this process holds."""


class Member(Protocol):
    """What a processor offers its share of the work."""

    name: str
    context: Context
    committed: int | None
    sole_partition: int | None
    """In a group: the one partition all of this processor's work belongs to, whose lease it
    commits under (``None``: each event's own partition)."""

    def partition_key(self, event: RecordedEvent) -> str:
        """The stream whose partition ``event`` belongs to."""
        ...

    def on_leases_changed(self) -> None:
        """Forget what was learnt of partitions that may have moved."""
        ...

    def stop(self) -> None:
        """End the subscription's life (the processor subscribes again, unless stopping)."""
        ...


def _before(mark: int | None, position: int) -> bool:
    """Whether a checkpoint at ``mark`` is short of ``position`` (a checkpoint only moves on:
    a subscription that starts from a lower partition's checkpoint reads positions that a
    partition taken over was already checkpointed past)."""
    return mark is None or mark < position


def _later(*marks: int | None) -> int | None:
    found = [mark for mark in marks if mark is not None]
    return max(found) if found else None


class Share:
    """One processor's share of its group's work: the partitions it works on, the checkpoint
    of each, and the lease each commit goes under (per thread: a processor may commit from two).
    """

    def __init__(self, member: Member) -> None:
        self.member = member
        self._held_view: object = None
        self._let_go = False
        """Whether this life stopped working on a partition it started with (:meth:`let_go`)."""
        self.owned: dict[int, Lease] | None = None
        """The partitions this subscription works on (``None``: no group, all the work)."""
        self._marks: dict[int, int | None] = {}
        self._fence = threading.local()
        self._next_idle_commit = 0.0

    @property
    def group(self) -> PartitionGroup | None:
        """The group (``None``: this process does all the work)."""
        return self.member.context.group

    def _held(self, group: PartitionGroup) -> dict[int, Lease]:
        """The partitions held whose work this processor does: all of them, or only its
        :attr:`Member.sole_partition`."""
        held = group.partitions()
        sole = self.member.sole_partition
        if sole is None:
            return held
        return {sole: held[sole]} if sole in held else {}

    def holds_work(self) -> bool:
        """Whether this process has work of the processor to do now."""
        group = self.group
        return group is None or bool(self._held(group))

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
        """Whether the partitions this process holds (or their epochs) changed since
        :meth:`await_leases`, or this life let one go (:meth:`let_go`)."""
        group = self.group
        return group is not None and (self._let_go or self._holding() != self._held_view)

    def _holding(self) -> object:
        group = self.group
        if group is None:
            return None
        return frozenset((n, lease.epoch) for n, lease in self._held(group).items())

    # -- checkpoints ------------------------------------------------------------------------

    def checkpoint_name(self, key: int) -> str:
        """The checkpoint of ``key``'s work: the processor's own for :data:`ALL`, else the
        partition's."""
        name = self.member.name
        return name if key == ALL else partitions.checkpoint_name(name, key)

    def stored_mark(
        self, key: int, name: Callable[[str], str] = str, *, highest: bool = False
    ) -> int | None:
        """The stored mark of ``key``'s work: its checkpoint, or with ``name`` (of the
        checkpoint's name) another mark kept beside it, counting what a run in the other mode
        (with or without a group) stored if that is later (see the module docstring).

        For :data:`ALL`, the partitions' marks count only if the app ran in a group on this
        store: their lowest (if every partition has one), or with ``highest`` their highest (a
        mark that bounds work done past the checkpoint, such as the concluded mark).
        """
        load = self.member.context.checkpoints.load_checkpoint
        own = load(name(self.member.name))
        if key != ALL:
            return _later(load(name(self.checkpoint_name(key))), own)
        context = self.member.context
        if not context.store.read_stream(partitions.count_stream(context.app.name), 0, 1):
            return own  # never ran in a group here
        marks = [load(name(self.checkpoint_name(n))) for n in range(context.app.partitions)]
        if highest:
            return _later(own, *marks)
        if any(mark is None for mark in marks):
            return own
        return _later(own, min(mark for mark in marks if mark is not None))

    def start_position(self) -> int | None:
        """The position to subscribe after: the processor's checkpoint, or in a group the
        lowest checkpoint of the partitions held."""
        group = self.group
        self._next_idle_commit = 0.0  # the first batch moves every held checkpoint on
        if group is None:
            self.owned = None
            self._marks = {ALL: self.stored_mark(ALL)}
            return self._marks[ALL]
        self.owned = self._held(group)
        self._let_go = False
        self._marks = {number: self.stored_mark(number) for number in self.owned}
        marks = list(self._marks.values())
        if any(mark is None for mark in marks):
            return None
        return min(mark for mark in marks if mark is not None)

    def held_keys(self) -> list[int]:
        """The keys of the work this subscription does: the partitions held, or :data:`ALL`."""
        return [ALL] if self.owned is None else list(self.owned)

    def mark(self, key: int) -> int | None:
        """The checkpoint of ``key``'s work as last loaded or committed."""
        return self._marks.get(key)

    def committed_to(self, key: int, position: int) -> None:
        """``key``'s checkpoint is now ``position`` (committed)."""
        self._marks[key] = position

    def partition(self, event: RecordedEvent) -> int:
        """The partition ``event`` belongs to (:data:`ALL` without a group): by the partition
        key stored with it, else (unknown) by :meth:`Member.partition_key` (an input routed
        here)."""
        if self.owned is None:
            return ALL
        sole = self.member.sole_partition
        if sole is not None:
            return sole
        count = self.member.context.app.partitions
        key = event.partition_key
        if key is not None:
            return key % count
        return partitions.partition_of(self.member.partition_key(event), count)

    def read_filter(self, filter: Filter) -> Filter:
        """``filter`` for this subscription's life: in a group, of the partitions held only
        (and the events of unknown partition, which :meth:`key_of` routes), so the store
        never sends another partition's work."""
        if self.owned is None:
            return filter
        held = Partitions(count=self.member.context.app.partitions, held=frozenset(self.owned))
        return attrs.evolve(filter, partitions=held)

    def behind(self, position: int | None) -> bool:
        """In a group: whether a held partition's checkpoint is not at ``position`` (every input
        up to which is done), so an idle partition's checkpoint has yet to move on."""
        if self.owned is None or position is None:
            return False
        return any(_before(self._marks.get(number), position) for number in self.owned)

    def short_of(self, position: int) -> list[int]:
        """The partitions held whose checkpoint is short of ``position``."""
        if self.owned is None:
            return []
        return [number for number in self.owned if _before(self._marks.get(number), position)]

    def key_of(self, event: RecordedEvent) -> int | None:
        """The key of the work ``event`` is part of, or ``None`` if this subscription does not
        do it (its partition is not held, or its checkpoint is past ``event``).

        In a group, the partition comes from :meth:`Member.partition_key`: for commands and
        timers that is the stored stream name, so no event of another partition is decoded.
        """
        if self.owned is None:  # no group: the one key (no call of partition per event)
            number = ALL
        else:
            number = self.partition(event)
            if number not in self.owned:
                return None
        mark = self._marks.get(number)
        return number if mark is None or event.position > mark else None

    def idle_due(self) -> bool:
        """Whether it is time to move on the checkpoints of held partitions without inputs
        (at most every :data:`IDLE_CHECKPOINT_EVERY` seconds)."""
        now = time.monotonic()
        if now < self._next_idle_commit:
            return False
        self._next_idle_commit = now + IDLE_CHECKPOINT_EVERY
        return True

    # -- fencing ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def fenced(self, key: int) -> Iterator[None]:
        """Commits on this thread inside go under ``key``'s checkpoint name and lease.

        Raises :class:`LeaseNotHeld` if ``key``'s partition is not held (any more).
        """
        if key == ALL:
            yield
            return
        lease = None if self.owned is None else self.owned.get(key)
        if lease is None:
            raise LeaseNotHeld(f"{self.member.name}: partition {key} is not held")
        self._fence.value = (self.checkpoint_name(key), lease)
        try:
            yield
        finally:
            self._fence.value = None

    @contextlib.contextmanager
    def fenced_together(self, keys: Sequence[int]) -> Iterator[None]:
        """Commits on this thread inside go under every one of ``keys``' checkpoint names and
        leases at once (:meth:`joint_fence`): one transaction for several partitions.

        Raises :class:`LeaseNotHeld` if one of the partitions is not held (any more).
        """
        joint: list[tuple[str, Lease]] = []
        for key in keys:
            lease = None if self.owned is None else self.owned.get(key)
            if lease is None:
                raise LeaseNotHeld(f"{self.member.name}: partition {key} is not held")
            joint.append((self.checkpoint_name(key), lease))
        self._fence.joint = joint
        try:
            yield
        finally:
            self._fence.joint = None

    def joint_fence(self) -> list[tuple[str, Lease]] | None:
        """The checkpoint names and leases of a commit of several partitions in hand
        (:meth:`fenced_together`), else ``None``."""
        joint: list[tuple[str, Lease]] | None = getattr(self._fence, "joint", None)
        return joint

    def commit_fence(self) -> tuple[str, Lease | None]:
        """The checkpoint name and the lease to commit under now (no lease: not in a group).

        Raises :class:`LeaseNotHeld` in a group, outside :meth:`fenced`.
        """
        fence: tuple[str, Lease] | None = getattr(self._fence, "value", None)
        if fence is not None:
            return fence
        if self.group is None:
            return self.member.name, None
        raise LeaseNotHeld(f"{self.member.name}: a commit outside a partition's fence")

    def lease_gone(self, exc: LeaseLost | LeaseNotHeld) -> None:
        """A commit found its lease lost (or none held): drop the partition, log, pause a
        moment."""
        group = self.group
        if isinstance(exc, LeaseLost):
            if group is not None:
                group.lost(exc.lease)
            if self.owned is not None:
                for number, lease in list(self.owned.items()):
                    if lease.partition == exc.lease.partition:
                        del self.owned[number]
        context = self.member.context
        logger = context.logger or logging.getLogger(__name__)
        logger.warning(
            "%s: %s; resuming with the leases still held",
            self.member.name,
            exc,
            extra={"processor": self.member.name},
        )
        context.stop.wait(0.1)

    def still_held(self, key: int, held: dict[int, Lease] | None = None) -> bool:
        """Whether ``key``'s partition is still held by this process (always, without a group):
        a released or lost partition's work in hand is dropped, not committed. ``held``: what
        the group holds now, if the caller just asked it."""
        group = self.group
        if key == ALL or group is None:
            return True
        if self.owned is None or key not in self.owned:
            return False
        now = (self._held(group) if held is None else held).get(key)
        return now is not None and now.epoch == self.owned[key].epoch

    def let_go(self, key: int) -> None:
        """Stop working on ``key``'s partition, which :meth:`still_held` found not held now
        (released, lost, or only past the local deadline of its lease, which a late renewal
        may yet extend), and end this subscription's life.

        The work in hand of the partition was dropped, not committed, and the reads went past
        it: were the partition worked on further in this life (still held after all), its
        checkpoint would move past work never done. The next life starts from the stored
        checkpoints of what is held then, so that work is done again, never passed over.
        """
        if self.owned is not None:
            self.owned.pop(key, None)
        self._let_go = True
        context = self.member.context
        logger = context.logger or logging.getLogger(__name__)
        logger.info(
            "%s: partition %d is not held now; resubscribing from the checkpoints",
            self.member.name,
            key,
            extra={"processor": self.member.name},
        )
        self.member.stop()

    def held_now(self) -> dict[int, Lease] | None:
        """What the group holds now (``None`` without a group), for :meth:`still_held`."""
        group = self.group
        return None if group is None else self._held(group)

    # -- a batch's work --------------------------------------------------------------------

    def due_work(
        self, batch: Sequence[RecordedEvent]
    ) -> tuple[dict[int, list[RecordedEvent]], list[int]]:
        """In a group: ``batch``'s inputs by the partition held they belong to, and the
        partitions held that have work to commit with their checkpoints past ``batch``: those
        with inputs, and (about once a second) those whose checkpoint is behind."""
        assert self.owned is not None
        end = batch[-1].position
        work: dict[int, list[RecordedEvent]] = defaultdict(list)
        for event in batch:
            key = self.key_of(event)
            if key is not None:
                work[key].append(event)
        idle_due = self.idle_due()
        due = [
            number
            for number in self.owned
            if work.get(number) or (idle_due and _before(self._marks.get(number), end))
        ]
        return work, due
