"""A fork that dies by SIGKILL at a chosen point of its commit (the crash tests run it as a
process): ``python -m tests.support.fork_crash URI STREAM AT POINT``.

``POINT``: ``before`` (planned, nothing written), ``after`` (committed, no answer given) or
``between`` (on a store used without its transactions: the new generation written, the mark
that ends the old one not). The fork is the fixed app's, through :func:`forking.fork`.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from decider.processors.client import forking
from decider.stores.protocol import (
    ALL,
    AppendResult,
    EventStore,
    ExpectedRevision,
    Filter,
    NewEvent,
    RecordedEvent,
    StreamAppend,
    Subscription,
    TransactionalStore,
)
from decider.stores.uri import open_store
from tests.support.fork_app import fixed_app

POINTS = ("before", "after", "between")


def die() -> None:
    """SIGKILL this process: nothing after this line runs, nothing is flushed."""
    os.kill(os.getpid(), signal.SIGKILL)


class OneAtATime:
    """The store without its transactions: each append on its own; dies at ``point``."""

    def __init__(self, store: EventStore, point: str) -> None:
        self.store = store
        self.point = point
        self.appends = 0

    def append(
        self, stream: str, events: Sequence[NewEvent], expected_revision: ExpectedRevision
    ) -> AppendResult:
        if self.point == "before" or (self.point == "between" and self.appends == 1):
            die()
        result = self.store.append(stream, events, expected_revision)
        self.appends += 1
        return result

    def read_stream(
        self, stream: str, from_revision: int = 0, limit: int | None = None
    ) -> list[RecordedEvent]:
        return self.store.read_stream(stream, from_revision, limit)

    def read_all(
        self, after_position: int | None = None, limit: int | None = None, filter: Filter = ALL
    ) -> list[RecordedEvent]:
        return self.store.read_all(after_position, limit, filter)

    def subscribe(self, after_position: int | None = None, filter: Filter = ALL) -> Subscription:
        return self.store.subscribe(after_position, filter)

    def close(self) -> None:
        self.store.close()


class InOne(OneAtATime):
    """The store with its transactions: the fork's one commit; dies before or after it."""

    def append_batch(
        self,
        appends: Sequence[StreamAppend],
        *,
        checkpoints: Sequence[tuple[str, int]] = (),
        leases: Sequence[Any] = (),
    ) -> Sequence[AppendResult]:
        assert isinstance(self.store, TransactionalStore)
        if self.point == "before":
            die()
        return self.store.append_batch(appends, checkpoints=checkpoints, leases=leases)


def main(argv: list[str]) -> int:
    uri, stream, at, point = argv
    if point not in POINTS:
        raise SystemExit(f"POINT must be one of {POINTS}, got {point!r}")
    store = open_store(uri)
    wrapped: EventStore = (
        InOne(store, point)
        if point != "between" and isinstance(store, TransactionalStore)
        else OneAtATime(store, point)
    )
    forking.fork(fixed_app, wrapped, stream, at=int(at), reason="crash test")
    if point == "after" or point == "between":
        die()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
