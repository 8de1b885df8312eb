"""The EventStoreDB adapter's error map (:mod:`decider.stores.esdb._errors`), as a table: each
client exception, gRPC status, answer error and closed channel, and the store error it becomes.
Every message says what happened and shows no password of a URI. No server is needed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import grpc
import pytest

from decider.stores.errors import (
    StoreError,
    StoreUnavailable,
    StreamDeleted,
    UnsupportedStoreURI,
    WrongExpectedVersion,
)
from decider.stores.esdb._client import CLIENT
from decider.stores.esdb._errors import (
    append_error,
    closed_channel,
    closed_while_waiting,
    ended,
    map_error,
    mapped,
    opening_error,
    records_error,
    rpc_error,
    store_closed,
)
from decider.stores.esdb._proto import error_details_pb2, shared_pb2, streams_pb2
from decider.stores.esdb._proto import streams_v2_errors_pb2 as v2_errors
from decider.stores.protocol import ANY, NO_STREAM

SECRET = "s3cr3t-pw"
URI = f"esdb://admin:{SECRET}@node1:2113?Tls=true"
"""A connection string with a password, which a driver's text may hold."""
SAID = f"cannot reach {URI}"
"""A driver's message that names the URI."""


class FailedCall(grpc.RpcError, grpc.Call):  # type: ignore[misc]  # grpc is untyped
    """A failed gRPC call as grpc raises one: an ``RpcError`` that is also a ``Call``."""

    def __init__(
        self, code: grpc.StatusCode, details: str = "", trailers: Sequence[Any] = ()
    ) -> None:
        self._code = code
        self._details = details
        self._trailers = tuple(trailers)

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Any:
        return self._trailers

    def initial_metadata(self) -> Any:
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> float | None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return False


def _made(kind: type[Exception], text: str) -> Exception:
    """An exception of the client's ``kind``; kurrentdbclient's tombstone names its stream."""
    try:
        return kind(text)
    except TypeError:
        made: Exception = kind(text, stream_name="s")  # type: ignore[call-arg]
        return made


def _names(kinds: type[Exception] | tuple[type[Exception], ...]) -> list[type[Exception]]:
    return list(kinds) if isinstance(kinds, tuple) else [kinds]


# -- client exceptions ---------------------------------------------------------------------

CLIENT_TABLE: list[tuple[type[Exception], str, type[StoreError]]] = [
    *((kind, "down", StoreUnavailable) for kind in _names(CLIENT.unavailable)),
    *((kind, "Stream 's' is deleted", StreamDeleted) for kind in _names(CLIENT.stream_deleted)),
    (CLIENT.failed_precondition, "Event stream 's' is deleted.", StreamDeleted),
    (CLIENT.failed_precondition, "not the leader's term", StoreError),
    (CLIENT.not_found, "no such subscription", StoreError),
    (CLIENT.already_exists, "subscription exists", StoreError),
    (CLIENT.base_error, "something else", StoreError),
]


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    CLIENT_TABLE,
    ids=[f"{kind.__name__}-{expected.__name__}" for kind, _, expected in CLIENT_TABLE],
)
def test_a_client_exception_becomes_the_store_error_of_the_table(
    kind: type[Exception], text: str, expected: type[StoreError]
) -> None:
    mapped_error = map_error(_made(kind, f"{text}: {SAID}"), "s")
    assert type(mapped_error) is expected
    shown = str(mapped_error)
    if expected is StreamDeleted:
        assert shown == "stream 's' is deleted"
    else:  # the client's exception, and what it said
        assert kind.__name__ in shown and text in shown
        assert "node1:2113" in shown
    assert SECRET not in shown


@pytest.mark.parametrize(
    ("text", "actual"),
    [("Stream position of last event is 4 not 3", 4), ("Stream 's' does not exist", None)],
)
def test_a_wrong_version_names_stream_expected_and_actual(text: str, actual: int | None) -> None:
    error = map_error(CLIENT.wrong_version(text), "s", 3)
    assert isinstance(error, WrongExpectedVersion)
    assert (error.stream, error.expected, error.actual) == ("s", 3, actual)


