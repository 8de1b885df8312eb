"""A bounded LRU cache of workflow instances, so an active instance is not re-read per input."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import attrs

from decider import Instance


@attrs.define
class CachedInstance:
    """An instance as of ``instance.version - 1`` (its stream revision) and the input message
    ids it has handled (to skip a redelivered or republished input)."""

    instance: Instance[Any]
    handled: set[str]

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
