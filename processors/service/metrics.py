"""The sampled metrics of running services, and the Prometheus endpoint of ``decider run``.

Every :class:`~decider.processors.Service` that starts is watched (weakly: a service that is
gone is forgotten). Its metrics are observable instruments of the OpenTelemetry metrics API,
computed only when a reader collects them (a Prometheus scrape, an SDK's periodic export);
without an SDK nothing is ever computed. Per processor (attribute ``decider.processor``):

- ``decider.processor.lag`` (seconds) and ``decider.processor.lag.positions``: how old the
  oldest input the processor has not concluded is, and how far (in log positions) its newest
  pending input is past its checkpoint (counting at most :data:`LAG_PAGE` pending inputs);
  0 when it has caught up;
- ``decider.processor.handled``, ``.carried_out``, ``.fired``, ``.parked``, ``.skipped``,
  ``.conflicts``: the processors' own counters, where a processor keeps one;
  ``.delivered``: the events the processor's subscriptions delivered to it (what it read of
  the log, before it kept its partitions' inputs); and
  ``.in_flight``, ``.backing_off``: the command pool's calls running and commands waiting to
  retry, now;
- ``decider.cache.hits`` / ``decider.cache.misses`` and ``decider.cache.hit_ratio``: the
  workflow processors' instance caches.

Per workflow (attribute ``decider.workflow``): ``decider.instances`` by ``decider.status``
(each instance's lifecycle events, read incrementally), and ``decider.instances.stuck``, the
running instances without an event for longer than the workflow's ``progress_within`` (see
:mod:`decider.processors.operate.stuck`). The per-event instruments (handler and commit latency,
retries, inputs) are recorded by :mod:`decider.processors.engine.telemetry`.

The app-wide gauges (``decider.instances``, ``decider.instances.stuck``,
``decider.commands.parked``, ``decider.inputs.skipped``) read the app as a whole, not the
process's own work. In a partition group only the process that holds partition
:data:`APP_WIDE_PARTITION` reads and exports them (:func:`app_wide_duty`); the others export
none of them. A process that takes that partition's lease (again) reads them from the log's
start; one that lets it go drops what it read (at its next sample). The per-processor values
stay per process: a processor's lag reads its own
:attr:`~decider.processors.engine.base.Processor.reading` (in a group, of the partitions it
holds), and is 0 where it holds none.

:func:`endpoint` serves all of them for Prometheus to scrape; it needs the ``metrics`` extra
(the OpenTelemetry SDK, its Prometheus exporter and ``prometheus_client``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from decider import Lifecycle
from decider.codec import LIFECYCLE_TYPES
from decider.processors.app import streams
from decider.processors.app.messages import CommandParked, InputSkipped, ParkedCommandRetried
from decider.processors.engine.telemetry import SCOPE
from decider.processors.group.membership import PartitionGroup
from decider.processors.operate.listing import lifecycle_of_type
from decider.processors.operate.skipped import InputRedriven
from decider.processors.operate.stuck import StuckWatcher
from decider.stores.protocol import EventStore, Filter, RecordedEvent

if TYPE_CHECKING:
    from decider.processors.app.definition import AppDefinition
    from decider.processors.engine.base import Processor


class Watched(Protocol):
    """What the metrics read of a running service
    (a :class:`~decider.processors.service.service.Service`)."""

    @property
    def app(self) -> AppDefinition:
        """The app the service runs."""

    @property
    def store(self) -> EventStore:
        """The store the service reads and writes."""

    @property
    def processors(self) -> list[Processor]:
        """The service's processors."""

    @property
    def running(self) -> bool:
        """Whether the service runs now."""

    @property
    def group(self) -> PartitionGroup | None:
        """The partition group the service shares the app's work with (``None``: none)."""


LAG_PAGE = 1000
"""How many pending inputs of a processor a lag sample reads at most."""

SAMPLE_EVERY = 1.0
"""Seconds a sample is reused for: the instruments of one collection share one."""

COUNTERS = ("handled", "carried_out", "fired", "parked", "skipped", "conflicts", "delivered")
"""The processors' counters exported as ``decider.processor.<name>``, where they have one."""

GAUGES = ("in_flight", "backing_off")
"""The processors' current values exported as ``decider.processor.<name>`` (the command
pool's calls running, and commands waiting to retry)."""

APP_WIDE_PARTITION = 0
"""In a partition group, the partition whose holder reads and exports the app-wide gauges."""

_PAGE = 1000
_LOG = logging.getLogger(__name__)


