"""The replay guard: recognise a command concluded before a crash, so it is not carried out twice.

Commands conclude out of order (a pool runs them side by side), and their outcomes are committed
as they conclude, while the checkpoint is the low-water mark: so after a crash the next run sees
again commands whose outcome is stored. On a :class:`~decider.stores.protocol.TransactionalStore`
the command processor remembers the last position it committed an outcome for past the
checkpoint (the *concluded mark*, :func:`concluded_mark_name`); only commands up to it are
checked. Elsewhere (EventStoreDB) outcomes and checkpoint are separate writes, so every command
a subscription delivers before it caught up is checked. A command whose outcome of this round is
stored (its results stream, or its park record) is recognised as concluded (a handler is not
asked twice, so its answer cannot flip from results to parked or back).
"""

from __future__ import annotations

from decider import event_id
from decider.processors.app import streams
from decider.processors.app.messages import PARKED
from decider.stores.protocol import EventStore, Filter, RecordedEvent


class ReplayGuard:
    """Knows, for one subscription's life, whether a delivered command may be a replay."""

    def __init__(self, store: EventStore, ledger: str, *, transactional: bool) -> None:
        self.store = store
        self.ledger = ledger
        self.transactional = transactional
        self._open = True
        self._end: int | None = None
        self._high: int | None = None
        self._parked_ids: set[str] | None = None
        self._start: int | None = None

    def restart(self, concluded_mark: int | None = None, start: int | None = None) -> None:
        """A new subscription after ``start``: what it delivers before catching up may be a
        replay (on a transactional store: only up to ``concluded_mark``)."""
        self._open, self._end, self._parked_ids = True, None, None
        self._high, self._start = concluded_mark, start

    def caught_up(self, position: int | None) -> None:
        """History (and so any replay of work done before a crash) ends at ``position``."""
        self._open, self._end = False, position

    def concluded(
        self,
        handler: str,
        event: RecordedEvent,
        round_key: str,
        committed: int | None,
    ) -> bool:
        """Whether this round of the command already has a stored outcome (a replay).

        An outcome past the checkpoint (``committed``) can only be stored up to the concluded
        mark (transactional store), or in what a subscription delivers before it caught up.
        """
        if self.transactional:
            if self._high is None or event.position > self._high:
                return False
            if committed is not None and event.position <= committed:
                return False
        elif not self._open and (self._end is None or event.position > self._end):
            return False
        command_id = str(event.id)
        if self.store.read_stream(streams.results_stream(handler, command_id), 0, 1):
            return True
        if self._parked_ids is None:
            self._parked_ids = self._parked_since(self._start)
        return str(park_record_id(self.ledger, command_id, round_key)) in self._parked_ids

    def _parked_since(self, position: int | None) -> set[str]:
        """The ids of the park records after ``position``: those a replay may have written.

        A park record comes after the command (or retry request) it concludes in the log,
        and so after any checkpoint that has not passed that command.
        """
        found: set[str] = set()
        flt = Filter(stream_prefixes=(self.ledger,), event_types=(PARKED,))
        while page := self.store.read_all(position, 1000, flt):
            found.update(str(e.id) for e in page if e.stream == self.ledger)
            position = page[-1].position
        return found


def concluded_mark_name(processor: str) -> str:
    """The checkpoint name of the last position ``processor`` committed an outcome for."""
    return f"{processor}.concluded"


def park_cause(command_id: str, round_key: str) -> str:
    """What a park record's id derives from: the command and the round (retry request)."""
    return f"{command_id}/{round_key}"


def park_record_id(ledger: str, command_id: str, round_key: str) -> object:
    """The id of the park record of ``command_id`` in round ``round_key``."""
    return event_id(ledger, park_cause(command_id, round_key), 0)
