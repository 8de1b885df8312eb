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
from collections.abc import Callable

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


class _Guard:
    """A lock, its condition, and how many threads wait on it: taken directly where nothing
    waits or is notified, and a notify with no one waiting skipped (a ``Condition``'s
    ``__enter__``, ``__exit__`` and ``notify_all`` cost calls in Python, on every command)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.waiting = 0

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for :meth:`notify_all`."""
        with self.lock:
            self.waiting += 1
            try:
                self.cond.wait(timeout)
            finally:
                self.waiting -= 1

    def notify_all(self) -> None:
        """Wake every thread in :meth:`wait` (the lock held)."""
        if self.waiting:
            self.cond.notify_all()


class Watermark:
    """The entries in hand, in log order; thread-safe (workers conclude, the processor takes)."""

    def __init__(self, guard: _Guard | None = None) -> None:
        self._guard = guard or _Guard()
        self._lock = self._guard.lock
        self._entries: collections.deque[Entry] = collections.deque()
        self._fresh: list[Entry] = []
        self.open = 0
        """How many entries have not concluded."""

    def add(self, position: int) -> Entry:
        """A new entry for the input at ``position`` (after every earlier one)."""
        entry = Entry(position, lane=self)
        with self._lock:
            self._entries.append(entry)
            self.open += 1
        return entry

    def conclude(self, entry: Entry, appends: list[StreamAppend]) -> None:
        """``entry`` concluded, leading to ``appends``."""
        with self._lock:
            if entry.done:
                return
            entry.done, entry.appends = True, appends
            self.open -= 1
            self._fresh.append(entry)
            if self._guard.waiting:  # (the guard's notify_all, with no call when none waits)
                self._guard.cond.notify_all()

    def ready(self) -> bool:
        """Whether an entry concluded since the last take (there is something to commit)."""
        with self._lock:
            return bool(self._fresh)

    def idle(self) -> bool:
        """Whether no entry is in hand (none open, none to take)."""
        with self._lock:
            return not self._entries

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for an entry to conclude."""
        self._guard.wait(timeout)

    def take(self) -> Taken:
        """What concluded since the last take, and how far the mark moved."""
        with self._lock:
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
        with self._lock:
            self._entries.clear()
            self._fresh = []
            self.open = 0
            self._guard.cond.notify_all()


class Lanes:
    """One :class:`Watermark` per key (a partition held, or one for all the work), sharing one
    condition, so the processor waits for a conclusion in any of them; thread-safe."""

    def __init__(self, on_conclude: Callable[[], None] = lambda: None) -> None:
        self._guard = _Guard()
        self._lock = self._guard.lock
        self._lanes: dict[int, Watermark] = {}
        self.on_conclude = on_conclude
        """Called (on the concluding thread, no lock held) after an entry concluded: the
        committer's wake-up."""

    @property
    def open(self) -> int:
        """How many entries of every lane have not concluded."""
        with self._lock:
            total = 0
            for lane in self._lanes.values():
                total += lane.open
            return total

    def keys(self) -> list[int]:
        """The keys that have a lane now."""
        with self._lock:
            return list(self._lanes)

    def lane(self, key: int) -> Watermark:
        """The watermark of ``key`` (a new one the first time)."""
        with self._lock:
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = Watermark(self._guard)
            return lane

    def add(self, key: int, position: int) -> Entry:
        """A new entry in ``key``'s lane for the input at ``position``."""
        lane = self._lanes.get(key)  # (one dict read is atomic: the lock only to make one)
        return (lane if lane is not None else self.lane(key)).add(position)

    def conclude(self, entry: Entry, appends: list[StreamAppend]) -> None:
        """``entry`` concluded, leading to ``appends`` (ignored if its lane was dropped); then
        :attr:`on_conclude` wakes whoever commits."""
        lane = entry.lane
        if lane is None:
            return
        with self._lock:
            for held in self._lanes.values():
                if held is lane:
                    break
            else:
                return
            lane.conclude(entry, appends)
        self.on_conclude()

    def drop(self, key: int) -> None:
        """Forget ``key``'s lane (its partition is no longer held): what concludes there is
        ignored."""
        with self._lock:
            self._lanes.pop(key, None)
            self._guard.cond.notify_all()

    def ready(self) -> bool:
        """Whether an entry of any lane concluded since the last takes."""
        with self._lock:
            return any(lane.ready() for lane in self._lanes.values())

    def idle(self) -> bool:
        """Whether no lane has an entry in hand."""
        with self._lock:
            return all(lane.idle() for lane in self._lanes.values())

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for an entry of any lane to conclude."""
        self._guard.wait(timeout)

    def reset(self) -> None:
        """Forget every lane (a new subscription life dispatches its entries again)."""
        with self._lock:
            self._lanes.clear()
            self._guard.cond.notify_all()
