"""The EventStoreDB adapter's error map: the one place where what the client or the server
reports becomes a :mod:`decider.stores.errors` exception. Every module of the adapter raises
through these functions; none builds a store error from a driver's error itself.

What comes in, and what goes out::

    a client exception (esdbclient, kurrentdbclient): map_error, mapped()
      WrongCurrentVersion                           -> WrongExpectedVersion
      StreamIsDeleted, StreamTombstoned,
        FailedPrecondition "is deleted"             -> StreamDeleted
      ServiceUnavailable, DeadlineExceeded,
        DiscoveryFailed, NodeIsNotLeader            -> StoreUnavailable
      any other                                     -> StoreError
    a gRPC call the adapter makes itself: rpc_error, records_error (AppendRecords)
      UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED     -> StoreUnavailable
      AppendRecords: FAILED_PRECONDITION with a
        stream-state violation, RESOURCE_EXHAUSTED
        (the violations overflow the trailers)      -> WrongExpectedVersion, StreamDeleted
      any other                                     -> StoreError
    a BatchAppend answer that is no success: append_error
      WrongExpectedVersion, StreamDeleted           -> the same
      Timeout                                       -> StoreUnavailable
      any other error, a success without revision   -> StoreError
    a channel closed under a call (a ValueError)    -> StoreUnavailable (closed_channel)
    a call that ended by itself                     -> StoreUnavailable (ended)
    a call on a closed store                        -> StoreError (store_closed)

Messages say what happened (the client's exception, or the call and its status) and never a
secret: a URI in a driver's text is shown with its password hidden
(:func:`~decider.stores.redact.redact_uri`).
"""

from __future__ import annotations

import contextlib
import enum
import re
from collections.abc import Iterator, Mapping
from typing import Any

import grpc

from decider.stores.errors import (
    StoreError,
    StoreUnavailable,
    StreamDeleted,
    UnsupportedStoreURI,
    WrongExpectedVersion,
)
from decider.stores.esdb._client import CLIENT
from decider.stores.esdb._proto import error_details_pb2, shared_pb2, streams_v2_errors_pb2
from decider.stores.protocol import ANY, ExpectedRevision
from decider.stores.redact import redact_text, redact_uri

UNAVAILABLE = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,  # the channel closed under the call (ours, or a reconnect)
)
"""The gRPC statuses of a call the adapter makes itself that mean "the node may be back":
:class:`~decider.stores.errors.StoreUnavailable`."""

CLOSED = "the EventStoreDB event store is closed"

Expected = ExpectedRevision | Mapping[str, ExpectedRevision] | None
"""What a failed write expected: of its one stream, or by stream (a multi-stream write; a
stream not named expected ``ANY``)."""

_ACTUAL_REVISION = re.compile(r"Stream position of last event is (\d+) ")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]+")
_TOMBSTONED = -6  # AppendRecords' StreamState of a tombstoned stream
_Violations: Any = streams_v2_errors_pb2.AppendConsistencyViolationErrorDetails


def map_error(exc: Exception, stream: str = "$all", expected: Expected = None) -> StoreError:
    """The :mod:`decider.stores.errors` exception for a client exception (or a failed gRPC
    call, or a store error already: returned as it is).

    ``esdbclient``'s ``WrongCurrentVersion`` carries the actual revision only in its message,
    worded in two fixed ways: "Stream 'x' does not exist" and "Stream position of last event is
    N not E"; ``kurrentdbclient``'s also has it as ``actual_version`` (an int, or the
    ``NO_STREAM`` state), and names the stream of a failed multi-stream append.
    """
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, grpc.RpcError):
        return rpc_error(exc, f"call on {stream!r}")
    if isinstance(exc, CLIENT.wrong_version):
        actual = getattr(exc, "actual_version", None)
        named = getattr(exc, "stream_name", None)
        if named and stream == "$all":
            stream = str(named)
        if not isinstance(actual, int) or isinstance(actual, enum.Enum):
            found = _ACTUAL_REVISION.search(str(exc))
            actual = int(found.group(1)) if found else None
        return WrongExpectedVersion(stream, _expected(expected, stream), actual)
    if isinstance(exc, CLIENT.stream_deleted) or (
        isinstance(exc, CLIENT.failed_precondition) and "is deleted" in str(exc)
    ):
        named = getattr(exc, "stream_name", None)
        return StreamDeleted(str(named) if named and stream == "$all" else stream)
    if isinstance(exc, CLIENT.unavailable):
        return StoreUnavailable(f"EventStoreDB did not answer: {_shown(exc)}")
    return StoreError(f"EventStoreDB error on {stream!r}: {_shown(exc)}")


@contextlib.contextmanager
def mapped(stream: str = "$all", expected: Expected = None) -> Iterator[None]:
    """A client exception raised inside is raised as :func:`map_error`'s error (``from`` it)."""
    try:
        yield
    except CLIENT.base_error as exc:
        raise map_error(exc, stream, expected) from exc


def opening_error(uri: str, exc: Exception) -> StoreError:
    """The error for a client that could not be made for ``uri``: a connection string it
    refuses (``ValueError``) is :class:`~decider.stores.errors.UnsupportedStoreURI`; a failed
    discovery is :func:`map_error`'s. Neither shows a secret of ``uri``."""
    if isinstance(exc, ValueError):
        return UnsupportedStoreURI(uri, str(exc))
    error = map_error(exc)
    shown = redact_text(str(error), uri)
    if shown != str(error) and type(error) in (StoreError, StoreUnavailable):
        return type(error)(shown)
    return error


