"""The values a processor's policy and its engine exchange: what a processor runs with
(:class:`Context`), what handling a batch leads to (:class:`Outcome`), an input it cannot handle
(:class:`Skip`) and a unit of work to redo after a conflict (:class:`Unit`).

Apart from the engine (:mod:`decider.processors.engine.base`) so that the committing half of it
(:mod:`decider.processors.engine._committing`) can use them without importing it; import them from
:mod:`decider.processors.engine.base`, which re-exports them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from decider.processors.app.definition import AppDefinition
from decider.processors.engine.clock import Clock, Signal
from decider.stores.protocol import CheckpointStore, EventStore, RecordedEvent, StreamAppend

if TYPE_CHECKING:
    from decider.processors.group.membership import PartitionGroup


@attrs.define
class Outcome:
    """What handling a batch (or part of one) leads to: the appends and the checkpoint to commit
    together, and what to do once they are committed (update caches and counters)."""

    appends: list[StreamAppend] = attrs.Factory(list)
    position: int | None = None
    on_commit: list[Callable[[], None]] = attrs.Factory(list)
    checkpoints: list[tuple[str, int]] = attrs.Factory(list)
    """Under a joint fence only (:meth:`~decider.processors.engine.sharing.Share.fenced_together`):
    checkpoints (or marks kept beside them) at positions of their own, in the same commit."""


class Skip(Exception):
    """Raised by a policy for an input it cannot handle; the reason is recorded."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


Unit = tuple[RecordedEvent | None, Callable[[], Outcome]]
"""A unit of work to redo after a conflict: the input it is for (if one), and how to redo it."""


@attrs.define
class Context:
    """What a processor runs with; shared by the processors of one service run."""

    app: AppDefinition
    store: EventStore
    checkpoints: CheckpointStore
    clock: Clock
    stop: Signal
    progress: Callable[[], None]
    batch_size: int = 500
    logger: logging.Logger | None = None
    """One logger for every processor (``Service(logger=...)``); ``None``: each module's own."""
    group: PartitionGroup | None = None
    """The group this process shares the app's work with (``None``: it does all the work)."""
