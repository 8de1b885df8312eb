"""The PostgreSQL event store: psycopg 3, several processes on one database.

Importing this package loads no driver: its names load on first use, so the modules
beside them load without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from decider.stores.postgres.store import (
        PostgresEventStore,
    )

__all__ = [
    "PostgresEventStore",
]


def __getattr__(name: str) -> Any:
    """The public names of :mod:`decider.stores.postgres.store`, imported on first use."""
    if name in __all__:
        return getattr(importlib.import_module("decider.stores.postgres.store"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