class InstanceCounts:
    """How many instances of each workflow are in each status, from their lifecycle events
    (``Began`` and the terminal ones), reading only what is new at each :meth:`update`.

    Memory is a few counters per workflow, not per instance.
    """

    def __init__(self, store: EventStore, app: AppDefinition) -> None:
        self.store = store
        self.app = app
        self._filter = Filter(
            stream_prefixes=tuple(streams.instance_prefix(w) for w in app.workflows),
            event_types=LIFECYCLE_TYPES,
        )
        self._position: int | None = None
        self.counts: Counter[tuple[str, Lifecycle]] = Counter()

    def update(self) -> Counter[tuple[str, Lifecycle]]:
        """Read the lifecycle events since the last update; the counts by (workflow, status)."""
        while page := self.store.read_all(self._position, _PAGE, self._filter):
            for record in page:
                owner = self.app.workflow_of_stream(record.stream)
                status = lifecycle_of_type(record.type)
                if owner is None or status is None:
                    continue
                name = owner.workflow.name
                if status is not Lifecycle.RUNNING:
                    self.counts[name, Lifecycle.RUNNING] -= 1
                self.counts[name, status] += 1
            self._position = page[-1].position
            if len(page) < _PAGE:
                break
        return self.counts


class LedgerCounts:
    """The commands of an app parked now and its skipped inputs not re-driven yet, from the
    parked-command ledger and the skipped-inputs streams, reading only what is new at each
    :meth:`update`.

    What is parked or skipped now is in the store, whoever parked or skipped it: unlike the
    processors' ``parked`` and ``skipped`` counters, which count what this process did since
    it started (0 in a process started after the parks, or in another process of the app).
    Memory is one id per command parked now and per skip record pending.
    """

    def __init__(self, store: EventStore, app: AppDefinition) -> None:
        self.store = store
        self.app = app
        self._ledger = streams.parked_stream(app.name)
        self._skips = streams.skipped_prefix(app.name)
        self._filter = Filter(stream_prefixes=(self._ledger, self._skips))
        self._position: int | None = None
        self._parked: set[str] = set()
        self._skipped: dict[str, str] = {}
        """The pending skip records' ids, each with its processor."""

    def update(self) -> tuple[int, Counter[str]]:
        """Read the records since the last update; the commands parked now, and the pending
        skipped inputs by processor."""
        while page := self.store.read_all(self._position, _PAGE, self._filter):
            for record in page:
                self._count(record)
            self._position = page[-1].position
            if len(page) < _PAGE:
                break
        return len(self._parked), Counter(self._skipped.values())

    def _count(self, record: RecordedEvent) -> None:
        ledger = record.stream == self._ledger
        if not ledger and not record.stream.startswith(self._skips):
            return  # another app's ledger, whose name starts with this one's
        try:
            message = self.app.codec.decode_message(record.type, record.data)
        except Exception:  # a record that does not decode counts for nothing
            return
        match message:
            case CommandParked(command_id=command_id) if ledger:
                self._parked.add(command_id)
            case ParkedCommandRetried(command_id=command_id) if ledger:
                self._parked.discard(command_id)
            case InputSkipped(processor=processor):
                self._skipped[str(record.id)] = processor
            case InputRedriven(skip_id=skip_id):
                self._skipped.pop(skip_id, None)


def app_wide_duty(service: Watched) -> int | None:
    """Whether ``service`` reads and exports the app-wide gauges now (``None``: it does not),
    as a value that changes whenever the duty comes to it again: without a group it always
    does (-1); in a group while it holds partition :data:`APP_WIDE_PARTITION`, the epoch of
    that lease. So one process of a group at a time, but for a moment around a handoff
    (none, or the old and the new holder)."""
    group = service.group
    if group is None:
        return -1
    lease = group.partitions().get(APP_WIDE_PARTITION)
    return None if lease is None else lease.epoch


class _AppWide:
    """The app-wide readings of one service under one :func:`app_wide_duty`, each from the
    log's start, then what is new."""

    def __init__(self, service: Watched, duty: int) -> None:
        self.duty = duty
        self.instances = InstanceCounts(service.store, service.app)
        self.stuck = StuckWatcher(service.store, service.app)
        self.ledgers = LedgerCounts(service.store, service.app)
        self.instance_counts: Counter[tuple[str, Lifecycle]] | None = None
        self.stuck_counts: Counter[str] | None = None
        self.parked_now: int | None = None
        self.skipped_now: Counter[str] | None = None
        """Each ``None`` until read whole (a store outage may end the first reading part way:
        nothing is exported then, not a partial count)."""

    def take(self) -> None:
        try:
            self.instance_counts = Counter(self.instances.update())
            if self.stuck.active:
                self.stuck.poll()
                self.stuck_counts = self.stuck.stuck_counts()
        except Exception as exc:
            _LOG.debug("no instance sample: %r", exc)
        try:
            self.parked_now, self.skipped_now = self.ledgers.update()
        except Exception as exc:
            _LOG.debug("no parked or skipped sample: %r", exc)


