"""Snapshots of one workflow's instances: restored on a cold load, written after a commit.

With ``Workflow(snapshot_every=N)`` on a store that is a
:class:`~decider.stores.protocol.SnapshotStore`, the workflow processor loads a cold instance
from its latest snapshot and folds only the events after it; after a commit it writes a
snapshot when the instance passed a multiple of N events (:func:`decider.snapshot_due`), or
when N or more events were folded since the last snapshot it knows of (a stream that was
written before snapshots were turned on, or whose snapshot was ignored: it is rebuilt).

A snapshot is a cache. It is written after the events it reflects are committed, in its own
transaction: a crash in between loses only the snapshot, and the next cold load folds the
events instead. A snapshot that no longer decodes, or whose ``state_version`` is not the
workflow's, is ignored (a warning is logged) and replaced by the next one written.

A snapshot keeps the state only, not the message ids of the inputs the instance handled (for
a long history they cost more to read back than the state): the workflow processor looks an
input that the ids of the events after the snapshot do not account for up in the store
(:class:`~decider.stores.protocol.IdLookupStore`), so an input redelivered after a restore is
still recognised and skipped. Snapshots are therefore taken only on a store that can look ids
up (memory, SQLite and PostgreSQL all can).
"""

from __future__ import annotations

import logging
from typing import Any

from decider import (
    DecodeError,
    Instance,
    StateCodec,
    Workflow,
    WorkflowDefinitionError,
    snapshot_due,
)
from decider.codec import Codec
from decider.stores.errors import StoreError
from decider.stores.protocol import EventStore, IdLookupStore, Snapshot, SnapshotStore

_KNOWN_LIMIT = 100_000
"""How many streams' last snapshot versions are remembered (then the memory starts afresh)."""


class Snapshots:
    """One workflow's snapshots in one store; inert when the workflow or store has none.

    Raises :class:`~decider.WorkflowDefinitionError` at construction if the workflow asks for
    snapshots but its state type cannot be known (see :func:`decider.snapshots.state_type_of`).
    WARNING: a store that is a :class:`~decider.stores.protocol.SnapshotStore` but not an
    :class:`~decider.stores.protocol.IdLookupStore` gets no snapshots (an input older than the
    snapshot could not be recognised as handled).
    """

    def __init__(
        self,
        workflow: Workflow[Any, Any, Any],
        codec: Codec,
        store: EventStore,
        log: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        self.workflow = workflow
        self.log = log
        self.store: SnapshotStore | None = None
        self.states: StateCodec[Any] | None = None
        if (
            workflow.snapshot_every is not None
            and isinstance(store, SnapshotStore)
            and isinstance(store, IdLookupStore)
        ):
            self.store = store
            self.states = StateCodec(workflow, codec)
        self._known: dict[str, int] = {}
        self.restored = 0
        self.ignored = 0
        self.written = 0

    @property
    def enabled(self) -> bool:
        """Whether snapshots are read and written."""
        return self.store is not None

    def restore(self, stream: str) -> Instance[Any] | None:
        """The instance of ``stream`` as its latest usable snapshot holds it, or ``None``.

        A snapshot of another state version or that does not decode is ignored (logged);
        a store failure propagates (the input is retried, as for a failed read).
        """
        if self.store is None or self.states is None:
            return None
        self._remember(stream, 0)
        snapshot = self.store.load_snapshot(stream)
        if snapshot is None:
            return None
        try:
            if snapshot.state_version != self.workflow.state_version:
                raise DecodeError(
                    f"snapshot of {self.workflow.name}",
                    f"its state_version {snapshot.state_version!r} is not the current "
                    f"{self.workflow.state_version!r}",
                )
            restored = self.states.decode(snapshot.data)
            if restored.instance.version != snapshot.revision + 1:
                raise DecodeError(
                    f"snapshot of {self.workflow.name}",
                    f"it holds {restored.instance.version} events but is stored at revision "
                    f"{snapshot.revision}",
                )
        except DecodeError as exc:
            self.ignored += 1
            self.log.warning(
                "%s: ignoring the snapshot of %s at revision %d (it is rebuilt): %s",
                self.workflow.name,
                stream,
                snapshot.revision,
                exc,
            )
            return None
        self.restored += 1
        self._known[stream] = restored.instance.version
        return restored.instance

    def committed(self, stream: str, before: int, instance: Instance[Any]) -> None:
        """After ``stream`` went from ``before`` events to ``instance``: write a snapshot if one
        is due. A failure to write it is logged, never raised (a snapshot is a cache)."""
        if self.store is None or self.states is None:
            return
        after = instance.version
        every = self.workflow.snapshot_every
        assert every is not None
        since = after - self._known.get(stream, after)
        if not (snapshot_due(self.workflow, before, after) or since >= every):
            return
        try:
            data = self.states.encode(instance)
            snapshot = Snapshot(after - 1, self.workflow.state_version, data)
            self.store.save_snapshot(stream, snapshot)
        except (StoreError, WorkflowDefinitionError) as exc:
            self.log.warning(
                "%s: could not write the snapshot of %s at %d events: %s",
                self.workflow.name,
                stream,
                after,
                exc,
            )
            return
        self.written += 1
        self._remember(stream, after)

    def _remember(self, stream: str, version: int) -> None:
        if len(self._known) >= _KNOWN_LIMIT and stream not in self._known:
            self._known.clear()
        self._known[stream] = version
