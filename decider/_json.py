"""JSON bytes in and out for the codec: msgspec where it is installed (the ``fast`` extra),
the standard library's ``json`` otherwise, with the same bytes and the same errors either way.

msgspec's encoder and decoder take about a tenth of the standard library's time, but they
differ from it at the edges, so each is used only where its answer is the standard library's:

- :func:`loads` decodes with msgspec and, where msgspec refuses the bytes (malformed JSON,
  ``NaN``, a number out of a float's range, a lone surrogate, a byte-order mark, text that is
  not UTF-8, nesting too deep), decodes again with ``json.loads``: a document msgspec reads
  gives the same objects, and every other one gives ``json``'s result or ``json``'s error.
- :func:`dumps_plain` encodes a document made only of JSON's own types (``dict`` with string
  keys, ``list``, ``str``, ``int``, ``float``, ``bool``, ``None``: what :func:`loads`
  returned, or strings the codec put together) with msgspec, compact and in key order as
  ``json`` writes it; a document whose bytes could differ (a float written with an exponent,
  which msgspec writes ``1e16`` and ``json`` ``1e+16``; a float under 0.0001, which msgspec
  writes ``0.000015`` and ``json`` ``1.5e-05``; a ``null``, which is how msgspec writes
  ``NaN``) is written again by ``json``.
- :func:`dumps_converted` writes what a converter made (a message unstructured, which may hold
  a value ``json`` refuses and msgspec would write) with msgspec only after a walk finds
  nothing in it but ``dict`` with ``str`` keys, ``list``, ``str``, ``int``, ``bool`` and
  ``None`` (exactly those types: no float, no subclass), whose bytes are json's; anything
  else, with ``json``.
- :func:`dumps` writes anything with ``json``, always.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = ["FAST", "dumps", "dumps_converted", "dumps_plain", "dumps_strings", "loads"]

# json.dumps builds a new encoder on every call made with options; one shared encoder (it keeps
# no state between calls) writes the same compact, UTF-8 JSON for less.
_JSON_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)

_fast_encode: Callable[[Any], bytes] | None
_fast_decode: Callable[[bytes], Any] | None
try:
    import msgspec
except ImportError:  # the 'fast' extra is not installed: the standard library alone
    _fast_encode = _fast_decode = None
else:
    _fast_encode = msgspec.json.Encoder().encode
    _fast_decode = msgspec.json.Decoder().decode

FAST = _fast_encode is not None
"""Whether msgspec is installed and used (``pip install 'decider-workflows[fast]'``)."""

# Where msgspec's bytes may differ from json's: a number in a value's place (after ':', ',' or
# '[', or first) with an exponent, or under 0.0001 (msgspec writes 0.000015 where json writes
# 1.5e-05), or a null (msgspec writes NaN and infinities as null). A string that happens to
# hold such text only costs a second encoding. Three scans, not one pattern with an ``\A``
# alternative: that one is tried at every byte (about 5 us for a metadata document, more than
# json's whole encoding), these scan for a first byte.
_UNSURE_NUMBER = re.compile(rb"[:,\[]-?(?:[0-9]+(?:\.[0-9]+)?e|0\.0000)")
_LEADING_UNSURE_NUMBER = re.compile(rb"-?(?:[0-9]+(?:\.[0-9]+)?e|0\.0000)")


def _unsure(data: bytes) -> bool:
    return (
        b"null" in data
        or _UNSURE_NUMBER.search(data) is not None
        or _LEADING_UNSURE_NUMBER.match(data) is not None
    )


def dumps(doc: Any) -> bytes:
    """``doc`` as compact UTF-8 JSON bytes, written by the standard library's ``json``.

    >>> dumps({"b": 1, "a": "é"})
    b'{"b":1,"a":"\\xc3\\xa9"}'
    """
    return _JSON_ENCODER.encode(doc).encode()


def dumps_plain(doc: Any) -> bytes:
    """``doc``, made only of JSON's own types, as the bytes :func:`dumps` writes (msgspec's
    where they are the same, else ``json``'s; ``json``'s error where it refuses ``doc``).

    >>> dumps_plain({"after": 1e16, "id": "m"}) == dumps({"after": 1e16, "id": "m"})
    True
    """
    if _fast_encode is not None:
        try:
            data = _fast_encode(doc)
        except Exception:  # a lone surrogate, a key that is not a string: json's own answer
            return dumps(doc)
        if not _unsure(data):
            return data
    return dumps(doc)


_WALK_DEPTH = 16
"""How deep :func:`dumps_converted` walks a document before leaving it to ``json``."""

_SCALARS = frozenset({str, int, bool, type(None)})


def _plain(doc: Any, depth: int) -> bool:
    """Whether ``doc`` holds only what msgspec writes as ``json`` does (see the module)."""
    kind = type(doc)
    if kind is dict:
        if depth >= _WALK_DEPTH:
            return False
        for key, value in doc.items():
            if type(key) is not str:
                return False
            if type(value) not in _SCALARS and not _plain(value, depth + 1):
                return False
        return True
    if kind is list:
        if depth >= _WALK_DEPTH:
            return False
        for value in doc:
            if type(value) not in _SCALARS and not _plain(value, depth + 1):
                return False
        return True
    return kind in _SCALARS


def dumps_converted(doc: Any) -> bytes:
    """``doc`` as the bytes :func:`dumps` writes (or its error): msgspec's where ``doc`` holds
    only JSON's own types without floats (a walk checks; its bytes are then json's), else
    ``json``'s.

    >>> doc = {"id": "m", "n": [1, True, None]}
    >>> dumps_converted(doc) == dumps(doc)
    True
    """
    if _fast_encode is not None and _plain(doc, 0):
        try:
            return _fast_encode(doc)
        except Exception:  # a lone surrogate, an int out of msgspec's range: json's own answer
            pass
    return dumps(doc)


def dumps_strings(doc: dict[str, str]) -> bytes:
    """``doc``, a flat ``dict`` whose keys and values are all ``str``, as the bytes
    :func:`dumps` writes (the codec's metadata).

    With strings alone msgspec's bytes are json's (the same escapes, non-ASCII written as it
    is), so they are taken without the check :func:`dumps_plain` makes; a lone surrogate,
    which msgspec refuses, is written by ``json``.

    >>> dumps_strings({"id": "m\\u00e9", "n": "1e16"}) == dumps({"id": "m\\u00e9", "n": "1e16"})
    True
    """
    if _fast_encode is not None:
        try:
            return _fast_encode(doc)
        except Exception:  # a lone surrogate: json's own answer
            pass
    return dumps(doc)


def loads(data: bytes) -> Any:
    """The document in JSON ``data``: ``json.loads(data)``, and its error where it fails.

    >>> loads(b'{"a": [1, 2.5, null]}')
    {'a': [1, 2.5, None]}
    """
    if _fast_decode is not None:
        try:
            return _fast_decode(data)
        except Exception:  # msgspec refuses it: json reads it, or says why not in its words
            pass
    return json.loads(data)
