"""Helpers of the contract suite: per-test scopes, event factories, bounded waits."""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import attrs

from decider.stores.protocol import (
    NO_STREAM,
    CaughtUp,
    EventStore,
    Filter,
    NewEvent,
    RecordedEvent,
    Subscription,
)

DEFAULT_TIMEOUT = 10.0
"""Seconds a contract test waits for something that should happen (generous: CI is slow)."""

_counter = itertools.count()


@attrs.frozen
class Scope:
    """One test's private corner of a store that may hold other events.

    Every stream a test writes starts with ``prefix`` (unique per test); ``start`` is the
    position of a marker appended just before the test, so reads of the global log look only
    after it and through :meth:`filter`. The suite therefore passes on a non-empty log, on a
    shared server, and next to system events.
    """

    store: EventStore
    prefix: str
    start: int

    def stream(self, label: str = "s") -> str:
        """The name of this test's stream ``label``."""
        return f"{self.prefix}{label}"

    def filter(self, **kwargs: object) -> Filter:
        """A filter restricted to this test's streams (unless ``stream_prefixes`` is given),
        with the other fields given."""
        fields: dict[str, object] = {"stream_prefixes": (self.prefix,), **kwargs}
        return Filter(**fields)  # type: ignore[arg-type]

    def log(self, limit: int | None = None, /, **filter_fields: object) -> list[RecordedEvent]:
        """This test's events in the global log, in log order."""
        return self.store.read_all(self.start, limit, self.filter(**filter_fields))

    def label(self, stream: str) -> str:
        """A stream name without this test's prefix, to compare across scopes."""
        return stream.removeprefix(self.prefix)


def open_scope(store: EventStore) -> Scope:
    """Make a fresh scope: a unique stream prefix and a start marker appended now."""
    token = uuid.uuid4().hex[:12]
    marker = store.append(
        f"ct{token}~start", [NewEvent(id=uuid.uuid4(), type="ContractStart", data=b"{}")], NO_STREAM
    )
    return Scope(store=store, prefix=f"ct{token}-", start=marker.position)


def new_events(count: int, event_type: str = "Tested", metadata: bytes = b"") -> list[NewEvent]:
    """``count`` events with fresh ids and distinct JSON bodies."""
    return [
        NewEvent(
            id=uuid.uuid4(),
            type=event_type,
            data=json.dumps({"n": next(_counter)}).encode(),
            metadata=metadata,
        )
        for _ in range(count)
    ]


def ids_of(events: Sequence[NewEvent | RecordedEvent]) -> list[uuid.UUID]:
    """The ids of ``events``, in order."""
    return [e.id for e in events]


def wait_until(predicate: Callable[[], bool], timeout: float = DEFAULT_TIMEOUT) -> None:
    """Return once ``predicate()`` holds; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    idle = threading.Event()
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        idle.wait(0.005)


def take(
    subscription: Subscription, count: int, timeout: float = DEFAULT_TIMEOUT
) -> list[RecordedEvent | CaughtUp]:
    """The next ``count`` items of ``subscription``; fails if they do not come in time."""
    items: list[RecordedEvent | CaughtUp] = []
    deadline = time.monotonic() + timeout
    while len(items) < count:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"subscription gave {len(items)} of {count} items: {items}")
        item = subscription.poll(remaining)
        if item is not None:
            items.append(item)
    return items


@contextmanager
def subscribed(store: EventStore, after: int | None, filter: Filter) -> Iterator[Subscription]:
    """A subscription that is stopped when the block ends, even if the test fails."""
    subscription = store.subscribe(after, filter)
    try:
        yield subscription
    finally:
        subscription.stop()


def run_threads(count: int, target: Callable[[int], None], timeout: float = 60.0) -> None:
    """Run ``target(i)`` in ``count`` threads released together; re-raise the first failure."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def body(index: int) -> None:
        try:
            barrier.wait(timeout)
            target(index)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(t.is_alive() for t in threads), "a thread did not finish in time"
    if errors:
        raise errors[0]