def test_a_multi_stream_conflict_expects_what_its_stream_expected() -> None:
    error = map_error(CLIENT.wrong_version("Stream 'b' does not exist"), expected={"a": 1})
    assert isinstance(error, WrongExpectedVersion)
    assert error.expected is ANY  # a stream the mapping does not name expected ANY


@pytest.mark.skipif(CLIENT.package != "kurrentdbclient", reason="kurrentdbclient's fields")
def test_kurrentdbclient_names_the_stream_and_revision_of_a_multi_stream_failure() -> None:
    wrong: Any = CLIENT.wrong_version
    error = map_error(wrong("conflict", stream_name="b", actual_version=5), expected={"b": 4})
    assert isinstance(error, WrongExpectedVersion)
    assert (error.stream, error.expected, error.actual) == ("b", 4, 5)
    unborn = map_error(wrong("conflict", stream_name="b", actual_version=-1), expected={"b": 4})
    assert isinstance(unborn, WrongExpectedVersion) and unborn.actual is None
    tombstoned: Any = CLIENT.stream_deleted[-1]
    deleted = map_error(tombstoned("gone", stream_name="t"))
    assert type(deleted) is StreamDeleted and deleted.stream == "t"


def test_a_store_error_passes_unchanged() -> None:
    error = StreamDeleted("s")
    assert map_error(error) is error


def test_mapped_raises_the_mapped_error_from_the_client_exception() -> None:
    cause = CLIENT.unavailable[0]("down")
    with pytest.raises(StoreUnavailable) as caught, mapped("s"):
        raise cause
    assert caught.value.__cause__ is cause
    with pytest.raises(KeyError), mapped("s"):  # not the client's: left alone
        raise KeyError("k")


# -- the adapter's own gRPC calls ----------------------------------------------------------

STATUS_TABLE: list[tuple[grpc.StatusCode, type[StoreError]]] = [
    (grpc.StatusCode.UNAVAILABLE, StoreUnavailable),
    (grpc.StatusCode.DEADLINE_EXCEEDED, StoreUnavailable),
    (grpc.StatusCode.CANCELLED, StoreUnavailable),  # the channel closed under the call
    (grpc.StatusCode.INTERNAL, StoreError),
    (grpc.StatusCode.UNKNOWN, StoreError),
    (grpc.StatusCode.PERMISSION_DENIED, StoreError),
    (grpc.StatusCode.UNAUTHENTICATED, StoreError),
    (grpc.StatusCode.NOT_FOUND, StoreError),
    (grpc.StatusCode.UNIMPLEMENTED, StoreError),
    (grpc.StatusCode.FAILED_PRECONDITION, StoreError),  # without a violation
    (grpc.StatusCode.RESOURCE_EXHAUSTED, StoreError),  # not the trailers
]


@pytest.mark.parametrize(("code", "expected"), STATUS_TABLE, ids=[c.name for c, _ in STATUS_TABLE])
@pytest.mark.parametrize("call", ["read", "append call", "AppendRecords"])
def test_a_grpc_status_becomes_the_store_error_of_the_table(
    code: grpc.StatusCode, expected: type[StoreError], call: str
) -> None:
    failed = FailedCall(code, SAID)
    by_records = call == "AppendRecords"
    error = records_error(failed, {"s": 3}) if by_records else rpc_error(failed, call)
    assert type(error) is expected
    assert code.name in str(error)
    assert SECRET not in str(error)


def test_a_failed_call_given_to_map_error_is_mapped_by_its_status() -> None:
    error = map_error(FailedCall(grpc.StatusCode.UNAVAILABLE), "s")
    assert type(error) is StoreUnavailable
    assert "UNAVAILABLE" in str(error)


def _violation(stream: str, expected: int, actual: int) -> tuple[str, bytes]:
    details: Any = v2_errors.AppendConsistencyViolationErrorDetails()
    violation = details.violations.add(check_index=0)
    violation.stream_state.stream = stream
    violation.stream_state.expected_state = expected
    violation.stream_state.actual_state = actual
    status: Any = error_details_pb2.Status(code=9, message="consistency violation")
    status.details.add().Pack(details)
    return ("grpc-status-details-bin", status.SerializeToString())


