"""The names each store can hold: stream names, event types and checkpoint names.

Names are often built from data (a workflow instance's id becomes part of its stream name), so
a name a store cannot hold is bad input, not an outage. Every store checks each name it is
given, before it writes or reads anything, against its :class:`NameRules`, and raises
:class:`~decider.stores.errors.InvalidName` (a
:class:`~decider.stores.errors.PermanentStoreError`) naming the limit broken. Without the check
the driver fails instead, in ways that look transient or escape the store's error tree
(``UnicodeEncodeError`` from sqlite3, an index-row-size error from PostgreSQL).

=============  ==============================================================================
every store    a ``str`` that UTF-8 can encode (no lone surrogate, as in ``"PR-\\ud800"``)
               and holds no NUL character (PostgreSQL's ``text`` cannot hold one, SQLite's
               string functions stop at one: no store takes it, so an app moves between them)
PostgreSQL     also a stream name or checkpoint name of at most
               :data:`POSTGRES_MAX_NAME_BYTES` UTF-8 bytes (the ``UNIQUE (stream, revision)``
               index holds a row of about 2.7 KB at most)
=============  ==============================================================================
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from decider.stores.errors import InvalidName
from decider.stores.protocol import MAX_PARTITION_KEY, NewEvent, check_partition_key

STREAM = "stream name"
"""The ``kind`` of :class:`~decider.stores.errors.InvalidName` for a stream name."""
EVENT_TYPE = "event type"
"""The ``kind`` of :class:`~decider.stores.errors.InvalidName` for an event type."""
CHECKPOINT = "checkpoint name"
"""The ``kind`` of :class:`~decider.stores.errors.InvalidName` for a checkpoint name."""

POSTGRES_MAX_NAME_BYTES = 1000
"""The longest stream or checkpoint name PostgreSQL stores, in UTF-8 bytes: well under the
btree's row limit (about 2,700 bytes) so that an index row with the revision and the event id
always fits, whatever the characters."""


@attrs.frozen
class NameRules:
    """What one store accepts as a name.

    Every store: a ``str`` that UTF-8 encodes, without a NUL character. ``max_name_bytes``:
    the longest stream or checkpoint name in UTF-8 bytes (``None``: no limit); event types are
    not indexed and have no length limit.
    """

    max_name_bytes: int | None = None

    def check(self, kind: str, name: str) -> None:
        """Return if a store with these rules can hold ``name`` as a ``kind``; else raise
        :class:`~decider.stores.errors.InvalidName` naming the broken limit."""
        if not isinstance(name, str):
            raise InvalidName(kind, repr(name), f"must be a str, not {type(name).__name__}")
        if name.isascii():  # the common case: one byte per character, nothing to encode
            size = len(name)
        else:
            try:
                size = len(name.encode())
            except UnicodeEncodeError as exc:
                raise InvalidName(
                    kind,
                    name,
                    f"holds a lone surrogate at index {exc.start}; UTF-8 cannot encode it",
                ) from None
        if "\x00" in name:
            raise InvalidName(kind, name, f"holds a NUL character at index {name.index(chr(0))}")
        if self.max_name_bytes is not None and kind != EVENT_TYPE and size > self.max_name_bytes:
            raise InvalidName(
                kind,
                name,
                f"is {size} UTF-8 bytes long; the store holds at most {self.max_name_bytes}",
            )

    def check_stream(self, stream: str) -> None:
        """:meth:`check` for a stream name."""
        self.check(STREAM, stream)

    def check_append(self, stream: str, events: Sequence[NewEvent]) -> None:
        """:meth:`check` for a stream name and the types of the events appended to it; and
        each event's partition key (:func:`~decider.stores.protocol.check_partition_key`,
        ``ValueError``)."""
        if not (  # check's common case (a plain ASCII name within the limit) with no call
            type(stream) is str
            and stream.isascii()
            and "\x00" not in stream
            and (self.max_name_bytes is None or len(stream) <= self.max_name_bytes)
        ):
            self.check(STREAM, stream)
        for event in events:
            key = event.partition_key
            if key is not None and (type(key) is not int or not 0 <= key <= MAX_PARTITION_KEY):
                check_partition_key(key)  # the slow check: a bool, not an int, out of range
            event_type = event.type
            if type(event_type) is not str or event_type not in _GOOD_TYPES:
                self.check(EVENT_TYPE, event_type)
                if len(_GOOD_TYPES) >= _GOOD_TYPES_KEPT:
                    _GOOD_TYPES.clear()
                _GOOD_TYPES.add(event_type)


_GOOD_TYPES: set[str] = set()
"""Event types that passed :meth:`NameRules.check` (whatever the rules: a type has no length
limit), so an append checks each of an app's few types once, not every event's."""

_GOOD_TYPES_KEPT = 4096
"""How many types :data:`_GOOD_TYPES` holds before it starts again."""


DEFAULT = NameRules()
"""The rules of the memory, SQLite and EventStoreDB stores: UTF-8, no NUL, any length."""

POSTGRES = NameRules(max_name_bytes=POSTGRES_MAX_NAME_BYTES)
"""The rules of the PostgreSQL store: no NUL, names of at most 1,000 UTF-8 bytes."""
