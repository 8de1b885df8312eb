"""The codec's JSON (decider._json): msgspec where it is installed, the standard library
otherwise, and the same bytes, objects and errors either way."""

from __future__ import annotations

import enum
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from decider import Codec, DecodeError, Metadata, _json
from samples.order_fulfilment.messages import PaymentTimedOut

STDLIB = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


class _Level(enum.IntEnum):
    HIGH = 3


class _Name(enum.StrEnum):
    ANN = "ann"


EDGES = [
    b'{"a":"\\ud800"}',  # a lone surrogate: json reads it, msgspec does not
    b'{"a":"x\ny"}',  # a raw control character
    b'{"a":1e400}',  # out of a float's range: json reads inf
    b'{"a":NaN}',
    b'\xef\xbb\xbf{"a":1}',  # a byte-order mark
    b'{"a":1}x',
    b'{"a":"\xff"}',  # not UTF-8
    b'{"a":"\xed\xa0\x80"}',  # an encoded surrogate
    b'{"a":01}',
    b'{"a":[1,]}',
    b'{"a":' + b"1" * 5000 + b"}",  # more digits than int() takes
    b'{"a":123456789012345678901234567890,"b":-0.0,"c":1E5,"a":2}',
    b'\x00{"a":1}',
    b'"\xff\xfe"',
    "{}".encode("utf-16"),  # json reads UTF-16 and UTF-32
    b"",
    b" [1, 2.5, null, true] ",
]

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and the infinities too: json writes them, msgspec would write null
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@pytest.fixture(params=["msgspec", "stdlib"])
def implementation(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """Each test runs with msgspec (where installed) and with the standard library alone."""
    if request.param == "stdlib":
        monkeypatch.setattr(_json, "_fast_encode", None)
        monkeypatch.setattr(_json, "_fast_decode", None)
    elif not _json.FAST:
        pytest.skip("msgspec is not installed")
    yield request.param


def _outcome(call: Any, *args: Any) -> str:
    """What a call returns (as its repr, so NaN equals NaN), or its error's type and words."""
    try:
        return repr(call(*args))
    except BaseException as exc:
        return f"{type(exc).__name__}: {exc}"


def test_msgspec_is_installed_for_the_tests() -> None:
    assert _json.FAST  # the dev and test extras install the 'fast' extra


@pytest.mark.parametrize("data", EDGES)
def test_loads_gives_what_json_loads_gives_or_its_error(implementation: str, data: bytes) -> None:
    assert _outcome(_json.loads, data) == _outcome(json.loads, data)


@given(doc=_json_values)
def test_loads_reads_every_document_as_json_does(doc: Any) -> None:
    data = STDLIB.encode(doc).encode("utf-8", "surrogatepass")
    assert _outcome(_json.loads, data) == _outcome(json.loads, data)


@given(data=st.binary(max_size=40))
def test_loads_of_any_bytes_is_json_loads(data: bytes) -> None:
    assert _outcome(_json.loads, data) == _outcome(json.loads, data)


@given(doc=_json_values)
def test_dumps_plain_writes_the_bytes_json_writes(doc: Any) -> None:
    assert _outcome(_json.dumps_plain, doc) == _outcome(lambda d: STDLIB.encode(d).encode(), doc)


@pytest.mark.parametrize(
    "doc",
    [
        {"after": 1e16, "small": 1e-7, "big": [1.5e300, -2e-300]},  # msgspec: 1e16, json: 1e+16
        {"tiny": 6.103515625e-05, "n": [1.5e-05, -9.999e-05, 0.0001]},  # msgspec: 0.000015
        1.5e-05,
        {"nan": float("nan"), "inf": float("inf")},  # msgspec: null, json: NaN, Infinity
        {"none": None, "text": '\u2028\x7f\x00"\\/é😀'},
        {"surrogate": "\ud800"},  # json's UnicodeEncodeError
        {"id": "6f1f3b0e-4c1a-5d8e-9b7a-2f0c1d9e8a47", "n": 10**30},
    ],
)
def test_dumps_plain_is_json_at_the_edges(implementation: str, doc: Any) -> None:
    assert _outcome(_json.dumps_plain, doc) == _outcome(lambda d: STDLIB.encode(d).encode(), doc)


@given(doc=st.dictionaries(st.text(), st.text(), max_size=6))
def test_dumps_strings_writes_the_bytes_json_writes(doc: dict[str, str]) -> None:
    assert _outcome(_json.dumps_strings, doc) == _outcome(lambda d: STDLIB.encode(d).encode(), doc)


@pytest.mark.parametrize(
    "doc",
    [
        {"text": '\u2028\u2029\x7f\x00\x1f\x08\x0c\n\r\t"\\/é😀', "n": "null", "e": ":1e16"},
        {"surrogate": "\ud800"},  # json's UnicodeEncodeError
        {"\udfff": "key"},
    ],
)
def test_dumps_strings_is_json_at_the_edges(implementation: str, doc: dict[str, str]) -> None:
    assert _outcome(_json.dumps_strings, doc) == _outcome(lambda d: STDLIB.encode(d).encode(), doc)


def _nested(depth: int, inner: Any) -> Any:
    """``inner`` in ``depth`` lists (dicts, if it is a dict)."""
    for _ in range(depth):
        inner = {"k": inner} if isinstance(inner, dict) else [inner]
    return inner


_converted_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.sampled_from([_Level.HIGH, _Name.ANN, datetime(2026, 1, 2, tzinfo=UTC), 2**70, (1, "t")]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text() | st.integers(), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(doc=_converted_values)
def test_dumps_converted_writes_the_bytes_json_writes(doc: Any) -> None:
    assert _outcome(_json.dumps_converted, doc) == _outcome(
        lambda d: STDLIB.encode(d).encode(), doc
    )


@pytest.mark.parametrize(
    "doc",
    [
        {"a": _nested(20, {})},
        _nested(20, "deep"),
        {"big": 2**64, "small": -(2**63) - 1, "text": "\u2028é\x00"},
        {"surrogate": "\ud800"},  # json's UnicodeEncodeError
        {1: "int key", "level": _Level.HIGH, "name": _Name.ANN},
    ],
)
def test_dumps_converted_is_json_at_the_edges(implementation: str, doc: Any) -> None:
    assert _outcome(_json.dumps_converted, doc) == _outcome(
        lambda d: STDLIB.encode(d).encode(), doc
    )


def test_stored_bytes_and_decode_errors_are_the_same_with_either(implementation: str) -> None:
    codec = Codec()
    metadata = Metadata(message_id="m-1", correlation_id="c\u2028é", causation_id="0e5")
    assert codec.encode_metadata(metadata) == (
        b'{"message_id":"m-1","correlation_id":"c\xe2\x80\xa8\xc3\xa9","causation_id":"0e5"}'
    )
    assert codec.with_ids(b'{"x":1e+16,"y":NaN}', "m", "c") == (
        b'{"x":1e+16,"y":NaN,"message_id":"m","causation_id":"c"}'
    )
    _, data = codec.encode_message(PaymentTimedOut(order_id="o-1"))
    assert codec.decode_message("orders.PaymentTimedOut", data) == PaymentTimedOut(order_id="o-1")
    with pytest.raises(DecodeError) as caught:
        codec.decode_message("orders.PaymentTimedOut", b'{"order_id": "o-1",}')
    try:
        json.loads(b'{"order_id": "o-1",}')
    except ValueError as exc:
        stdlib_reason = str(exc)
    assert str(caught.value) == (
        f"cannot decode 'orders.PaymentTimedOut': invalid JSON: {stdlib_reason}"
    )
    with pytest.raises(DecodeError, match="'message_id' is missing or not a string"):
        codec.decode_metadata(b'{"message_id": 1}')


def test_a_metadata_field_that_is_not_a_string_is_refused_as_json_refuses_it(
    implementation: str,
) -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        Codec().encode_metadata(Metadata(message_id=object()))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("stored", "decoded"),
    [
        (b'{"message_id":"m","correlation_id":"c"}', Metadata(message_id="m", correlation_id="c")),
        (b'{"message_id":"m","causation_id":null}', Metadata(message_id="m")),
        (b'{"message_id":"m","reuses":"x","n":1}', Metadata(message_id="m")),
        (
            b'{"message_id":"m","recorded_at":"2026-01-02T03:04:05+00:00"}',
            Metadata(message_id="m", recorded_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ),
    ],
)
def test_metadata_decodes_its_fields_and_passes_over_others(
    stored: bytes, decoded: Metadata
) -> None:
    assert Codec().decode_metadata(stored) == decoded


@pytest.mark.parametrize("field", ["correlation_id", "causation_id", "tracestate"])
def test_a_metadata_text_field_that_is_not_a_string_is_refused_by_name(field: str) -> None:
    with pytest.raises(DecodeError, match=f"'{field}' must be a string"):
        Codec().decode_metadata(json.dumps({"message_id": "m", field: 1}).encode())


@given(
    st.text(),
    st.none() | st.text(),
    st.none() | st.text(),
    st.none() | st.text(),
    st.none() | st.text(),
)
def test_metadata_made_once_per_decision_is_metadata_bytes(
    message_id: str,
    correlation_id: str | None,
    causation_id: str | None,
    traceparent: str | None,
    tracestate: str | None,
) -> None:
    codec = Codec()
    try:
        expected: bytes | type[Exception] = codec.metadata_bytes(
            message_id,
            correlation_id=correlation_id,
            causation_id=causation_id,
            traceparent=traceparent,
            tracestate=tracestate,
        )
    except UnicodeEncodeError:  # a lone surrogate
        expected = UnicodeEncodeError
    try:
        after = codec.metadata_after_id(
            correlation_id=correlation_id,
            causation_id=causation_id,
            traceparent=traceparent,
            tracestate=tracestate,
        )
        made: bytes | type[Exception] = codec.metadata_of_id(message_id, after)
    except UnicodeEncodeError:
        made = UnicodeEncodeError
    assert made == expected
    if expected is not UnicodeEncodeError:
        new_id = uuid.uuid5(uuid.NAMESPACE_DNS, str(len(message_id)))
        assert codec.metadata_of_event_id(new_id, after) == codec.metadata_bytes(
            str(new_id),
            correlation_id=correlation_id,
            causation_id=causation_id,
            traceparent=traceparent,
            tracestate=tracestate,
        )
