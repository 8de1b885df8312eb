"""What the command line resolves before it does anything: the App and the store.

Every problem with an argument becomes a :class:`UsageError` with one line naming what was
wrong (never a traceback): a module that does not import, an attribute that is missing or is
not an :class:`~processors.App`, a store URI that names no store or cannot be opened.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

from decider.processors.client.app import App
from decider.stores.errors import StoreError, StoreNotFound
from decider.stores.protocol import EventStore
from decider.stores.uri import open_store

STORE_ENV = "DECIDER_STORE"
"""The environment variable that gives the store URI when ``--store`` is not given."""

APP_ENV = "DECIDER_APP"
"""The environment variable that gives the app when ``--app`` is not given."""


class CliError(Exception):
    """A failure the command line reports in one line; ``exit_code`` is the process's status."""

    exit_code = 1


class UsageError(CliError):
    """A bad argument (an app or a store that cannot be used): exit status 2."""

    exit_code = 2


def load_app(spec: str) -> App:
    """The :class:`App` named by ``module:attribute`` (``package:name`` also finds
    ``package.name:name``, so ``samples.traffic_fine:app`` is the sample's App).

    The current directory is importable, as it is for ``python -m``. Raises
    :class:`UsageError` naming what could not be found.
    """
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise UsageError(f"app {spec!r} must be written module:attribute, e.g. myproject.app:app")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = _import(module_name, spec)
    missing = object()
    value = getattr(module, attribute, missing)
    if value is missing and hasattr(module, "__path__"):
        value = _submodule(f"{module_name}.{attribute}", spec) or missing
    if isinstance(value, ModuleType):
        # ``package:name`` where ``name`` is a module: the App of the same name inside it.
        value = getattr(value, attribute, missing)
    if value is missing:
        raise UsageError(f"module {module_name!r} has no attribute {attribute!r} (app {spec!r})")
    if not isinstance(value, App):
        raise UsageError(f"{spec!r} is a {type(value).__name__}, not a processors.App")
    return value


def _import(name: str, spec: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(f"{exc.name}.")):
            raise UsageError(f"no module named {exc.name!r} (app {spec!r})") from exc
        raise UsageError(f"importing {name!r} failed: {exc!r} (app {spec!r})") from exc
    except Exception as exc:
        raise UsageError(f"importing {name!r} failed: {exc!r} (app {spec!r})") from exc


def _submodule(name: str, spec: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise UsageError(f"importing {name!r} failed: {exc!r} (app {spec!r})") from exc
    except Exception as exc:
        raise UsageError(f"importing {name!r} failed: {exc!r} (app {spec!r})") from exc


def store_uri(given: str | None) -> str:
    """The store URI: ``--store`` if given, else ``$DECIDER_STORE``; :class:`UsageError` if
    neither."""
    uri = given or os.environ.get(STORE_ENV)
    if not uri:
        raise UsageError(
            f"no store: give --store URI or set {STORE_ENV} (e.g. sqlite:///events.db)"
        )
    return uri


def open_uri(uri: str, *, must_exist: bool = False) -> EventStore:
    """The store ``uri`` names, opened; :class:`UsageError` if it cannot be.

    With ``must_exist`` (a read-only command, or one that changes an existing store) a store
    that does not exist is an error rather than created empty: an SQLite file that does not
    exist, a PostgreSQL schema that does not exist or holds no event store. A mistyped name
    is noticed, not answered with "0 instances".
    """
    try:
        return open_store(uri, create=not must_exist)
    except StoreNotFound as exc:
        raise UsageError(str(exc)) from exc
    except StoreError as exc:
        raise UsageError(f"cannot open the store: {exc}") from exc
