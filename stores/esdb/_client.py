"""Which EventStoreDB/KurrentDB client package the adapter uses, and its names.

``kurrentdbclient`` (extra ``kurrentdb``) and ``esdbclient`` (extra ``esdb``) are the same
client under two names: the same v1 gRPC calls, the same methods, but other class and exception
names, and ``kurrentdbclient`` also reads ``kurrentdb://`` and ``kdb://`` URIs and can call
KurrentDB's v2 ``AppendSession``. They cannot share an environment (their grpcio pins
exclude each other), so one is picked at import: ``kurrentdbclient`` if it is installed, else
``esdbclient``. :func:`load` returns the chosen package's names (the adapter keeps them as
``decider.stores.esdb.store.CLIENT``); nothing else in the adapter names a package.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

SCHEMES = ("esdb", "esdb+discover", "kurrentdb", "kurrentdb+discover", "kdb", "kdb+discover")
"""URI schemes that open the EventStoreDB/KurrentDB store, with either client."""


@dataclass(frozen=True)
class ClientNames:
    """The names the adapter needs from one client package."""

    package: str
    client_class: Any
    new_event: Any
    new_events: Any | None  # kurrentdbclient only: one stream's part of a multi-stream append
    stream_state: Any
    caught_up: Any
    checkpoint: Any
    base_error: type[Exception]
    wrong_version: type[Exception]
    stream_deleted: tuple[type[Exception], ...]
    failed_precondition: type[Exception]
    not_found: type[Exception]
    unavailable: tuple[type[Exception], ...]
    schemes: tuple[str, ...]

    def client_uri(self, uri: str) -> str:
        """``uri`` with a scheme this package reads: ``esdbclient`` knows only ``esdb``.

        KurrentDB's schemes name the same connection string, so they are rewritten; anything
        else is passed on for the client to reject.
        """
        scheme, separator, rest = uri.partition("://")
        lowered = scheme.lower()
        if separator and lowered in SCHEMES and lowered not in self.schemes:
            discover = lowered.endswith("+discover")
            return ("esdb+discover" if discover else "esdb") + separator + rest
        return uri


def _kurrentdbclient(package: ModuleType) -> ClientNames:
    errors = importlib.import_module("kurrentdbclient.exceptions")
    return ClientNames(
        package="kurrentdbclient",
        client_class=package.KurrentDBClient,
        new_event=package.NewEvent,
        new_events=package.NewEvents,
        stream_state=package.StreamState,
        caught_up=package.CaughtUp,
        checkpoint=package.Checkpoint,
        base_error=errors.KurrentDBClientError,
        wrong_version=errors.WrongCurrentVersionError,
        stream_deleted=(errors.StreamIsDeletedError, errors.StreamTombstonedError),
        failed_precondition=errors.FailedPreconditionError,
        not_found=errors.NotFoundError,
        unavailable=(
            errors.ServiceUnavailableError,
            errors.DeadlineExceededError,
            errors.DiscoveryFailedError,
            errors.NodeIsNotLeaderError,
        ),
        schemes=SCHEMES,
    )


def _esdbclient(package: ModuleType) -> ClientNames:
    errors = importlib.import_module("esdbclient.exceptions")
    return ClientNames(
        package="esdbclient",
        client_class=package.EventStoreDBClient,
        new_event=package.NewEvent,
        new_events=None,
        stream_state=package.StreamState,
        caught_up=package.CaughtUp,
        checkpoint=package.Checkpoint,
        base_error=errors.EventStoreDBClientException,
        wrong_version=errors.WrongCurrentVersion,
        stream_deleted=(errors.StreamIsDeleted,),
        failed_precondition=errors.FailedPrecondition,
        not_found=errors.NotFound,
        unavailable=(
            errors.ServiceUnavailable,
            errors.DeadlineExceeded,
            errors.DiscoveryFailed,
            errors.NodeIsNotLeader,
        ),
        schemes=("esdb", "esdb+discover"),
    )


def load() -> ClientNames:
    """The names of the installed client: ``kurrentdbclient`` first, else ``esdbclient``.

    Raises ``ModuleNotFoundError`` naming ``esdbclient`` when neither is installed.
    """
    try:
        return _kurrentdbclient(importlib.import_module("kurrentdbclient"))
    except ModuleNotFoundError as exc:
        if exc.name != "kurrentdbclient":
            raise
    return _esdbclient(importlib.import_module("esdbclient"))
