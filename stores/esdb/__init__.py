"""The EventStoreDB/KurrentDB adapter, with the protocol code it speaks (``_proto``) and an
in-process test server (``testserver``, a tool: the adapter never imports it).

Importing this package loads no driver: its names load on first use, so the modules
beside them load without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from decider.stores.esdb._errors import map_error
    from decider.stores.esdb._filters import server_filter, server_filter_is_exact
    from decider.stores.esdb.store import EsdbEventStore, checkpoint_event

__all__ = [
    "EsdbEventStore",
    "checkpoint_event",
    "map_error",
    "server_filter",
    "server_filter_is_exact",
]


_WHERE = {
    "map_error": "decider.stores.esdb._errors",
    "server_filter": "decider.stores.esdb._filters",
    "server_filter_is_exact": "decider.stores.esdb._filters",
}


def __getattr__(name: str) -> Any:
    """The public names of the adapter's modules, imported on first use."""
    if name in __all__:
        module = _WHERE.get(name, "decider.stores.esdb.store")
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
