"""What a processor runs with (:class:`Context`): the app, the store, the clock, the stop
signal and, in a group of processes, the group; one per service run, shared by its processors."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from decider.processors.app.definition import AppDefinition
from decider.processors.engine.clock import Clock, Signal
from decider.stores.protocol import CheckpointStore, EventStore

if TYPE_CHECKING:
    from decider.processors.group.membership import PartitionGroup


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
