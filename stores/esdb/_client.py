"""Which EventStoreDB/KurrentDB client package the adapter uses, its names, and what the adapter
takes from the client's internals.

``kurrentdbclient`` (extra ``kurrentdb``) and ``esdbclient`` (extra ``esdb``) are the same
client under two names: the same v1 gRPC calls, the same methods, but other class and exception
names, and ``kurrentdbclient`` also reads ``kurrentdb://`` and ``kdb://`` URIs and can call
KurrentDB's v2 ``AppendSession``. They cannot share an environment (their grpcio pins
exclude each other), so one is picked at import: ``kurrentdbclient`` if it is installed, else
``esdbclient``. :func:`load` returns the chosen package's names, and :data:`CLIENT` holds them
for the adapter (``decider.stores.esdb.store.CLIENT`` is the same object); nothing else in the
adapter names a package.

The adapter makes some gRPC calls itself (the open ``BatchAppend`` call, subscriptions'
``Read`` calls, 26.1's ``AppendRecords``, the ``ServerFeatures`` probe) with the protocol code
of :mod:`decider.stores.esdb._proto`. For those it needs from a client what neither package
offers publicly: the channel to the node the client is connected to (:func:`channel`,
:func:`target`), a channel of its own made as the client makes one (:func:`new_channel`), and
the metadata and credentials the client sends with each call (:func:`call_options`). Those
functions are the only readers of the clients' private attributes in the adapter; both
packages name them alike. :func:`settle` is the one reader of gRPC's: it waits until the
channel's thread has handled the last operations of a streaming call the adapter ended.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import grpc

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
    already_exists: type[Exception]
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
        already_exists=errors.AlreadyExistsError,
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
        already_exists=errors.AlreadyExists,
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


CLIENT = load()
"""The client package in use: ``kurrentdbclient`` if installed, else ``esdbclient``."""


def channel(client: Any) -> grpc.Channel:
    """The gRPC channel of ``client``'s connection, to the node it is connected to now: a new
    object once the client has reconnected (to another node, after discovery)."""
    found: grpc.Channel = client._connection._grpc_channel
    return found


def target(client: Any) -> str:
    """The gRPC target (``host:port``) of the node ``client`` is connected to now."""
    return str(client._connection.grpc_target)


def new_channel(client: Any, to: str, options: Sequence[tuple[str, Any]]) -> grpc.Channel:
    """A new channel to ``to``, made as ``client`` makes its own (its TLS settings, root
    certificates and options), with ``options`` added; the caller closes it."""
    made: grpc.Channel = client._construct_grpc_channel(to, tuple(options))
    return made


def call_options(client: Any, *, leader: bool = False) -> dict[str, Any]:
    """The keyword arguments of a gRPC call as ``client`` makes one: its call metadata
    (``leader``: with ``requires-leader``, for a write) and its call credentials (the user
    and password of the connection string)."""
    metadata = tuple(client._call_metadata)
    if leader:
        metadata = (*metadata, ("requires-leader", "true"))
    return {"metadata": metadata, "credentials": client._call_credentials}


def settle(call: Any) -> None:
    """Wait until gRPC has handled every operation of ``call``, a streaming call that has
    ended (cancelled, failed or done): the channel's thread handles each operation's
    completion under the call's lock, also after the call ended, so until then it may still
    take that lock.

    gRPC offers no public way to wait for it: this reads the call's state (its lock and the
    operations it still waits for), as named in ``grpc._channel`` since 1.0; a call without
    one is not waited for."""
    state: Any = getattr(call, "_state", None)
    if state is None:
        return
    with state.condition:
        while state.due:
            state.condition.wait()
