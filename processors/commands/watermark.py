"""The low-water mark of the command processor: which dispatched positions are concluded.

Every input the command processor takes gets an entry, in log order. An entry concludes when
its command is carried out (results), parked, copied, or found to need nothing; it may conclude
out of order (commands run side by side). :meth:`Watermark.take` hands over what concluded
since the last take (to commit now) and the mark: the last position up to which *every*
entry concluded. The checkpoint is only ever set to the mark, so it never passes a command
that is still in hand, and a crash loses at most the commands in hand.

In a group of processes, each partition held has its own checkpoint and so its own watermark
(:class:`Lanes`, one :class:`Watermark` per partition, keyed by partition number): a command
holds back only its own partition's checkpoint. A watermark with no entry in hand lets its
checkpoint go as far as the processor has read (every input of the partition up to there was
dispatched and concluded).
"""

from __future__ import annotations

import collections
import threading
import time

import attrs

from decider.stores.protocol import StreamAppend


@attrs.define(eq=False)
class Entry:
    """One dispatched input: its position, whether it concluded, what it led to."""

    position: int
    done: bool = False
    appends: list[StreamAppend] = attrs.Factory(list)
    lane: Watermark | None = None
    """The watermark it belongs to."""


@attrs.frozen
class Taken:
    """What concluded since the last take: the appends to commit, the new mark (``None``: it
    did not move), the last position among them past the mark (``None``: none), and each
    position's appends (to keep if the commit fails)."""

    appends: list[StreamAppend]
    mark: int | None
    beyond: int | None
    outcomes: dict[int, list[StreamAppend]] = attrs.Factory(dict)
    drained: bool = False
    """Whether no entry is in hand any more (every one added concluded and was taken)."""


class Watermark:
    """The entries in hand, in log order; thread-safe (workers conclude, the processor takes)."""

    def __init__(self, cond: threading.Condition | None = None) -> None:
        self._cond = cond or threading.Condition()
        self._entries: collections.deque[Entry] = collections.deque()
        self._fresh: list[Entry] = []
        self._since = 0.0
        self.open = 0
        """How many entries have not concluded."""

    def add(self, position: int) -> Entry:
        """A new entry for the input at ``position`` (after every earlier one)."""
        entry = Entry(position, lane=self)
        with self._cond:
            self._entries.append(entry)
            self.open += 1
        return entry

    def conclude(self, entry: Entry, appends: list[StreamAppend]) -> None:
        """``entry`` concluded, leading to ``appends``."""
        with self._cond:
            if entry.done:
                return
            entry.done, entry.appends = True, appends
            self.open -= 1
            if not self._fresh:
                self._since = time.monotonic()
            self._fresh.append(entry)
            self._cond.notify_all()

    def due(self, count: int, age: float) -> bool:
        """Whether at least ``count`` entries concluded since the last take, or the oldest of
        them did ``age`` seconds ago."""
        with self._cond:
            fresh = len(self._fresh)
            return fresh >= count or (fresh > 0 and time.monotonic() - self._since >= age)

    def fresh(self) -> tuple[int, float]:
        """How many entries concluded since the last take, and since when (monotonic)."""
        with self._cond:
            return len(self._fresh), self._since

    def idle(self) -> bool:
        """Whether no entry is in hand (none open, none to take)."""
        with self._cond:
            return not self._entries

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for an entry to conclude."""
        with self._cond:
            self._cond.wait(timeout)

    def take(self) -> Taken:
        """What concluded since the last take, and how far the mark moved."""
        with self._cond:
            fresh, self._fresh = self._fresh, []
            mark: int | None = None
            while self._entries and self._entries[0].done:
                mark = self._entries.popleft().position
            drained = not self._entries
        appends = [item for entry in fresh for item in entry.appends]
        beyond = max(
            (e.position for e in fresh if e.appends and (mark is None or e.position > mark)),
            default=None,
        )
        outcomes = {entry.position: entry.appends for entry in fresh if entry.appends}
        for entry in fresh:
            entry.appends = []
        return Taken(appends, mark, beyond, outcomes, drained)

    def reset(self) -> None:
        """Forget every entry (a new subscription life dispatches them again)."""
        with self._cond:
            self._entries.clear()
            self._fresh = []
            self.open = 0
            self._cond.notify_all()


class Lanes:
    """One :class:`Watermark` per key (a partition held, or one for all the work), sharing one
    condition, so the processor waits for a conclusion in any of them; thread-safe."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._lanes: dict[int, Watermark] = {}

    @property
    def open(self) -> int:
        """How many entries of every lane have not concluded."""
        with self._cond:
            return sum(lane.open for lane in self._lanes.values())

    def keys(self) -> list[int]:
        """The keys that have a lane now."""
        with self._cond:
            return list(self._lanes)

    def lane(self, key: int) -> Watermark:
        """The watermark of ``key`` (a new one the first time)."""
        with self._cond:
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = Watermark(self._cond)
            return lane

    def add(self, key: int, position: int) -> Entry:
        """A new entry in ``key``'s lane for the input at ``position``."""
        return self.lane(key).add(position)

    def conclude(self, entry: Entry, appends: list[StreamAppend]) -> None:
        """``entry`` concluded, leading to ``appends`` (ignored if its lane was dropped)."""
        lane = entry.lane
        with self._cond:
            if lane is None or all(lane is not held for held in self._lanes.values()):
                return
        lane.conclude(entry, appends)

    def drop(self, key: int) -> None:
        """Forget ``key``'s lane (its partition is no longer held): what concludes there is
        ignored."""
        with self._cond:
            self._lanes.pop(key, None)
            self._cond.notify_all()

    def due(self, count: int, age: float) -> bool:
        """Whether at least ``count`` entries concluded since the last takes, or the oldest of
        them did ``age`` seconds ago."""
        with self._cond:
            fresh = [lane.fresh() for lane in self._lanes.values()]
            fresh = [(number, since) for number, since in fresh if number]
            if not fresh:
                return False
            if sum(number for number, _ in fresh) >= count:
                return True
            return time.monotonic() - min(since for _, since in fresh) >= age

    def idle(self) -> bool:
        """Whether no lane has an entry in hand."""
        with self._cond:
            return all(lane.idle() for lane in self._lanes.values())

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for an entry of any lane to conclude."""
        with self._cond:
            self._cond.wait(timeout)

    def reset(self) -> None:
        """Forget every lane (a new subscription life dispatches its entries again)."""
        with self._cond:
            self._lanes.clear()
            self._cond.notify_all()