class _Sampler:
    """One service's sampled values, computed at most once per :data:`SAMPLE_EVERY`."""

    def __init__(self) -> None:
        self.app_wide: _AppWide | None = None
        """The app-wide readings, while the service reads them (:func:`app_wide_duty`)."""
        self.lags: dict[str, tuple[float, int]] = {}
        self._taken = -SAMPLE_EVERY
        self._lock = threading.Lock()

    def sample(self, service: Watched) -> _Sampler:
        with self._lock:
            duty = app_wide_duty(service)
            if self.app_wide is not None and self.app_wide.duty != duty:
                self.app_wide = None  # the duty moved: what was read goes with it
            if time.monotonic() - self._taken >= SAMPLE_EVERY:
                self._take(service, duty)
                self._taken = time.monotonic()
        return self

    def _take(self, service: Watched, duty: int | None) -> None:
        """Sample ``service``'s lags, and its app-wide gauges while it has the ``duty``
        (:func:`app_wide_duty`)."""
        now = datetime.now(UTC)
        for processor in list(service.processors):
            if not processor.holds_work():
                # In a group without a partition of this processor: nothing to do here (and
                # its reading, before its first subscription, would be the whole app's).
                self.lags[processor.name] = (0.0, 0)
                continue
            try:
                self.lags[processor.name] = _lag(processor, service.store, now)
            except Exception as exc:  # a store outage: the sample is skipped, not the scrape
                _LOG.debug("no lag sample of %s: %r", processor.name, exc)
        if duty is not None:
            if self.app_wide is None:
                self.app_wide = _AppWide(service, duty)  # from the log's start
            self.app_wide.take()


def _lag(processor: Processor, store: EventStore, now: datetime) -> tuple[float, int]:
    """(seconds, positions) ``processor`` is behind: the age of its oldest pending input, and
    how far its newest pending input (of the first :data:`LAG_PAGE`) is past its position."""
    position = processor.idle_position()
    page = store.read_all(position, LAG_PAGE, processor.reading)
    if not page:
        return 0.0, 0
    start = position if position is not None else page[0].position - 1
    seconds = max(0.0, (now - page[0].recorded_at).total_seconds())
    return seconds, page[-1].position - start


_SERVICES: weakref.WeakKeyDictionary[Watched, _Sampler] = weakref.WeakKeyDictionary()
_SERVICES_LOCK = threading.Lock()


def watch(service: Watched) -> None:
    """Export ``service``'s sampled metrics while it runs (called by ``Service.start``)."""
    with _SERVICES_LOCK:
        if service not in _SERVICES:
            _SERVICES[service] = _Sampler()


def _samples() -> list[tuple[Watched, _Sampler]]:
    with _SERVICES_LOCK:
        watched = list(_SERVICES.items())
    return [(service, sampler.sample(service)) for service, sampler in watched if service.running]


def _app_wide() -> list[tuple[Watched, _AppWide]]:
    """The app-wide readings of the services that read them now."""
    return [(s, sampler.app_wide) for s, sampler in _samples() if sampler.app_wide is not None]


# -- the observable instruments --------------------------------------------------------------


def _lag_seconds(options: CallbackOptions) -> Iterable[Observation]:
    for _, sampler in _samples():
        for name, (seconds, _positions) in sampler.lags.items():
            yield Observation(seconds, {"decider.processor": name})


def _lag_positions(options: CallbackOptions) -> Iterable[Observation]:
    for _, sampler in _samples():
        for name, (_seconds, positions) in sampler.lags.items():
            yield Observation(positions, {"decider.processor": name})


