"""``decider run``: an App's processors as one service process, with a periodic progress line.

The service stops gracefully on SIGINT or SIGTERM (:meth:`Service.run_forever`): each
processor finishes what it has in hand and stores its checkpoint, and the next run resumes
from there. A SIGKILL loses nothing either: what was not committed is done again, once in
effect.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from decider.processors.app.definition import AppDefinition
from decider.processors.cli.loading import UsageError
from decider.processors.engine.base import Processor
from decider.processors.operate.operations import (
    HEARTBEAT_EVERY,
    beat,
    clear_heartbeat,
    heartbeat_name,
)
from decider.processors.operate.stuck import StuckWatcher
from decider.processors.service import metrics as service_metrics
from decider.processors.service.service import Service
from decider.stores.errors import WrongExpectedVersion
from decider.stores.protocol import CheckpointStore, EventStore

COUNTERS = ("handled", "conflicts", "carried_out", "parked", "in_flight", "backing_off", "fired")
"""The processor counters the progress line shows, where a processor has them."""


def progress_line(service: Service) -> str:
    """One line: each processor's committed position and counters, and the errors met."""
    prefix = f"{service.app.name}."
    parts = [_processor_part(p, prefix) for p in service.processors]
    errors = len(service.errors)
    if errors:
        parts.append(f"errors={errors}")
    return "progress: " + " | ".join(parts)


def _processor_part(processor: Processor, prefix: str) -> str:
    name = processor.name.removeprefix(prefix)
    fields = [f"{name} @{processor.committed if processor.committed is not None else '-'}"]
    for counter in COUNTERS:
        value = getattr(processor, counter, None)
        if isinstance(value, int):
            fields.append(f"{counter}={value}")
    pending = getattr(processor, "pending", None)
    if isinstance(pending, list):
        fields.append(f"pending={len(pending)}")
    return " ".join(fields)


class ProgressReporter:
    """Logs :func:`progress_line` every ``interval`` seconds while it changes (an idle service
    stays quiet), on a daemon thread; :meth:`stop` logs a last line.

    At the same pace it logs a WARNING once for each instance that became stuck (see
    :class:`~decider.processors.operate.stuck.StuckWatcher`), where a workflow has a
    ``progress_within``.
    """

    def __init__(self, service: Service, interval: float, logger: logging.Logger) -> None:
        self.service = service
        self.interval = interval
        self.logger = logger
        self.stuck = StuckWatcher(service.store, service.app)
        self._stop = threading.Event()
        self._last = ""
        self._thread = threading.Thread(target=self._loop, name="decider:progress", daemon=True)

    def start(self) -> None:
        """Start logging (nothing is logged if ``interval`` is not positive)."""
        if self.interval > 0:
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread, then log the final line if it says something new."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._emit()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._emit()
            self._check_stuck()

    def _check_stuck(self) -> None:
        try:
            found = self.stuck.poll()
        except Exception as exc:
            self.logger.warning("stuck instances not checked: %r", exc)
            return
        for instance in found:
            self.logger.warning(
                "instance %s is stuck: no event since %s, longer than its workflow's "
                "progress_within (%s)",
                instance.stream,
                instance.updated_at.isoformat(timespec="seconds"),
                instance.limit,
                extra={"stream": instance.stream, "workflow": instance.workflow},
            )

    def _emit(self) -> None:
        if not self.service.processors:
            return
        line = progress_line(self.service)
        if line != self._last:
            self._last = line
            self.logger.info("%s", line)


class Heartbeat:
    """While the block runs, a daemon thread writes the service's heartbeat every
    :data:`~decider.processors.operate.operations.HEARTBEAT_EVERY` seconds (so ``decider reset``
    knows a service holds the app); the heartbeat is cleared when the block ends.

    A failed write is logged and tried again at the next beat: it never stops the service.
    """

    def __init__(self, store: EventStore, app: AppDefinition) -> None:
        self.store = store
        self.app = app
        self._stop = threading.Event()
        self._last = 0
        self._thread = threading.Thread(target=self._loop, name="decider:heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        if isinstance(self.store, CheckpointStore):
            self._beat()
            self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
            with contextlib.suppress(Exception):
                assert isinstance(self.store, CheckpointStore)
                clear_heartbeat(self.store, self.app, self._last)

    def _loop(self) -> None:
        while not self._stop.wait(HEARTBEAT_EVERY):
            self._beat()

    def _beat(self) -> None:
        assert isinstance(self.store, CheckpointStore)
        try:
            self._last = beat(self.store, self.app)
        except WrongExpectedVersion:
            # Another service of the app beat since (EventStoreDB checks the checkpoint's
            # revision): it is alive too; read its beat, so the next write expects it.
            with contextlib.suppress(Exception):
                self.store.load_checkpoint(heartbeat_name(self.app))
        except Exception:
            logging.getLogger(__name__).warning("heartbeat not written", exc_info=True)


class EarlySignals:
    """SIGINT/SIGTERM handlers for the time before (and around) :meth:`Service.run_forever`.

    A signal that comes while the app is imported and the store opened is remembered rather
    than killing the process, so ``decider run`` stops cleanly (status 0) at any moment; a
    context manager that restores the previous handlers. Only the main thread can install
    handlers; elsewhere it does nothing.
    """

    def __init__(self) -> None:
        self.received = threading.Event()
        self._previous: dict[signal.Signals, Any] = {}

    def __enter__(self) -> EarlySignals:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.received.set()


def run_service(
    service: Service,
    progress_interval: float,
    logger: logging.Logger,
    early: threading.Event | None = None,
) -> None:
    """Run ``service`` until SIGINT/SIGTERM, logging progress; returns once it has stopped.

    ``early`` is set by a signal that came before :meth:`Service.run_forever` installed its
    own handlers (while it starts the processors): the service is then stopped as soon as it
    runs. Raises :class:`TimeoutError` if a processor did not stop in time (a hung handler).
    """
    reporter = ProgressReporter(service, progress_interval, logger)
    done = threading.Event()
    forwarder = threading.Thread(
        target=_forward, args=(service, early, done), name="decider:signals", daemon=True
    )
    reporter.start()
    if early is not None:
        forwarder.start()
    try:
        service.run_forever()
    finally:
        done.set()
        if early is not None:
            early.set()  # wakes the forwarder so it returns
            forwarder.join()
        reporter.stop()


def _forward(service: Service, early: threading.Event, done: threading.Event) -> None:
    early.wait()
    while not done.is_set():
        if service.running:
            with contextlib.suppress(TimeoutError):  # run_forever's own stop() reports it
                service.stop()
            return
        done.wait(0.01)


@contextlib.contextmanager
def metrics_endpoint(args: argparse.Namespace) -> Iterator[None]:
    """``--metrics-port``: serve the metrics for Prometheus while the block runs, and log where
    (:func:`~decider.processors.service.metrics.endpoint`); a port that cannot be served, or
    the ``metrics`` extra missing, is a usage error."""
    try:
        served = contextlib.ExitStack()
        port = served.enter_context(service_metrics.endpoint(args.metrics_port, args.metrics_host))
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    with served:
        if port is not None:
            logging.getLogger(__name__).info(
                "metrics served on http://%s:%d/metrics", args.metrics_host, port
            )
        yield
