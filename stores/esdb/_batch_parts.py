"""The pieces of an atomic batch on KurrentDB (:mod:`._batch`): the checkpoint's request,
a stream's stored events as the batch planner asks for them, results read back lazily, and the
checks of what a batch may hold."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any, overload

from decider import streams
from decider.stores._expectations import Stored, plan_append
from decider.stores.esdb.store import checkpoint_event
from decider.stores.protocol import ANY, AppendResult, ExpectedRevision, NewEvent, StreamAppend

Request = tuple[str, list[NewEvent], ExpectedRevision]
"""One stream's part of an atomic write: the stream, its events, the revision expected."""
_CHECKPOINT_IDS = uuid.UUID("6f0d8a53-3f0e-4d5c-9a57-8f1f6c2b7e21")


def checkpoint_request(
    appends: Sequence[StreamAppend],
    name: str,
    checkpoint_position: int,
    fences: Sequence[Request] = (),
) -> Request:
    """The request that stores checkpoint ``name`` at ``checkpoint_position`` in a batch of
    ``appends`` fenced by ``fences``: ``ANY`` (the last save wins), its event's id derived."""
    # the id follows from the batch: a batch sent again (its first try's answer was
    # lost) is then wholly idempotent, not a mix of old appends and a new checkpoint,
    # which KurrentDB would refuse as a conflict. A fenced batch's id follows from its
    # fence event too (new in every commit): otherwise an owner that takes a partition
    # over and moves its checkpoint to where the last owner left it (no appends) would
    # send the stored checkpoint event beside its new fence event, a mix refused on every
    # retry.
    events = [e for item in appends for e in item.events]
    for fence in fences:
        events.extend(fence[1])
    batch_key = b"".join(e.id.bytes for e in events)  # not str(): a UUID's is slow
    event = checkpoint_event(checkpoint_position)
    event = NewEvent(
        id=derived_id(f"{name}:{checkpoint_position}:".encode() + batch_key),
        type=event.type,
        data=event.data,
    )
    return (streams.checkpoint_stream(name), [event], ANY)


class LazyResults(Sequence[AppendResult]):
    """A batch's results, read back from the log when one is first looked at.

    The client returns only the session's position; the processors never look at the results,
    so they do not pay the read (two ``$all`` reads per batch: 8.4 s of append_batch's
    14.5 s in a profiled 1,000-workflow run).
    """

    def __init__(self, length: int, resolve: Callable[[], list[AppendResult]]) -> None:
        self._length = length
        self._resolve: Callable[[], list[AppendResult]] | None = resolve
        self._results: list[AppendResult] = []

    def _all(self) -> list[AppendResult]:
        if self._resolve is not None:
            self._results, self._resolve = self._resolve(), None
        return self._results

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> AppendResult: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[AppendResult]: ...

    def __getitem__(self, index: int | slice) -> AppendResult | Sequence[AppendResult]:
        return self._all()[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return self._all() == list(other)

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which are not hashable

    def __repr__(self) -> str:
        return repr(self._all())


class StreamView:
    """A stream's stored events as :func:`plan_append` asks for them."""

    def __init__(self, stored: Sequence[Any]) -> None:
        self.by_revision: dict[int, Stored] = {
            e.revision: (e.id, e.revision, e.position) for e in stored
        }
        self.last: int | None = stored[-1].revision if stored else None

    def plan(
        self, stream: str, expected: ExpectedRevision, ids: list[uuid.UUID], last: int | None
    ) -> AppendResult | None:
        """:func:`plan_append` against these events (``last`` may count this batch's)."""
        return plan_append(
            stream, expected, last, ids, read_range=self._read_range, find_ids=self._find_ids
        )

    def _read_range(self, first: int, count: int) -> list[Stored]:
        return [self.by_revision[r] for r in range(first, first + count) if r in self.by_revision]

    def _find_ids(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Stored]:
        wanted = set(ids)
        in_order = sorted(self.by_revision.values(), key=lambda s: s[1])
        return {s[0]: s for s in in_order if s[0] in wanted}  # the latest copy of an id


def derived_id(key: bytes) -> uuid.UUID:
    """A name-based (version 5) UUID of ``key`` under the checkpoints' namespace."""
    digest = hashlib.sha1(_CHECKPOINT_IDS.bytes + key, usedforsecurity=False).digest()
    return uuid.UUID(bytes=digest[:16], version=5)


def all_new_any(items: Sequence[StreamAppend]) -> bool:
    """Whether every append expects ``ANY`` and no event id occurs twice among them."""
    if any(item.expected_revision is not ANY for item in items):
        return False
    ids = [e.id for item in items for e in item.events]
    return len(ids) == len(set(ids))


def properties_only(metadata: bytes) -> bool:
    """Whether v2 can carry ``metadata``: empty, or a JSON object whose values are strings."""
    if not metadata:
        return True
    try:
        parsed = json.loads(metadata)
    except ValueError:
        return False
    return isinstance(parsed, dict) and all(isinstance(v, str) for v in parsed.values())