def rpc_error(exc: grpc.RpcError, doing: str) -> StoreError:
    """The error for a failed gRPC call the adapter made itself; ``doing`` names the call
    (``"read"``, ``"append call"``, ...)."""
    code = exc.code() if isinstance(exc, grpc.Call) else None
    if code in UNAVAILABLE:
        return StoreUnavailable(f"EventStoreDB did not answer ({doing}): {_name(code)}")
    return StoreError(f"EventStoreDB {doing} failed: {_name(code)}: {_details(exc)}")


def records_error(exc: grpc.RpcError, expected: Mapping[str, ExpectedRevision]) -> StoreError:
    """The error for a failed ``AppendRecords`` call (KurrentDB 26.1) of the streams in
    ``expected`` (each stream's expected revision, in the request's order).

    A failed check comes back as ``FAILED_PRECONDITION`` listing every violation in the
    trailers: the first in the server's order is raised. KurrentDB lists them all, which can
    pass the client's limit on received metadata (16 KiB: a redelivered batch whose many
    streams are written already): ``RESOURCE_EXHAUSTED``. Nothing was written and a check
    failed, but which one cannot be read: the first checked stream stands for it, and the
    caller reads the streams (the adapter drops the appends already stored, and finds a real
    conflict).
    """
    code = exc.code() if isinstance(exc, grpc.Call) else None
    if code in UNAVAILABLE:
        return rpc_error(exc, "append")
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED and "metadata" in _details(exc):
        checked = [stream for stream, wanted in expected.items() if wanted is not ANY]
        if checked:
            return WrongExpectedVersion(checked[0], expected[checked[0]], None)
    if code is grpc.StatusCode.FAILED_PRECONDITION and isinstance(exc, grpc.Call):
        violation = _first_violation(exc)
        if violation is not None:
            stream, actual = violation.stream, violation.actual_state
            if actual == _TOMBSTONED:
                return StreamDeleted(stream)
            return WrongExpectedVersion(
                stream, expected.get(stream, ANY), actual if actual >= 0 else None
            )
    return StoreError(f"EventStoreDB refused the append: {_name(code)}: {_details(exc)}")


def append_error(response: Any, stream: str, expected: ExpectedRevision) -> StoreError:
    """The error for a ``BatchAppendResp`` that answers an append of ``expected`` to ``stream``
    with its ``error`` (a ``google.rpc.Status``), or with a success that has no revision."""
    if response.WhichOneof("result") != "error":
        return StoreError(f"EventStoreDB answered an append to {stream!r} without a revision")
    error = response.error
    details = error.details
    if details.Is(shared_pb2.WrongExpectedVersion.DESCRIPTOR):
        wrong: Any = shared_pb2.WrongExpectedVersion()
        details.Unpack(wrong)
        actual = (
            int(wrong.current_stream_revision)
            if wrong.WhichOneof("current_stream_revision_option") == "current_stream_revision"
            else None
        )
        return WrongExpectedVersion(stream, expected, actual)
    if details.Is(shared_pb2.StreamDeleted.DESCRIPTOR):
        return StreamDeleted(stream)
    if details.Is(shared_pb2.Timeout.DESCRIPTOR):
        return StoreUnavailable(f"EventStoreDB timed out appending to {stream!r}")
    return StoreError(
        f"EventStoreDB error on {stream!r}: {_redacted(error.message) or 'append failed'}"
        f" ({details.type_url.rpartition('/')[2] or 'no details'})"
    )


def closed_channel(exc: ValueError) -> StoreUnavailable:
    """The error for a call started on a channel that was closed under it (grpc raises
    ``ValueError``): the client reconnected, or the store is closing."""
    return StoreUnavailable(f"EventStoreDB connection closed: {exc}")


def ended(call: str) -> StoreUnavailable:
    """The error for a call that never ends by itself but did (``call`` names it): the
    server went away or cancelled it."""
    return StoreUnavailable(f"EventStoreDB ended the {call}")


def store_closed() -> StoreError:
    """The error for a call on a closed store."""
    return StoreError(CLOSED)


def closed_while_waiting() -> StoreUnavailable:
    """The outcome of an append still waiting for its answer when the store closed: it may or
    may not have been written."""
    return StoreUnavailable(CLOSED)


def _expected(expected: Expected, stream: str) -> ExpectedRevision | None:
    if isinstance(expected, Mapping):
        return expected.get(stream, ANY)
    return expected


def _first_violation(call: grpc.Call) -> Any | None:
    """The first stream-state violation in the call's rich status, if it has one."""
    for key, value in call.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        status: Any = error_details_pb2.Status.FromString(value)
        for detail in status.details:
            if detail.Is(_Violations.DESCRIPTOR):
                found: Any = _Violations()
                detail.Unpack(found)
                for violation in found.violations:
                    if violation.HasField("stream_state"):
                        return violation.stream_state
    return None


def _name(code: grpc.StatusCode | None) -> str:
    return "no status" if code is None else code.name


def _details(exc: grpc.RpcError) -> str:
    details = exc.details() if isinstance(exc, grpc.Call) else None
    return _redacted(details or "") or "no details"


def _shown(exc: Exception) -> str:
    return _redacted(repr(exc))


def _redacted(text: str) -> str:
    """``text`` with every URI in it shown by :func:`redact_uri` (no password)."""
    return _URI.sub(lambda found: redact_uri(found[0]), text)