def _counter(attribute: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        totals: Counter[str] = Counter()
        with _SERVICES_LOCK:
            services = [s for s in _SERVICES if s.running]
        for service in services:
            for processor in list(service.processors):
                value = getattr(processor, attribute, None)
                if isinstance(value, int):
                    totals[processor.name] += value
        for name, total in totals.items():
            yield Observation(total, {"decider.processor": name})

    return observe


def _caches() -> Iterator[tuple[str, int, int]]:
    with _SERVICES_LOCK:
        services = [s for s in _SERVICES if s.running]
    for service in services:
        for processor in list(service.processors):
            cache: Any = getattr(processor, "cache", None)
            if cache is not None:
                yield processor.name, cache.hits, cache.misses


def _cache_hits(options: CallbackOptions) -> Iterable[Observation]:
    for name, hits, _ in _caches():
        yield Observation(hits, {"decider.processor": name})


def _cache_misses(options: CallbackOptions) -> Iterable[Observation]:
    for name, _, misses in _caches():
        yield Observation(misses, {"decider.processor": name})


def _cache_ratio(options: CallbackOptions) -> Iterable[Observation]:
    for name, hits, misses in _caches():
        if hits + misses:
            yield Observation(hits / (hits + misses), {"decider.processor": name})


def _instances(options: CallbackOptions) -> Iterable[Observation]:
    for _, readings in _app_wide():
        for (workflow, status), count in (readings.instance_counts or {}).items():
            yield Observation(count, {"decider.workflow": workflow, "decider.status": status.value})


def _parked_now(options: CallbackOptions) -> Iterable[Observation]:
    for service, readings in _app_wide():
        if readings.parked_now is not None:
            yield Observation(readings.parked_now, {"decider.app": service.app.name})


def _skipped_now(options: CallbackOptions) -> Iterable[Observation]:
    for service, readings in _app_wide():
        skipped = readings.skipped_now
        if skipped is None:
            continue
        names = {p.name for p in service.processors} | set(skipped)
        for name in sorted(names):
            labels = {"decider.app": service.app.name, "decider.processor": name}
            yield Observation(skipped[name], labels)


def _stuck(options: CallbackOptions) -> Iterable[Observation]:
    for service, readings in _app_wide():
        stuck = readings.stuck_counts
        if stuck is None:
            continue
        for registration in service.app.workflows.values():
            if registration.progress_within is not None:
                name = registration.workflow.name
                yield Observation(stuck[name], {"decider.workflow": name})


_METER = metrics.get_meter(SCOPE)
_METER.create_observable_gauge(
    "decider.processor.lag",
    [_lag_seconds],
    unit="s",
    description="Age of the oldest input the processor has not concluded (0: caught up).",
)
_METER.create_observable_gauge(
    "decider.processor.lag.positions",
    [_lag_positions],
    unit="{position}",
    description="Log positions from the checkpoint to the newest pending input (0: caught up).",
)
for _name in COUNTERS:
    _METER.create_observable_counter(
        f"decider.processor.{_name}",
        [_counter(_name)],
        description=f"The processors' {_name.replace('_', ' ')} count.",
    )
for _name in GAUGES:
    _METER.create_observable_gauge(
        f"decider.processor.{_name}",
        [_counter(_name)],
        unit="{command}",
        description=f"The processors' commands {_name.replace('_', ' ')} now.",
    )
_METER.create_observable_counter(
    "decider.cache.hits", [_cache_hits], description="Instance cache hits."
)
_METER.create_observable_counter(
    "decider.cache.misses", [_cache_misses], description="Instance cache misses."
)
_METER.create_observable_gauge(
    "decider.cache.hit_ratio", [_cache_ratio], unit="1", description="Instance cache hit ratio."
)
_METER.create_observable_gauge(
    "decider.instances",
    [_instances],
    unit="{instance}",
    description="Instances by workflow and status (sampled).",
)
_METER.create_observable_gauge(
    "decider.commands.parked",
    [_parked_now],
    unit="{command}",
    description="Commands parked now, whoever parked them (the ledger; sampled).",
)
_METER.create_observable_gauge(
    "decider.inputs.skipped",
    [_skipped_now],
    unit="{input}",
    description="Skipped inputs not re-driven yet, by processor (sampled).",
)
_METER.create_observable_gauge(
    "decider.instances.stuck",
    [_stuck],
    unit="{instance}",
    description="Running instances without an event for longer than progress_within.",
)


# -- the Prometheus endpoint -----------------------------------------------------------------


@contextlib.contextmanager
def endpoint(port: int | None, host: str = "127.0.0.1") -> Iterator[int | None]:
    """While the block runs, serve every metric for Prometheus at
    ``http://<host>:<port>/metrics`` (port 0: a free one); yields the port served (``None``
    when ``port`` is ``None``: nothing is served).

    Sets the global OpenTelemetry ``MeterProvider`` (one with a Prometheus reader). Raises
    :class:`ValueError` naming what is wrong: the ``metrics`` extra is not installed, the
    port is out of range or taken, or a ``MeterProvider`` was set already (export through
    that one's readers instead).
    """
    if port is None:
        yield None
        return
    if not 0 <= port <= 65535:
        raise ValueError(f"the metrics port must be between 0 and 65535, got {port}")
    try:
        import prometheus_client
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider
    except ImportError as exc:
        raise ValueError(
            f"serving metrics needs the 'metrics' extra: pip install "
            f"'decider-workflows[metrics]' ({exc.name} is missing)"
        ) from None
    provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
    metrics.set_meter_provider(provider)
    if metrics.get_meter_provider() is not provider:
        provider.shutdown()
        raise ValueError(
            "an OpenTelemetry MeterProvider is set already: add a Prometheus reader to it "
            "instead of --metrics-port"
        )
    try:
        server, thread = prometheus_client.start_http_server(port, addr=host)
    except OSError as exc:
        provider.shutdown()
        raise ValueError(
            f"cannot serve metrics on port {port} of {host} ({exc.strerror})"
        ) from None
    try:
        yield int(server.server_port)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        provider.shutdown()
