"""The EventStoreDB/KurrentDB adapter, with the protocol code it speaks (``_proto``) and an
in-process test server (``testserver``, a tool: the adapter never imports it).

Importing this package loads no driver: its names load on first use, so the modules
beside them load without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from decider.stores.esdb.store import (
        EsdbEventStore,
        checkpoint_event,
        map_error,
        server_filter,
        server_filter_is_exact,
    )

__all__ = [
    "EsdbEventStore",
    "checkpoint_event",
    "map_error",
    "server_filter",
    "server_filter_is_exact",
]


def __getattr__(name: str) -> Any:
    """The public names of :mod:`decider.stores.esdb.store`, imported on first use."""
    if name in __all__:
        return getattr(importlib.import_module("decider.stores.esdb.store"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