@pytest.mark.parametrize(
    ("actual", "expected"),
    [(4, (WrongExpectedVersion, 4)), (-1, (WrongExpectedVersion, None)), (-6, (StreamDeleted,))],
    ids=["at-a-revision", "no-stream", "tombstoned"],
)
def test_an_append_records_violation_names_its_stream(
    actual: int, expected: tuple[Any, ...]
) -> None:
    failed = FailedCall(
        grpc.StatusCode.FAILED_PRECONDITION, "violated", [_violation("b", 2, actual)]
    )
    error = records_error(failed, {"a": ANY, "b": 2})
    assert type(error) is expected[0]
    assert error.stream == "b"  # type: ignore[attr-defined]
    if isinstance(error, WrongExpectedVersion):
        assert (error.expected, error.actual) == (2, expected[1])


def test_append_records_trailers_too_big_stand_for_the_first_checked_stream() -> None:
    failed = FailedCall(grpc.StatusCode.RESOURCE_EXHAUSTED, "received metadata size exceeds")
    error = records_error(failed, {"a": ANY, "b": NO_STREAM, "c": 5})
    assert isinstance(error, WrongExpectedVersion)
    assert (error.stream, error.expected, error.actual) == ("b", NO_STREAM, None)


# -- the error in a BatchAppend answer -----------------------------------------------------


def _answer(detail: Any, message: str = "") -> Any:
    response: Any = streams_pb2.BatchAppendResp()
    response.error.message = message
    response.error.details.Pack(detail)
    return response


def test_a_batch_append_answer_error_becomes_the_store_error_of_the_table() -> None:
    wrong: Any = shared_pb2.WrongExpectedVersion(current_stream_revision=7)
    error = append_error(_answer(wrong), "s", 3)
    assert isinstance(error, WrongExpectedVersion)
    assert (error.stream, error.expected, error.actual) == ("s", 3, 7)
    unborn: Any = shared_pb2.WrongExpectedVersion()
    unborn.current_no_stream.SetInParent()
    error = append_error(_answer(unborn), "s", 3)
    assert isinstance(error, WrongExpectedVersion) and error.actual is None
    deleted = append_error(_answer(shared_pb2.StreamDeleted()), "s", ANY)
    assert type(deleted) is StreamDeleted and deleted.stream == "s"
    timeout = append_error(_answer(shared_pb2.Timeout()), "s", ANY)
    assert type(timeout) is StoreUnavailable and "timed out" in str(timeout)
    other = append_error(_answer(shared_pb2.AccessDenied(), SAID), "s", ANY)
    assert type(other) is StoreError
    assert "AccessDenied" in str(other) and "node1" in str(other)
    assert SECRET not in str(other)


def test_a_batch_append_success_without_a_revision_is_a_store_error() -> None:
    response: Any = streams_pb2.BatchAppendResp()
    response.success.no_stream.SetInParent()
    error = append_error(response, "s", ANY)
    assert type(error) is StoreError
    assert "without a revision" in str(error)


# -- channels, calls and the store ---------------------------------------------------------


def test_a_closed_channel_is_unavailable() -> None:
    error = closed_channel(ValueError("Cannot invoke RPC on closed channel!"))
    assert type(error) is StoreUnavailable
    assert "closed channel" in str(error)


def test_a_call_that_ended_by_itself_is_unavailable() -> None:
    error = ended("subscription")
    assert type(error) is StoreUnavailable
    assert str(error) == "EventStoreDB ended the subscription"


def test_a_closed_store_refuses_and_fails_what_waits() -> None:
    assert type(store_closed()) is StoreError
    assert type(closed_while_waiting()) is StoreUnavailable
    assert "closed" in str(store_closed()) and "closed" in str(closed_while_waiting())


# -- opening a client ----------------------------------------------------------------------


def test_a_refused_connection_string_is_unsupported_without_its_password() -> None:
    error = opening_error(URI, ValueError(f"Invalid URI {URI}"))
    assert isinstance(error, UnsupportedStoreURI)
    assert SECRET not in str(error) and "node1:2113" in str(error)


def test_a_failed_discovery_is_unavailable_without_the_password() -> None:
    # the password alone (not in a URI) is hidden too: the store knows its URI here
    discovery = _names(CLIENT.unavailable)[0](f"no leader found at node1 as admin:{SECRET}")
    error = opening_error(URI, discovery)
    assert type(error) is StoreUnavailable
    assert SECRET not in str(error) and "no leader found" in str(error)
