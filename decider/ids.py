"""Identifiers: deterministic ids for what a workflow records, prefixed ULIDs for what is new.

Event ids are derived, never random, so that handling the same input against the same state
twice produces the same ids and a retried append is recognised as the same write.
"""

from __future__ import annotations

import hashlib
import re
import uuid

from ulid import ULID

NAMESPACE = uuid.UUID("6f1f3b0e-4c1a-5d8e-9b7a-2f0c1d9e8a47")
"""The uuid5 namespace of every id decider derives."""

_PREFIX = re.compile(r"^[a-z][a-z0-9]{0,15}$")

_NAMESPACE_BYTES = NAMESPACE.bytes
# RFC 4122 version 5 and variant bits, as uuid.uuid5 sets them.
_VERSION_VARIANT_MASK = ~((0xF000 << 64) | (0xC000 << 48))
_VERSION_VARIANT_BITS = (5 << 76) | (0x8000 << 48)
_UUID = uuid.UUID
_new = object.__new__
_set = object.__setattr__  # UUID objects are immutable: its own __init__ sets them this way
_SAFE_UNKNOWN = uuid.SafeUUID.unknown


def event_id(stream: str, cause_id: str, index: int) -> uuid.UUID:
    """The id of the ``index``-th event written to ``stream`` because of message ``cause_id``.

    The same three inputs always give the same id.

    >>> event_id("Fine-1", "msg_1", 0) == event_id("Fine-1", "msg_1", 0)
    True
    >>> event_id("Fine-1", "msg_1", 0) == event_id("Fine-1", "msg_1", 1)
    False
    """
    # uuid.uuid5(NAMESPACE, name), computed without its layers of checks (UUID.__init__'s
    # included: the int is in range by construction): every event the processors write needs
    # one, so this is on the hot path.
    name = f"{stream}\x1f{cause_id}\x1f{index}".encode()
    digest = int.from_bytes(hashlib.sha1(_NAMESPACE_BYTES + name).digest()[:16], "big")
    derived = _new(_UUID)
    _set(derived, "int", (digest & _VERSION_VARIANT_MASK) | _VERSION_VARIANT_BITS)
    _set(derived, "is_safe", _SAFE_UNKNOWN)
    return derived


def new_id(prefix: str) -> str:
    """A new id: ``prefix``, an underscore, then a ULID (sortable by creation time).

    The prefix shows at a glance what the id names (``wf`` a workflow instance, ``msg`` a
    message).

    WARNING: ids sort by creation time to the millisecond only; within one millisecond their
    order is random.

    >>> new_id("msg").startswith("msg_") and len(new_id("msg")) == 30
    True
    """
    if not _PREFIX.match(prefix):
        raise ValueError(
            f"id prefix {prefix!r} must be 1-16 lower-case letters or digits, "
            "starting with a letter"
        )
    return f"{prefix}_{ULID()}"
