"""Open an event store from a URI, the way a command line or a config file names one.

=========================================  ==============================================
URI                                        store
=========================================  ==============================================
``memory://``                              :class:`stores.memory.MemoryEventStore`
``sqlite:///relative/path.db``             :class:`stores.sqlite.SqliteEventStore`
``sqlite:////absolute/path.db``            (the path is what follows ``sqlite:///``)
``sqlite:///:memory:``                     an SQLite database in this process only
``esdb://host:2113?Tls=false``             ``stores.esdb.EsdbEventStore`` (extra ``esdb``)
``esdb+discover://...``                    the same, with cluster discovery
=========================================  ==============================================

SQLite query parameters: ``synchronous`` (``OFF``, ``NORMAL``, ``FULL``, ``EXTRA``),
``busy_timeout`` and ``probe_interval`` (seconds), e.g.
``sqlite:///events.db?synchronous=NORMAL``. Anything else (an unknown scheme, a missing path, a
bad or unknown parameter, ``postgresql://``, whose adapter does not exist yet) raises
:class:`~stores.errors.UnsupportedStoreURI` naming the URI and the reason.
"""

from __future__ import annotations

import importlib
import urllib.parse
from typing import TYPE_CHECKING

from stores.errors import UnsupportedStoreURI

if TYPE_CHECKING:
    from stores.protocol import EventStore

_SQLITE_PARAMETERS = ("synchronous", "busy_timeout", "probe_interval")


def open_store(uri: str) -> EventStore:
    """The event store ``uri`` names, opened and ready; :class:`UnsupportedStoreURI` if none."""
    scheme, separator, rest = uri.partition("://")
    if not separator:
        raise UnsupportedStoreURI(uri, "expected scheme://..., e.g. sqlite:///events.db")
    scheme = scheme.lower()
    if scheme == "memory":
        return _memory(uri, rest)
    if scheme == "sqlite":
        return _sqlite(uri, rest)
    if scheme in ("esdb", "esdb+discover"):
        return _esdb(uri)
    if scheme in ("postgresql", "postgres"):
        raise UnsupportedStoreURI(uri, "the PostgreSQL adapter is not available yet")
    raise UnsupportedStoreURI(
        uri, f"unknown scheme {scheme!r}; expected memory, sqlite, esdb or esdb+discover"
    )


def _memory(uri: str, rest: str) -> EventStore:
    if rest:
        raise UnsupportedStoreURI(uri, "memory:// takes no host, path or parameters")
    from stores.memory import MemoryEventStore

    return MemoryEventStore()


def _sqlite(uri: str, rest: str) -> EventStore:
    raw_path, _, query = rest.partition("?")
    if raw_path in ("", "/"):
        raise UnsupportedStoreURI(uri, "missing database path after sqlite:///")
    if not raw_path.startswith("/"):
        raise UnsupportedStoreURI(
            uri, "an SQLite URI has no host: write sqlite:///relative.db or sqlite:////abs.db"
        )
    path = urllib.parse.unquote(raw_path[1:])
    if not path:
        raise UnsupportedStoreURI(uri, "missing database path after sqlite:///")
    options: dict[str, str] = {}
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as exc:
        raise UnsupportedStoreURI(uri, f"malformed query string: {exc}") from exc
    for key, value in pairs:
        if key not in _SQLITE_PARAMETERS:
            raise UnsupportedStoreURI(
                uri, f"unknown parameter {key!r}; expected {', '.join(_SQLITE_PARAMETERS)}"
            )
        if key in options:
            raise UnsupportedStoreURI(uri, f"parameter {key!r} given twice")
        options[key] = value
    from stores.sqlite import SqliteEventStore

    try:
        return SqliteEventStore(
            path,
            synchronous=options.get("synchronous", "FULL"),
            busy_timeout=_seconds(options, "busy_timeout", 30.0),
            probe_interval=_seconds(options, "probe_interval", 0.05),
        )
    except ValueError as exc:
        raise UnsupportedStoreURI(uri, f"bad parameter: {exc}") from exc


def _seconds(options: dict[str, str], key: str, default: float) -> float:
    if key not in options:
        return default
    try:
        return float(options[key])
    except ValueError:
        raise ValueError(f"{key} must be a number of seconds, got {options[key]!r}") from None


def _esdb(uri: str) -> EventStore:
    try:
        # Imported by name: the adapter and its driver are optional.
        module = importlib.import_module("stores.esdb")
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == "esdbclient":
            raise UnsupportedStoreURI(
                uri, "the esdbclient package is missing: pip install 'decider[esdb]'"
            ) from exc
        raise UnsupportedStoreURI(uri, f"the EventStoreDB adapter cannot be loaded: {exc}") from exc
    store: EventStore = module.EsdbEventStore(uri)
    return store
