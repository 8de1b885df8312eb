"""Stuck instances, watched while a service runs: each is reported once per stall.

A :class:`StuckWatcher` follows the instance streams of the workflows that have a
``progress_within`` (``App.workflow(..., progress_within=...)``), reading only what is new at
each :meth:`~StuckWatcher.poll`, and keeps each running instance's last event time. An
instance whose last event is older than its workflow's setting is stuck; ``poll`` returns it
once, and again only after it progressed and stalled anew.

WARNING: the first poll reads every event of those workflows' instance streams; memory grows
with the number of running instances (finished ones are dropped).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import attrs

from decider import Lifecycle
from decider.codec import lifecycle_of_type
from decider.processors.app.definition import AppDefinition, WorkflowRegistration
from decider.stores.protocol import EventStore, Filter

_PAGE = 1000


def is_stuck(
    status: Lifecycle, updated_at: datetime, limit: timedelta | None, now: datetime
) -> bool:
    """Whether an instance is stuck at ``now``: running, with no event since ``updated_at`` for
    longer than ``limit`` (``None``: no limit, never stuck). The one definition the watcher,
    ``decider list --stuck`` and the console share.

    >>> from datetime import datetime, timedelta
    >>> then = datetime(2026, 1, 1)
    >>> is_stuck(Lifecycle.RUNNING, then, timedelta(minutes=5), then + timedelta(minutes=6))
    True
    >>> is_stuck(Lifecycle.FAILED, then, timedelta(minutes=5), then + timedelta(minutes=6))
    False
    """
    return status is Lifecycle.RUNNING and limit is not None and now - updated_at > limit


@attrs.frozen
class StuckInstance:
    """A running instance with no event for longer than ``limit``."""

    stream: str
    workflow: str
    updated_at: datetime
    limit: timedelta


@attrs.define
class _Running:
    registration: WorkflowRegistration
    updated_at: datetime
    reported: bool = False


class StuckWatcher:
    """Follows the instance streams; :meth:`poll` tells which instances became stuck."""

    def __init__(
        self, store: EventStore, app: AppDefinition, now: Callable[[], datetime] | None = None
    ) -> None:
        self.store = store
        self.app = app
        self._now = now or (lambda: datetime.now(UTC))
        watched = [r for r in app.workflows.values() if r.progress_within is not None]
        self._filter = Filter(stream_prefixes=tuple(r.stream_prefix for r in watched))
        self._watched = {r.workflow.name for r in watched}
        self._position: int | None = None
        self._running: dict[str, _Running] = {}

    @property
    def active(self) -> bool:
        """Whether some workflow has a ``progress_within`` (else there is nothing to watch)."""
        return bool(self._watched)

    def poll(self) -> list[StuckInstance]:
        """Read what is new; the instances that became stuck since the last poll."""
        if not self.active:
            return []
        self._catch_up()
        now = self._now()
        found = []
        for stream, entry in self._running.items():
            limit = entry.registration.progress_within
            assert limit is not None
            if not entry.reported and is_stuck(Lifecycle.RUNNING, entry.updated_at, limit, now):
                entry.reported = True
                name = entry.registration.workflow.name
                found.append(StuckInstance(stream, name, entry.updated_at, limit))
        return found

    def stuck_counts(self) -> Counter[str]:
        """How many instances of each watched workflow are stuck now (as of the last poll)."""
        now = self._now()
        counts: Counter[str] = Counter()
        for entry in self._running.values():
            limit = entry.registration.progress_within
            if is_stuck(Lifecycle.RUNNING, entry.updated_at, limit, now):
                counts[entry.registration.workflow.name] += 1
        return counts

    def _catch_up(self) -> None:
        while page := self.store.read_all(self._position, _PAGE, self._filter):
            for record in page:
                owner = self.app.workflow_of_stream(record.stream)
                if owner is None or owner.workflow.name not in self._watched:
                    continue
                status = lifecycle_of_type(record.type)
                if status is not None and status is not Lifecycle.RUNNING:
                    self._running.pop(record.stream, None)  # finished: never stuck again
                    continue
                entry = self._running.get(record.stream)
                if entry is None:
                    if status is not Lifecycle.RUNNING:
                        continue  # an event after the instance finished (recorded as Ignored)
                    self._running[record.stream] = _Running(owner, record.recorded_at)
                else:
                    entry.updated_at = record.recorded_at
                    entry.reported = False  # progressed: a new stall is reported again
            self._position = page[-1].position
            if len(page) < _PAGE:
                return
