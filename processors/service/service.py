"""The Service: every processor of an App in one process, as threads.

::

    service = Service(app, store, clock=SystemClock())
    service.start()
    service.wait_until(lambda: ..., timeout=10)   # or service.wait_idle(timeout=10)
    service.stop()                                # or: service.run_forever() (SIGINT/SIGTERM)

One workflow processor per workflow, one command processor, one timer processor. Each resumes
from its stored checkpoint, so a service started again (or a new one on the same store) goes on
where the last one stopped. ``stop()`` lets each processor finish the batch in hand and store
its checkpoint.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from decider.processors.app.definition import AppDefinition
from decider.processors.app.errors import ProcessorDied
from decider.processors.commands.consumer_group import (
    ConsumerGroupCommandProcessor,
    check_consumer_group,
)
from decider.processors.commands.pool import HandlerLoad
from decider.processors.commands.processor import CommandProcessor
from decider.processors.engine.base import Context, Processor
from decider.processors.engine.clock import Clock, Signal, SystemClock
from decider.processors.group import partitions
from decider.processors.group.membership import PartitionGroup
from decider.processors.service import gc_tuning
from decider.processors.service import metrics as service_metrics
from decider.processors.timers.processor import TimerProcessor
from decider.processors.workflows.cache import DEFAULT_CACHE_SIZE
from decider.processors.workflows.processor import WorkflowProcessor
from decider.processors.workflows.router import InputRouter, start_routing
from decider.processors.workflows.state_stored import StateStoredProcessor
from decider.stores.protocol import CheckpointStore, EventStore

_SAFETY_RECHECK = 0.05


class Service:
    """Runs an App's processors on a store until stopped.

    Guarantees: every input is handled at least once and takes effect once (derived ids,
    expected revisions, message-id deduplication); checkpoints only move past work that is
    stored. The store must implement :class:`~decider.stores.protocol.CheckpointStore`; a
    :class:`~decider.stores.protocol.TransactionalStore` gets group commits.

    WARNING: a handler's side effects outside the store may happen more than once (after a
    crash or a retry); handlers receive the command id as an idempotency key for that.

    ``consumer_group`` (EventStoreDB/KurrentDB only; ``""``: the default name): the command
    processor takes the commands from that persistent subscription, shared out by the server
    between every process that joins it (:mod:`decider.processors.commands.consumer_group`); a
    ``ValueError`` on any other store, or with a partition ``group``.

    Each module logs to its own logger under ``decider`` (``decider.processors.service.service``,
    ``decider.processors.engine.base``...), with context in ``extra`` fields (``processor``,
    ``stream``, ``position``, ``command_id``, ``event_type``). ``logger``, if given, takes
    every line of the service and its processors instead (the fields are still added).

    The first service started in a process tunes Python's garbage collector for it
    (:func:`~decider.processors.service.gc_tuning.tune_once`): the objects alive then are
    frozen out of every later collection and the youngest generation is collected every
    ``gc_young_threshold`` net allocations (default
    :data:`~decider.processors.service.gc_tuning.YOUNG_THRESHOLD`, Python's is 700).
    ``gc_young_threshold=0`` leaves the collector as it is. WARNING: the collector's settings
    are the whole process's (they stay after the service stops), and garbage in reference
    cycles lives longer (up to that many allocations).
    """

    def __init__(
        self,
        app: AppDefinition,
        store: EventStore,
        clock: Clock | None = None,
        *,
        batch_size: int = 500,
        cache_size: int = DEFAULT_CACHE_SIZE,
        logger: logging.Logger | None = None,
        group: PartitionGroup | None = None,
        consumer_group: str | None = None,
        gc_young_threshold: int = gc_tuning.YOUNG_THRESHOLD,
    ) -> None:
        if not isinstance(store, CheckpointStore):
            raise TypeError(
                f"{type(store).__name__} cannot store checkpoints: a Service needs a store that "
                "implements decider.stores.protocol.CheckpointStore"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if gc_young_threshold < 0:
            raise ValueError(f"gc_young_threshold must be at least 0, got {gc_young_threshold}")
        if not app.workflows:
            raise ValueError(f"app {app.name!r} has no workflow to run")
        if consumer_group is not None:
            check_consumer_group(store, group)
        self.app = app
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.batch_size = batch_size
        self.cache_size = cache_size
        self.logger = logger or logging.getLogger(__name__)
        """The service's own logger (``decider.processors.service.service``, or the one given)."""
        self._given_logger = logger
        self.group = group
        """The group this service shares the app's work with (``None``: it does all of it);
        started and stopped (its leases released) with the service."""
        self.consumer_group = consumer_group
        """The EventStoreDB/KurrentDB consumer group the command processor joins (``""``:
        the default name, the processor's; ``None``: a catch-up subscription, no group)."""
        self.gc_young_threshold = gc_young_threshold
        """The collector's young threshold this service sets as it starts, if it is the
        process's first to (0: it leaves the collector alone)."""
        if group is not None:
            group.on_change(self._leases_changed)
        self.processors: list[Processor] = []
        self._threads: list[threading.Thread] = []
        self._stop = Signal()
        self._progress = threading.Condition()
        self._version = 0
        self._state_lock = threading.Lock()
        self.failure: ProcessorDied | None = None
        """Set when a processor's thread ended while the service was running."""

    # -- life cycle -----------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the processors' threads are running."""
        return any(thread.is_alive() for thread in self._threads)

    def start(self) -> None:
        """Start every processor from its checkpoint, each on its own thread."""
        with self._state_lock:
            if self.running:
                raise RuntimeError("the service is already running")
            self._stop = Signal()
            self.failure = None
            # Start-up is over (the app built, the store open): freeze its objects.
            gc_tuning.tune_once(self.gc_young_threshold)
            context = Context(
                app=self.app,
                store=self.store,
                checkpoints=self.store,
                clock=self.clock,
                stop=self._stop,
                progress=self._on_progress,
                batch_size=self.batch_size,
                logger=self._given_logger,
                group=self.group,
            )
            self.processors = [
                (StateStoredProcessor if registration.stored == "state" else WorkflowProcessor)(
                    context, registration, self.cache_size
                )
                for registration in self.app.workflows.values()
            ]
            commands = (
                CommandProcessor(context)
                if self.consumer_group is None
                else ConsumerGroupCommandProcessor(context, self.consumer_group or None)
            )
            self.processors += [commands, TimerProcessor(context)]
            if self.group is not None and self.app.workflows and partitions.routes_once(self.store):
                start_routing(self.store, self.app, self.store)  # before any processor reads
                self.processors.append(InputRouter(context))
            if self.group is not None:
                self.group.start()
            self._threads = [
                threading.Thread(target=self._run, args=(p,), name=f"decider:{p.name}", daemon=True)
                for p in self.processors
            ]
            for thread in self._threads:
                thread.start()
            service_metrics.watch(self)
        self.logger.info(
            "service %r started: %s",
            self.app.name,
            ", ".join(p.name for p in self.processors),
            extra={"app": self.app.name},
        )

    def stop(self, timeout: float = 30.0) -> None:
        """Stop gracefully: each processor finishes its batch in hand and stores its checkpoint.

        Handler calls in hand get up to half of ``timeout`` (at most
        :data:`~decider.processors.commands.processor.STOP_GRACE`) to return; a command whose
        call did not is carried out again on the next start (the checkpoint never passed it).
        Raises :class:`TimeoutError` if a processor's thread is still running after ``timeout``
        seconds.
        """
        for processor in self.processors:
            if isinstance(processor, CommandProcessor):
                processor.stop_grace = min(processor.stop_grace, timeout / 2)
        self._stop.set()
        for processor in self.processors:
            processor.stop()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if self.group is not None and not alive:
            self.group.stop()
        self._on_progress()
        if alive:
            raise TimeoutError(f"still running after {timeout}s: {', '.join(alive)}")
        self.logger.info("service %r stopped", self.app.name, extra={"app": self.app.name})

    def run_forever(self) -> None:
        """Start, run until SIGINT or SIGTERM (or :meth:`stop` from another thread), then stop.

        Signal handlers can only be installed from the main thread; elsewhere it just waits.
        Raises :class:`~decider.processors.app.errors.ProcessorDied` if a processor's thread ended
        unexpectedly (the service stopped then), so the process exits non-zero.
        """
        self.start()
        stop = self._stop
        previous: dict[signal.Signals, Any] = {}

        def on_signal(signum: int, frame: FrameType | None) -> None:
            self.logger.info(
                "service %r: signal %d, stopping",
                self.app.name,
                signum,
                extra={"app": self.app.name, "signal": signum},
            )
            stop.set()

        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                previous[signum] = signal.signal(signum, on_signal)
        try:
            while not stop.wait(1.0):
                pass
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self.stop()
        if self.failure is not None:
            raise self.failure

    def __enter__(self) -> Service:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- observing ------------------------------------------------------------------------

    @property
    def errors(self) -> list[BaseException]:
        """The last unexpected errors the processors met (each then resumed from its
        checkpoint): at most :data:`~decider.processors.engine.base.ERRORS_KEPT` per processor."""
        return [error for p in self.processors for error in p.errors.recent()]

    @property
    def error_count(self) -> int:
        """How many unexpected errors the processors met in all (kept or not)."""
        return sum(p.errors.count for p in self.processors)

    def handler_load(self) -> list[HandlerLoad]:
        """Each handler's commands now: in flight, backing off, queued, and parked by this
        run (empty before :meth:`start`)."""
        for processor in self.processors:
            if isinstance(processor, CommandProcessor):
                return processor.load()
        return []

    def processor(self, name_suffix: str) -> Processor:
        """The running processor whose name ends with ``name_suffix`` (e.g. ``"commands"``)."""
        for processor in self.processors:
            if processor.name.endswith(name_suffix):
                return processor
        raise KeyError(f"no processor named *{name_suffix} in {self.app.name!r}")

    def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` holds, re-checking whenever a processor makes progress.

        Returns whether it held within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._progress:
                seen = self._version
            if predicate():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self._progress:
                # The predicate may read state that changes without progress (the store,
                # written from outside), so it is checked again every so often too.
                if self._version == seen:
                    self._progress.wait(min(remaining, _SAFETY_RECHECK))

    def is_idle(self) -> bool:
        """Whether no processor has anything to do now (pending timers not yet due aside).

        Each processor's committed position is compared with its filtered log, as of one
        consistent moment; any processor that wrote since makes the answer ``False``.
        """
        if not self.running:
            return False
        with self._progress:
            seen = self._version
            views = [(p, p.idle_position()) for p in self.processors]
        for processor, position in views:
            if not processor.holds_work():
                continue  # another process of the group does this work
            if processor.has_due_work():
                return False
            if self.store.read_all(position, 1, processor.reading):
                return False
        with self._progress:
            return self._version == seen

    def wait_idle(self, timeout: float) -> bool:
        """Wait until :meth:`is_idle`; whether it happened within ``timeout`` seconds."""
        return self.wait_until(self.is_idle, timeout)

    def _run(self, processor: Processor) -> None:
        """A processor's thread: if it ends while the service runs, the service stops."""
        try:
            processor.run()
        except BaseException as exc:  # the thread ends either way; the log keeps the traceback
            if self._stop.is_set():
                self.logger.exception(
                    "%s ended while stopping", processor.name, extra={"processor": processor.name}
                )
            else:
                self._died(processor, exc)
            return
        if not self._stop.is_set():
            self._died(processor, None)

    def _died(self, processor: Processor, exc: BaseException | None) -> None:
        self.failure = ProcessorDied(processor.name)
        self.logger.critical(
            "service %r: processor %s ended unexpectedly; stopping the service",
            self.app.name,
            processor.name,
            exc_info=exc,
            extra={"app": self.app.name, "processor": processor.name},
        )
        self._stop.set()
        for other in self.processors:
            other.stop()
        self._on_progress()

    def _leases_changed(self) -> None:
        """What this process holds changed: each processor whose share changed resubscribes
        (from the checkpoints of what it holds now)."""
        for processor in self.processors:
            if processor.share.moved():
                processor.stop()
        self._on_progress()

    def _on_progress(self) -> None:
        with self._progress:
            self._version += 1
            self._progress.notify_all()
