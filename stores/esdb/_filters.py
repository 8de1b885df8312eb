"""What the EventStoreDB adapter asks the server to filter: a :class:`Filter` as the client's
filter arguments."""

from __future__ import annotations

import re
from typing import Any

from decider.stores.protocol import Filter


def server_filter(filter: Filter) -> dict[str, Any]:
    """Client filter arguments that select a superset of ``filter``'s events.

    Event types go first: the processors' filters name a few types out of the many that their
    workflow streams hold (a workflow stream prefix would let every event of every instance
    through, for the client to drop). Then stream prefixes; with neither, system event types
    are excluded. The caller still applies ``filter.matches`` to what comes back.
    """
    if filter.event_types or filter.event_type_prefixes:
        parts = [re.escape(t) for t in filter.event_types]
        parts += [re.escape(p) + ".*" for p in filter.event_type_prefixes]
        return {"filter_include": ["(?:" + "|".join(parts) + ")"], "filter_exclude": ()}
    if filter.stream_prefixes:
        parts = [re.escape(p) + ".*" for p in filter.stream_prefixes]
        return {"filter_include": ["(?:" + "|".join(parts) + ")"], "filter_by_stream_name": True}
    if filter.include_system:
        return {"filter_exclude": ()}
    return {"filter_exclude": [r"\$.*"]}


def server_filter_is_exact(filter: Filter) -> bool:
    """Whether :func:`server_filter` selects exactly ``filter``'s events (one side only).

    EventStoreDB filters on the stream name or on the event type, never both; a filter with
    both is sent as its type part and finished locally.
    """
    has_types = bool(filter.event_types or filter.event_type_prefixes)
    return not (filter.stream_prefixes and has_types)
