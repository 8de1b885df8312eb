"""Reading a whole stream, or the log after a position, page by page, through the protocol.

The operator's views (queries, listings, skipped inputs, the console) read everything that
matches; a store answers a page at a time (:data:`PAGE` events), and these helpers join the
pages so no view writes its own paging loop.
"""

from __future__ import annotations

from collections.abc import Iterator

from decider.stores.protocol import ALL, EventStore, Filter, RecordedEvent

PAGE = 1000
"""How many events one read asks the store for."""


def read_stream(store: EventStore, stream: str) -> list[RecordedEvent]:
    """Every event of ``stream``, oldest first (empty for a stream that does not exist)."""
    events: list[RecordedEvent] = []
    while page := store.read_stream(stream, len(events), PAGE):
        events.extend(page)
        if len(page) < PAGE:
            break
    return events


def read_all(
    store: EventStore, filter: Filter = ALL, after: int | None = None
) -> Iterator[RecordedEvent]:
    """The events of the log after position ``after`` (from the start: ``None``) that
    ``filter`` passes (default: every event but the store's system ones), in log order, read
    lazily a page at a time."""
    while page := store.read_all(after, PAGE, filter):
        yield from page
        if len(page) < PAGE:
            return
        after = page[-1].position
