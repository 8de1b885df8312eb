"""Which instance streams a workflow processor may presume new, without reading them first.

On every store the first input of an instance that is not cached costs a read of its stream
(a round trip on a remote one: EventStoreDB/KurrentDB, PostgreSQL; a query on SQLite), which
is nearly always empty: that input is what begins the instance. :class:`FreshStreams` learns,
per input type, whether the reads of the streams that type's inputs go to keep finding
nothing. Once :data:`PRESUME_AFTER` reads in a row found no
stream, streams routed to by that type are presumed new: decided on the workflow's initial
state and appended with ``NO_STREAM``, with no read.

A wrong presumption costs time, never correctness: ``NO_STREAM`` makes the append fail on a
stream that exists (nothing is written), the engine resyncs that stream and decides its input
again, and the type stops being presumed until as many empty reads in a row again (so a
restart, whose first inputs go to instances begun before it, reads before it presumes).
Appending the same events with the same ids to a stream that holds just them is idempotent,
which is the right outcome for a redelivered first input too.

>>> fresh = FreshStreams(after=2)
>>> fresh.presumes("Report")
False
>>> fresh.read("Report", found=False)
>>> fresh.read("Report", found=False)
>>> fresh.presumes("Report")
True
>>> fresh.wrong("Report")
>>> fresh.presumes("Report")
False
"""

from __future__ import annotations

PRESUME_AFTER = 16
"""How many reads in a row must find no stream before an input type's streams are presumed new."""


class FreshStreams:
    """Per input type, how many stream reads in a row found no stream (see the module)."""

    __slots__ = ("_after", "_empty", "presumed")

    def __init__(self, after: int = PRESUME_AFTER) -> None:
        self._after = after
        self._empty: dict[str, int] = {}
        self.presumed = 0
        """How many streams were presumed new (not read)."""

    def presumes(self, input_type: str) -> bool:
        """Whether a stream that an input of ``input_type`` begins may be presumed new."""
        return self._empty.get(input_type, 0) >= self._after

    def read(self, input_type: str, *, found: bool) -> None:
        """A read of the stream an input of ``input_type`` went to found it (or not)."""
        self._empty[input_type] = 0 if found else self._empty.get(input_type, 0) + 1

    def wrong(self, input_type: str) -> None:
        """A stream presumed new for an input of ``input_type`` existed: read again first."""
        self._empty[input_type] = 0
