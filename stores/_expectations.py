"""The expected-revision check, the idempotent-append rule and argument checks, shared by the
stores.

EventStoreDB's rule, which every store follows:

- an ``int`` or ``NO_STREAM`` expectation names where the events go (after revision ``e``, or
  ``-1``). If the stream is exactly there, the events are written. If the stream is further on
  and the events stored at ``e+1 ..`` carry exactly the new ids in order, the append already
  happened: success, nothing written, the stored revision and position returned. A partial
  overlap (the first ids match, later ones differ or run past the end) or no match is a
  conflict;
- ``ANY`` / ``EXISTS``: if every id is already in the stream, success with nothing written; if
  none is, a normal write; if some are, a conflict. ``EXISTS`` on a missing stream conflicts.
  An id stored twice in the stream counts at its latest revision (EventStoreDB's cache of
  recent ids behaves so).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence

from decider.stores.errors import WrongExpectedVersion
from decider.stores.protocol import (
    ANY,
    EXISTS,
    NO_STREAM,
    AppendResult,
    ExpectedRevision,
    StreamState,
)

Stored = tuple[uuid.UUID, int, int]
"""A stored event's ``(id, revision, position)``."""


def validate_append(events_count: int, expected: ExpectedRevision) -> None:
    """Reject malformed appends with a clear error before touching the store."""
    plain = type(expected) is StreamState or (type(expected) is int and expected >= 0)
    if events_count and plain:
        return  # the common append, checked at once
    if events_count == 0:
        raise ValueError("an append needs at least one event")
    if isinstance(expected, bool) or not isinstance(expected, int | StreamState):
        raise TypeError(
            f"expected revision must be an int or NO_STREAM/EXISTS/ANY, got {expected!r}"
        )
    if isinstance(expected, int) and expected < 0:
        raise ValueError(f"expected revision must be >= 0 (or NO_STREAM), got {expected}")


def check_read_args(from_revision: int, limit: int | None) -> None:
    """Reject a negative revision or limit with a clear error before touching the store."""
    if from_revision < 0:
        raise ValueError(f"from_revision must be >= 0, got {from_revision}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")


def plan_append(
    stream: str,
    expected: ExpectedRevision,
    last: int | None,
    ids: Sequence[uuid.UUID],
    *,
    read_range: Callable[[int, int], list[Stored]],
    find_ids: Callable[[Sequence[uuid.UUID]], Mapping[uuid.UUID, Stored]],
) -> AppendResult | None:
    """Decide an append against a stream whose last revision is ``last`` (``None``: missing).

    Returns ``None`` when the events must be written, an :class:`AppendResult` when they are
    already stored (idempotent success), and raises :class:`WrongExpectedVersion` on a conflict.
    ``read_range(first_revision, count)`` returns the stored events from that revision on;
    ``find_ids(ids)`` returns the stream's stored events with those ids.
    """
    if expected is ANY or expected is EXISTS:
        if last is None:
            if expected is EXISTS:
                raise WrongExpectedVersion(stream, expected, None)
            return None
        found = find_ids(ids)
        if not found:
            return None
        if all(event_id in found for event_id in ids):
            _, revision, position = found[ids[-1]]
            return AppendResult(next_expected_revision=revision, position=position)
        raise WrongExpectedVersion(stream, expected, last)
    base = -1 if expected is NO_STREAM else expected
    assert isinstance(base, int)
    current = -1 if last is None else last
    if current == base:
        return None
    if current > base:
        stored = read_range(base + 1, len(ids))
        if len(stored) == len(ids) and all(s[0] == i for s, i in zip(stored, ids, strict=True)):
            _, revision, position = stored[-1]
            return AppendResult(next_expected_revision=revision, position=position)
    raise WrongExpectedVersion(stream, expected, last)
