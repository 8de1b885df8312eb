"""Replay checks of stored instances: would the current code record what the store holds?

:func:`replay_stored` reads instance streams of an App's workflows from a store and replays
each through the current ``decide`` and ``evolve`` with :func:`decider.testing.replay_check`;
:func:`assert_stored_replays` is the pytest helper, and ``decider replay-check`` the command
line. Reading only: nothing is written to the store.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from decider.codec import BEGAN
from decider.processors.app.decoding import decode_event, decode_metadata
from decider.processors.app.definition import AppDefinition, WorkflowRegistration
from decider.processors.engine.reading import read_all, read_stream
from decider.stores.protocol import EventStore, Filter, RecordedEvent
from decider.testing import ReplayReport, replay_check

_CANCEL_REQUESTED = "decider.CancelRequested"
"""The stored type name of :class:`decider.CancelRequested`."""


@attrs.frozen
class StoredReplay:
    """The replay of one stored instance: its stream, the workflow version that began it (from
    its ``Began`` event's metadata, ``None`` if none was recorded) and the report."""

    stream: str
    began_version: str | None
    report: ReplayReport

    def __str__(self) -> str:
        version = f" (began by version {self.began_version})" if self.began_version else ""
        return f"{self.stream}{version}: {self.report.difference or 'replays the same'}"


def replay_stored(
    store: EventStore, app: AppDefinition, *, workflow: str | None = None, limit: int | None = None
) -> list[StoredReplay]:
    """Replay the stored instances of ``app``'s workflows (or of one), in the order they began,
    at most ``limit`` of them; one :class:`StoredReplay` each.

    Raises :class:`KeyError` for a ``workflow`` the app does not have, and
    :class:`~decider.stores.errors.CorruptEvent` for a stored event that cannot be decoded.
    """
    registrations = [r for name, r in app.workflows.items() if workflow in (None, name)]
    if not registrations:
        raise KeyError(f"no workflow {workflow!r} in app {app.name!r}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    replays: list[StoredReplay] = []
    for began in _began(store, registrations):
        if limit is not None and len(replays) >= limit:
            break
        registration = app.workflow_of_stream(began.stream)
        if registration is None or registration not in registrations:
            continue
        records = read_stream(store, began.stream)
        history = [decode_event(app.codec, record) for record in records]
        report = replay_check(
            registration.workflow,
            history,
            decides_cancel=_CANCEL_REQUESTED in registration.inputs,
        )
        version = decode_metadata(app.codec, records[0]).workflow_version if records else None
        replays.append(StoredReplay(began.stream, version, report))
    return replays


def assert_stored_replays(
    store: EventStore, app: AppDefinition, *, workflow: str | None = None, limit: int | None = None
) -> list[StoredReplay]:
    """pytest helper: every stored instance replays the same through the current code.

    Raises :class:`AssertionError` naming each instance that differs and where; returns the
    replays otherwise.
    """
    replays = replay_stored(store, app, workflow=workflow, limit=limit)
    differing = [replay for replay in replays if not replay.report.ok]
    if differing:
        raise AssertionError(
            f"{len(differing)} of {len(replays)} stored instances would not be recorded the same "
            "by the current code:\n" + "\n".join(str(replay) for replay in differing)
        )
    return replays


def _began(store: EventStore, registrations: list[WorkflowRegistration]) -> Iterator[RecordedEvent]:
    flt = Filter(
        stream_prefixes=tuple(r.stream_prefix for r in registrations), event_types=(BEGAN,)
    )
    yield from read_all(store, flt)
