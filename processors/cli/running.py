"""``decider run``: an App's processors as one service process, with a periodic progress line.

The service stops gracefully on SIGINT or SIGTERM (:meth:`Service.run_forever`): each
processor finishes what it has in hand and stores its checkpoint, and the next run resumes
from there. A SIGKILL loses nothing either: what was not committed is done again, once in
effect.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from types import FrameType
from typing import Any

from decider.processors.base import Processor
from decider.processors.service import Service

COUNTERS = ("handled", "conflicts", "carried_out", "parked", "in_flight", "backing_off", "fired")
"""The processor counters the progress line shows, where a processor has them."""

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""How ``decider run`` formats its log lines (on stderr)."""


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
    stays quiet), on a daemon thread; :meth:`stop` logs a last line."""

    def __init__(self, service: Service, interval: float, logger: logging.Logger) -> None:
        self.service = service
        self.interval = interval
        self.logger = logger
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

    def _emit(self) -> None:
        if not self.service.processors:
            return
        line = progress_line(self.service)
        if line != self._last:
            self._last = line
            self.logger.info("%s", line)


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
