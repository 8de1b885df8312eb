"""A bounded LRU cache of workflow instances, so an active instance is not re-read per input."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any

import attrs

from decider import Instance

RECENT_IDS = 1_000
"""How many handled input ids an event-sourced instance keeps in memory (when its store can
look the others up, :class:`~decider.stores.protocol.IdLookupStore`)."""


class HandledIds:
    """The message ids of the inputs an instance handled: all of them, or the latest ``limit``.

    ``complete`` says whether every input the instance handled is here, so that an id that is
    not here was not handled. Once an id is evicted (past ``limit``), or for an instance
    restored from a snapshot (which keeps no ids), it is not: an id that is not here must then
    be looked up in the store.

    >>> ids = HandledIds(["a", "b"], limit=2)
    >>> "a" in ids, ids.complete
    (True, True)
    >>> ids.update(["c"])
    >>> "a" in ids, "c" in ids, ids.complete
    (False, True, False)
    >>> folded = HandledIds(["a", "b", "a", "c"], limit=2)
    >>> list(folded), folded.complete
    (['a', 'c'], False)
    """

    __slots__ = ("_ids", "complete", "limit")

    def __init__(
        self, ids: Iterable[str] = (), *, limit: int | None = None, complete: bool = True
    ) -> None:
        self.limit = limit
        self.complete = complete
        # Least recently handled first: an id handled again moves to the end.
        self._ids: OrderedDict[str, None] = OrderedDict()
        self.update(ids)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def update(self, ids: Iterable[str]) -> None:
        """Add ``ids`` (handled in this order), forgetting the least recent beyond ``limit``."""
        known, limit = self._ids, self.limit
        if type(ids) is set and len(ids) == 1 and (limit is None or limit > 1):
            # One input of the instance in a batch (the common case): the same as below.
            (message_id,) = ids
            if message_id in known:
                known.move_to_end(message_id)
                return
            known[message_id] = None
            if limit is not None and len(known) > limit:
                known.popitem(last=False)
                self.complete = False
            return
        # Each id once, at its last place (in C: a fold adds a whole stream's ids at once).
        latest = list(dict.fromkeys(reversed(list(ids))))
        if limit is not None and len(latest) >= limit:
            kept = latest[:limit]
            kept.reverse()
            fresh = OrderedDict.fromkeys(kept)
            if len(latest) > limit or any(i not in fresh for i in known):
                self.complete = False
            self._ids = fresh
            return
        for message_id in reversed(latest):
            if message_id in known:
                known.move_to_end(message_id)
            else:
                known[message_id] = None
        while limit is not None and len(known) > limit:
            known.popitem(last=False)
            self.complete = False

    def copy(self) -> HandledIds:
        """An independent copy."""
        copied = HandledIds(limit=self.limit, complete=self.complete)
        copied._ids = self._ids.copy()
        return copied


DEFAULT_CACHE_SIZE = 100_000
"""Instances a workflow processor keeps by default. It should exceed the instances at work at
once (started, not yet ended): in a burst that is every instance whose later inputs have not
come yet. Beyond it the least recently used are evicted, and each later input of an evicted
instance re-reads and re-folds its stream, so a burst larger than the cache slows every input
down (measured: 20,000 made a 50,000-workflow burst 17% slower per workflow). An entry of the
traffic-fine sample takes about 0.5 KB (measured after its first input), so 100,000 take
about 50 MB."""


@attrs.define
class CachedInstance:
    """An instance as of ``instance.version - 1`` (its stream revision) and the input message
    ids it has handled (to skip a redelivered or republished input)."""

    instance: Instance[Any]
    handled: HandledIds

    @property
    def revision(self) -> int:
        """The stream revision the entry reflects; -1 for a stream with no events."""
        return self.instance.version - 1


class InstanceCache:
    """Least-recently-used instances by stream name, at most ``size`` of them.

    An entry may be stale (another writer appended): the processor finds out when its append
    fails the revision check, and then reads only the events after the entry's revision.
    """

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"cache size must not be negative, got {size}")
        self.size = size
        self._entries: OrderedDict[str, CachedInstance] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, stream: str) -> CachedInstance | None:
        """The entry of ``stream``, marked as recently used; ``None`` if absent."""
        entry = self._entries.get(stream)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(stream)
        return entry

    def put(self, stream: str, entry: CachedInstance) -> None:
        """Store ``entry``, evicting the least recently used one beyond the bound."""
        if self.size == 0:
            return
        self._entries[stream] = entry
        self._entries.move_to_end(stream)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def discard(self, stream: str) -> None:
        """Forget ``stream``'s entry."""
        self._entries.pop(stream, None)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, stream: object) -> bool:
        """Whether ``stream`` has an entry (neither a hit nor a miss, no reordering)."""
        return stream in self._entries
