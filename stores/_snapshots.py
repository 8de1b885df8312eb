"""What every store's snapshots share: which of two snapshots of a stream to keep."""

from __future__ import annotations

from decider.stores.protocol import Snapshot


def replaces(new: Snapshot, stored: Snapshot) -> bool:
    """Whether ``new`` replaces ``stored``: it is of another state version (the code changed)
    or of the same or a later revision (a slow writer never moves a snapshot back).

    >>> replaces(Snapshot(9, "1", b""), Snapshot(19, "1", b""))
    False
    >>> replaces(Snapshot(9, "2", b""), Snapshot(19, "1", b""))
    True
    """
    return new.state_version != stored.state_version or new.revision >= stored.revision
