"""Open an event store from a URI, the way a command line or a config file names one.

=========================================  ==============================================
URI                                        store
=========================================  ==============================================
``memory://``                              :class:`decider.stores.memory.MemoryEventStore`
``sqlite:///relative/path.db``             :class:`decider.stores.sqlite.SqliteEventStore`
``sqlite:////absolute/path.db``            (the path is what follows ``sqlite:///``)
``sqlite:///:memory:``                     an SQLite database in this process only
``esdb://host:2113?Tls=false``             ``decider.stores.esdb.EsdbEventStore`` (extra ``esdb``)
``esdb+discover://...``                    the same, with cluster discovery
``kurrentdb://``, ``kdb://`` (``+discover``)  the same (extra ``kurrentdb`` or ``esdb``)
``postgresql://user@host:5432/db``         :class:`decider.stores.postgres.PostgresEventStore`
``postgres://...``                         the same (extra ``postgres``)
=========================================  ==============================================

SQLite query parameters: ``synchronous`` (``OFF``, ``NORMAL``, ``FULL``, ``EXTRA``),
``busy_timeout`` and ``probe_interval`` (seconds), e.g.
``sqlite:///events.db?synchronous=NORMAL``.

PostgreSQL query parameters: ``schema`` (default ``public``) and ``synchronous_commit`` (``on``,
``off``, ``local``, ``remote_write``, ``remote_apply``) are the store's; every other one goes to
libpq as it is (``connect_timeout``, ``sslmode``, ``application_name``, ...), e.g.
``postgresql://app@db:5432/events?schema=billing&connect_timeout=5``.

Anything else (an unknown scheme, a missing path, a bad or unknown parameter) raises
:class:`~decider.stores.errors.UnsupportedStoreURI` naming the URI and the reason, with every
secret hidden by :func:`redact_uri` (the one redaction every log line, error and ``repr`` that
shows a store URI uses).
"""

from __future__ import annotations

import importlib
import urllib.parse
from types import ModuleType
from typing import TYPE_CHECKING

from decider.stores.errors import UnsupportedStoreURI
from decider.stores.redact import redact_uri

__all__ = ["open_store", "redact_uri"]

if TYPE_CHECKING:
    from decider.stores.protocol import EventStore

_SQLITE_PARAMETERS = ("synchronous", "busy_timeout", "probe_interval")
_POSTGRES_PARAMETERS = ("schema", "synchronous_commit")
_ESDB_SCHEMES = ("esdb", "esdb+discover", "kurrentdb", "kurrentdb+discover", "kdb", "kdb+discover")


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
    if scheme in _ESDB_SCHEMES:
        return _esdb(uri)
    if scheme in ("postgresql", "postgres"):
        return _postgres(uri)
    raise UnsupportedStoreURI(
        uri,
        f"unknown scheme {scheme!r}; expected memory, sqlite, esdb, kurrentdb, kdb (each also"
        " +discover) or postgresql",
    )


def _memory(uri: str, rest: str) -> EventStore:
    if rest:
        raise UnsupportedStoreURI(uri, "memory:// takes no host, path or parameters")
    from decider.stores.memory import MemoryEventStore

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
    from decider.stores.sqlite.store import SqliteEventStore

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
    _adapter(uri, "decider.stores.esdb.store", "EventStoreDB", driver="esdbclient", extra="esdb")
    from decider.stores.esdb._batch import open_esdb_store

    store: EventStore = open_esdb_store(uri)
    return store


def _adapter(uri: str, module: str, name: str, *, driver: str, extra: str) -> ModuleType:
    """The adapter ``module``, imported by name: it and its driver are optional extras."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == driver:
            raise UnsupportedStoreURI(
                uri, f"the {driver} package is missing: pip install 'decider[{extra}]'"
            ) from exc
        raise UnsupportedStoreURI(uri, f"the {name} adapter cannot be loaded: {exc}") from exc


def _postgres(uri: str) -> EventStore:
    base, _, query = uri.partition("?")
    options: dict[str, str] = {}
    passed: list[str] = []  # libpq's parameters, untouched (libpq decodes them itself)
    for part in query.split("&") if query else []:
        raw_key, equals, raw_value = part.partition("=")
        key = urllib.parse.unquote(raw_key)
        if not equals or not key:
            raise UnsupportedStoreURI(uri, f"malformed query string: {part!r} is not key=value")
        if key not in _POSTGRES_PARAMETERS:
            passed.append(part)
            continue
        if key in options:
            raise UnsupportedStoreURI(uri, f"parameter {key!r} given twice")
        options[key] = urllib.parse.unquote(raw_value)
    conninfo = base + ("?" + "&".join(passed) if passed else "")
    module = _adapter(
        uri, "decider.stores.postgres.store", "PostgreSQL", driver="psycopg", extra="postgres"
    )
    try:
        store: EventStore = module.PostgresEventStore(
            conninfo,
            schema=options.get("schema", "public"),
            synchronous_commit=options.get("synchronous_commit", "on"),
        )
    except ValueError as exc:
        raise UnsupportedStoreURI(uri, f"bad parameter: {exc}") from exc
    return store
