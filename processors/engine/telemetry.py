"""Tracing and the per-event instruments: OpenTelemetry spans, and the trace context carried
in each stored event's metadata.

Only the OpenTelemetry *API* is used: without an SDK no span is started, not even a no-op one
(whether a tracer SDK is set is looked up at most once a second, and at once after
:func:`set_tracer_provider`), so a hook costs a check and, for the instruments, a timing.
With an SDK (``opentelemetry-instrument``, or a ``TracerProvider`` set by the app module), the
processors write spans:

- ``process <stream>`` (kind CONSUMER): one per input a processor handles (a workflow's input,
  a command carried out, a ``Scheduled`` event read), its parent the trace context stored in
  the input's metadata; the workflow processor adds the events ``route``, ``load`` and
  ``decide`` to it;
- ``handle <command type>``: one per attempt of a command's handler, a child of the command's
  span, with the attempt number and its outcome;
- ``fire <stream>``: one per timer fired, its parent the ``Scheduled`` event's context;
- ``commit <processor>``: one per commit (the append of a batch's events and the checkpoint),
  linked to the spans of the inputs it commits;
- ``send <stream>`` (kind PRODUCER): one per :meth:`App.publish <decider.processors.App.publish>`.

Every event written while a span is current carries its context in its metadata
(``traceparent`` / ``tracestate``, W3C trace context), so what the event causes, in any
processor or process, continues the same trace: one workflow instance's whole life is one
trace. Without an SDK a stored context is passed on unchanged, so a traced process further on
still joins the trace.

Attributes follow OpenTelemetry's messaging conventions (``messaging.system`` is
``"decider"``, ``messaging.destination.name`` the stream, ``messaging.message.id``,
``messaging.consumer.group.name`` the processor), plus ``decider.processor``,
``decider.position``, ``decider.workflow``, ``decider.instance_id``, ``decider.command_id``
and ``decider.message.type``.

The synchronous instruments are recorded here too (handler latency, retries, commit latency,
inputs handled); the sampled ones (lag, counters, instances) are in
:mod:`decider.processors.service.metrics`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.trace import Link, SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from decider import Metadata
from decider.codec import trace_of
from decider.processors.app.retry import HandlerFailure

if TYPE_CHECKING:
    from decider.stores.protocol import RecordedEvent

T = TypeVar("T")

SCOPE = "decider"
"""The instrumentation scope of every span and instrument (the tracer's and meter's name)."""

SYSTEM = "decider"
"""The ``messaging.system`` attribute of every span."""

MAX_LINKS = 128
"""How many input spans a commit span links to at most (a batch may hold more inputs)."""

RECHECK_EVERY = 1.0
"""Seconds between two looks at the global tracer provider."""

_PROPAGATOR = TraceContextTextMapPropagator()
_METER = metrics.get_meter(SCOPE)

INPUTS = _METER.create_counter(
    "decider.processor.inputs", unit="{input}", description="Inputs a processor handled."
)
"""Counter: the inputs each processor handled (attribute ``decider.processor``)."""

DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
"""The bucket bounds (seconds) advised for the duration histograms."""

HANDLER_DURATION = _METER.create_histogram(
    "decider.handler.duration",
    unit="s",
    description="How long one call of a handler took.",
    explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
)
"""Histogram: seconds per handler call (``decider.processor``, ``decider.command.type``,
``decider.outcome``: ``ok``, ``failed`` or ``rejected``)."""

RETRIES = _METER.create_counter(
    "decider.handler.retries", unit="{attempt}", description="Handler calls that were retries."
)
"""Counter: handler calls after the first for one command (``decider.command.type``)."""

COMMIT_DURATION = _METER.create_histogram(
    "decider.commit.duration",
    unit="s",
    description="How long one commit of a processor took.",
    explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
)
"""Histogram: seconds per commit, the appends and the checkpoint (``decider.processor``)."""


class _Tracer:
    """The tracer of decider's spans: from the provider given to :func:`set_tracer_provider`,
    else the global one, looked up again at most every :data:`RECHECK_EVERY` seconds (so a
    provider set after this module is imported is used; the API's lookup costs microseconds)."""

    def __init__(self) -> None:
        self.chosen: trace.TracerProvider | None = None
        self._provider: object = None
        self._tracer: trace.Tracer = trace.NoOpTracer()
        self._active = False
        self._recheck_at = 0.0
        self._lock = threading.Lock()

    def choose(self, provider: trace.TracerProvider | None) -> None:
        """Use ``provider`` (``None``: the global one) from now on."""
        with self._lock:
            self.chosen = provider
            self._recheck_at = 0.0

    def get(self) -> tuple[trace.Tracer, bool]:
        """The tracer, and whether an SDK (anything but the API's default) provides it."""
        now = time.monotonic()
        if now < self._recheck_at:
            return self._tracer, self._active
        with self._lock:
            provider = self.chosen or trace.get_tracer_provider()
            if provider is not self._provider:
                self._tracer = provider.get_tracer(SCOPE)
                self._active = not isinstance(
                    provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider
                )
                self._provider = provider
            self._recheck_at = now + RECHECK_EVERY
            return self._tracer, self._active


_TRACER = _Tracer()
_LINKS = threading.local()


def set_tracer_provider(provider: trace.TracerProvider | None) -> None:
    """Make ``provider`` the source of decider's spans (``None``: the global provider again),
    for an application that keeps its SDK provider out of the global one, and for tests."""
    _TRACER.choose(provider)


def tracing() -> bool:
    """Whether spans are recorded: an OpenTelemetry SDK's tracer provider is set (globally, or
    by :func:`set_tracer_provider`)."""
    return _TRACER.get()[1]


# -- the trace context in metadata ----------------------------------------------------------


def inject(metadata: Metadata) -> Metadata:
    """``metadata`` with the current trace context (W3C ``traceparent``/``tracestate``); the
    same object when no valid span is current (nothing traces: the stored JSON is unchanged)."""
    parent, state = trace_fields()
    if parent is None:
        return metadata
    return attrs.evolve(metadata, traceparent=parent, tracestate=state)


NO_TRACE: tuple[None, None] = (None, None)
"""What :func:`trace_fields` gives when no valid span is current."""


def trace_fields() -> tuple[str | None, str | None]:
    """The current trace context as metadata's ``traceparent`` and ``tracestate``; two
    ``None`` when no valid span is current (the hot path's check: one context lookup)."""
    if not _current() or not trace.get_current_span().get_span_context().is_valid:
        return None, None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    parent = carrier.get("traceparent")
    return (None, None) if parent is None else (parent, carrier.get("tracestate"))


def extract(metadata: Metadata) -> otel_context.Context | None:
    """The trace context stored in ``metadata``; ``None`` if it holds none (or a malformed one)."""
    if metadata.traceparent is None:
        return None
    return _context(metadata.traceparent, metadata.tracestate)


def _context(parent: str, state: str | None) -> otel_context.Context | None:
    carrier = {"traceparent": parent}
    if state:
        carrier["tracestate"] = state
    context = _PROPAGATOR.extract(carrier)
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def _stored_context(stored_metadata: bytes) -> otel_context.Context | None:
    """The trace context in a stored event's metadata JSON (lenient: ``None`` if unreadable)."""
    found = trace_of(stored_metadata) if stored_metadata else None
    return None if found is None else _context(*found)


# -- spans ------------------------------------------------------------------------------------


def _messaging(operation: str, stream: str, processor: str | None = None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
        "messaging.destination.name": stream,
    }
    if processor is not None:
        attributes["messaging.consumer.group.name"] = processor
        attributes["decider.processor"] = processor
    return attributes


def input_span(
    processor: str, event: RecordedEvent
) -> contextlib.AbstractContextManager[None] | None:
    """Around the handling of one input: a ``process <stream>`` span whose parent is the trace
    context stored with ``event``, current while the input is handled (so what it writes
    carries it); counted in :data:`INPUTS`.

    ``None`` (nothing to enter) when nothing traces and the input carries no trace context:
    then no span is current while it is handled, and :func:`annotate` has nothing to add to.
    """
    INPUTS.add(1, _PROCESSOR_LABELS.get(processor) or _processor_labels(processor))
    # _TRACER.get() with no call while its answer holds (once per input).
    t = _TRACER
    if time.monotonic() < t._recheck_at:
        tracer, active = t._tracer, t._active
    else:
        tracer, active = t.get()
    metadata = event.metadata
    # No JSON is read, nor a call made, for the common input that carries no trace context.
    parent = _stored_context(metadata) if b"traceparent" in metadata else None
    if parent is None and not active:
        return None
    return _input_span(tracer, active, parent, processor, event)


_NOTHING = contextlib.nullcontext()
_PROCESSOR_LABELS: dict[str, Mapping[str, str]] = {}


def _processor_labels(processor: str) -> Mapping[str, str]:
    """The attributes ``{"decider.processor": processor}``, built once per processor (never
    changed once built, so every measurement can share it)."""
    labels = _PROCESSOR_LABELS.get(processor)
    if labels is None:
        labels = _PROCESSOR_LABELS[processor] = {"decider.processor": processor}
    return labels


def _current_getter() -> Callable[[], otel_context.Context]:
    """How the current OpenTelemetry context is read: the runtime's context variable's own
    ``get`` where the runtime is the API's default (it is read on every input and every event
    written, where ``get_current``'s two calls in Python cost more than the read), else the
    API's ``get_current``."""
    runtime = otel_context._RUNTIME_CONTEXT
    if isinstance(runtime, ContextVarsRuntimeContext):
        return runtime._current_context.get
    return otel_context.get_current


_current = _current_getter()
"""The current OpenTelemetry context: empty when no span is current and nothing is attached
(then a hook has nothing to read or carry on)."""

current_context = _current
"""The current OpenTelemetry context, read with no call in Python where the runtime is the
API's default: falsy (empty) when nothing is current, so a hot path writes
``telemetry.trace_fields() if telemetry.current_context() else telemetry.NO_TRACE`` and asks
:func:`trace_fields` only when something may be traced."""


@contextlib.contextmanager
def _input_span(
    tracer: trace.Tracer,
    active: bool,
    parent: otel_context.Context | None,
    processor: str,
    event: RecordedEvent,
) -> Iterator[None]:
    attributes = _messaging("process", event.stream, processor)
    attributes["messaging.message.id"] = str(event.id)
    attributes["decider.message.type"] = event.type
    attributes["decider.position"] = event.position
    with tracer.start_as_current_span(
        f"process {event.stream}", context=parent, kind=SpanKind.CONSUMER, attributes=attributes
    ) as span:
        if active:
            _links().append(span.get_span_context())
        yield


def record_exception(exc: BaseException, reason: str) -> None:
    """Record ``exc`` (its type, message and traceback) on the current span as an exception
    event, and mark the span as an error with ``reason`` (a no-op when nothing traces)."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    span.record_exception(exc)
    span.set_status(StatusCode.ERROR, reason)


def annotate(name: str, attributes: Mapping[str, Any] | None = None) -> None:
    """Add an event (a step: ``route``, ``load``, ``decide``) to the current span, and
    ``attributes`` to the span itself (a no-op when nothing traces)."""
    if not _current():
        return
    span = trace.get_current_span()
    if not span.is_recording():
        return
    if attributes:
        span.set_attributes(attributes)
    span.add_event(name, attributes)


def capture() -> otel_context.Context | None:
    """The current trace context, if a span is current: for work handed to another thread
    (a command pool's job), to go on under with :func:`attached`."""
    if not _current() or not trace.get_current_span().get_span_context().is_valid:
        return None
    return otel_context.get_current()


def attached(context: otel_context.Context | None) -> contextlib.AbstractContextManager[None]:
    """Make ``context`` (from :func:`capture`) current in the block: what is written there
    carries its trace context. ``None``: nothing changes."""
    return _NOTHING if context is None else _attached(context)


@contextlib.contextmanager
def _attached(context: otel_context.Context) -> Iterator[None]:
    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)


def call_handler(  # noqa: PLR0917
    processor: str,
    command_type: str,
    command_id: str,
    attempt: int,
    call: Callable[[], T],
    context: otel_context.Context | None = None,
) -> T:
    """``call()``, one attempt of a command's handler, in a ``handle <command type>`` span (a
    child of ``context``, the command's span, else of the current one), timed in
    :data:`HANDLER_DURATION`; a retry is counted in :data:`RETRIES`. A
    :class:`~decider.processors.app.retry.HandlerFailure` result marks the span as an error.

    When nothing traces no span is started: ``context`` is only made current (what the
    handler writes carries it on), and the call is timed and counted as with a span.
    """
    t = _TRACER  # _TRACER.get()[1], with no call while its answer holds (once per call)
    if not (t._active if time.monotonic() < t._recheck_at else t.get()[1]):
        # The labels made once per handler (and outcome) are read here with no call; a first
        # call or a retry (counted) goes through _handler_labels.
        key = (processor, command_type)
        labels = _HANDLER_LABELS.get(key) if attempt <= 1 else None
        if labels is None:
            labels = _handler_labels(processor, command_type, attempt)
        outcome = "failed"  # unless it returns: an exception propagates (an interrupt)
        start = time.perf_counter()
        try:
            if context is None:  # the common case: no nullcontext entered and left per call
                result = call()
            else:
                with _attached(context):
                    result = call()
            if isinstance(result, HandlerFailure):
                outcome = "failed" if result.retryable else "rejected"
            else:
                outcome = "ok"
            return result
        finally:
            found = _OUTCOME_LABELS.get((*key, outcome))
            HANDLER_DURATION.record(
                time.perf_counter() - start, found or _outcome_labels(labels, outcome)
            )
    with _handler_span(processor, command_type, command_id, attempt, context) as returned:
        result = call()
        returned(result)
        return result


async def call_handler_async(  # noqa: PLR0917
    processor: str,
    command_type: str,
    command_id: str,
    attempt: int,
    call: Callable[[], Awaitable[T]],
    context: otel_context.Context | None = None,
) -> T:
    """:func:`call_handler` for an ``async def`` handler: ``await call()`` in the span."""
    if not _TRACER.get()[1]:
        labels = _handler_labels(processor, command_type, attempt)
        outcome = "failed"
        start = time.perf_counter()
        try:
            with attached(context):
                result = await call()
            outcome = _outcome(result)
            return result
        finally:
            HANDLER_DURATION.record(time.perf_counter() - start, _outcome_labels(labels, outcome))
    with _handler_span(processor, command_type, command_id, attempt, context) as returned:
        result = await call()
        returned(result)
        return result


_HANDLER_LABELS: dict[tuple[str, str], Mapping[str, str]] = {}
_OUTCOME_LABELS: dict[tuple[str, str, str], Mapping[str, str]] = {}


def _handler_labels(processor: str, command_type: str, attempt: int) -> Mapping[str, str]:
    """A handler's metric attributes (built once per handler, never changed); a retry
    (``attempt`` after the first) is counted in :data:`RETRIES`."""
    labels = _HANDLER_LABELS.get((processor, command_type))
    if labels is None:
        labels = {"decider.processor": processor, "decider.command.type": command_type}
        _HANDLER_LABELS[processor, command_type] = labels
    if attempt > 1:
        RETRIES.add(1, labels)
    return labels


def _outcome_labels(labels: Mapping[str, str], outcome: str) -> Mapping[str, str]:
    """A handler's attributes with its call's outcome, built once per handler and outcome."""
    key = (labels["decider.processor"], labels["decider.command.type"], outcome)
    found = _OUTCOME_LABELS.get(key)
    if found is None:
        found = _OUTCOME_LABELS[key] = {**labels, "decider.outcome": outcome}
    return found


def _outcome(result: object) -> str:
    if isinstance(result, HandlerFailure):
        return "failed" if result.retryable else "rejected"
    return "ok"


@contextlib.contextmanager
def _handler_span(
    processor: str,
    command_type: str,
    command_id: str,
    attempt: int,
    context: otel_context.Context | None,
) -> Iterator[Callable[[object], None]]:
    labels = _handler_labels(processor, command_type, attempt)
    tracer, _ = _TRACER.get()
    attributes: dict[str, Any] = {
        **labels,
        "decider.command_id": command_id,
        "decider.attempt": attempt,
    }
    outcome = ["failed"]  # unless it returns: an exception propagates (an interrupt)
    start = time.perf_counter()
    with tracer.start_as_current_span(
        f"handle {command_type}", context=context, attributes=attributes
    ) as span:

        def returned(result: object) -> None:
            outcome[0] = "ok"
            if isinstance(result, HandlerFailure):
                outcome[0] = "failed" if result.retryable else "rejected"
                if result.exception is not None:
                    span.record_exception(result.exception)
                span.set_status(StatusCode.ERROR, result.reason)

        try:
            yield returned
        finally:
            span.set_attribute("decider.outcome", outcome[0])
            HANDLER_DURATION.record(
                time.perf_counter() - start, _outcome_labels(labels, outcome[0])
            )


def timer_span(
    processor: str, stream: str, scheduled_id: str, metadata: Metadata | None
) -> contextlib.AbstractContextManager[None]:
    """Around firing one timer: a ``fire <stream>`` span whose parent is the context of the
    ``Scheduled`` event (its ``metadata``), current while the fired message is written."""
    tracer, active = _TRACER.get()
    parent = None if metadata is None else extract(metadata)
    if parent is None and not active:
        return _NOTHING
    return _timer_span(tracer, parent, processor, stream, scheduled_id)


@contextlib.contextmanager
def _timer_span(
    tracer: trace.Tracer,
    parent: otel_context.Context | None,
    processor: str,
    stream: str,
    scheduled_id: str,
) -> Iterator[None]:
    attributes = _messaging("send", stream, processor)
    attributes["messaging.message.id"] = scheduled_id
    with tracer.start_as_current_span(
        f"fire {stream}", context=parent, kind=SpanKind.PRODUCER, attributes=attributes
    ):
        yield


def commit_span(
    processor: str, appends: int, position: int | None
) -> contextlib.AbstractContextManager[None]:
    """Around one commit: a ``commit <processor>`` span linked to the input spans handled on
    this thread since the last commit, timed in :data:`COMMIT_DURATION`.

    Its parent is the current span where there is one, else the first of those input spans
    (so the commit shows in the trace of what it commits, not as a trace of its own); a commit
    of no input (a timer's, an idle flush) is a root span.
    """
    tracer, active = _TRACER.get()
    if not active:
        return _Timed(_processor_labels(processor))
    return _commit_span(tracer, processor, appends, position)


class _Timed:
    """A commit timed in :data:`COMMIT_DURATION`, no span: what :func:`commit_span` is when
    nothing traces (a plain object, cheaper than a generator's context manager)."""

    __slots__ = ("labels", "start")

    def __init__(self, labels: Mapping[str, str]) -> None:
        self.labels = labels
        self.start = 0.0

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, kind: object, *exc_info: object) -> None:
        if kind is None:  # as with a span: a commit that raised is not timed
            COMMIT_DURATION.record(time.perf_counter() - self.start, self.labels)


@contextlib.contextmanager
def _commit_span(
    tracer: trace.Tracer, processor: str, appends: int, position: int | None
) -> Iterator[None]:
    start = time.perf_counter()
    handled = _take_links()
    links = [Link(context) for context in handled]
    parent = None
    if handled and not trace.get_current_span().get_span_context().is_valid:
        parent = trace.set_span_in_context(trace.NonRecordingSpan(handled[0]))
    attributes: dict[str, Any] = {"decider.processor": processor, "decider.appends": appends}
    if position is not None:
        attributes["decider.position"] = position
    with tracer.start_as_current_span(
        f"commit {processor}", context=parent, links=links, attributes=attributes
    ):
        yield
    COMMIT_DURATION.record(time.perf_counter() - start, _processor_labels(processor))


def publish_span(
    stream: str, message_type: str, count: int = 1
) -> contextlib.AbstractContextManager[None]:
    """Around a publish: a ``send <stream>`` span (kind PRODUCER), a child of the caller's
    current span; the messages published in it carry its context."""
    tracer, active = _TRACER.get()
    if not active:
        return _NOTHING  # a caller's valid context (its own SDK tracer) is still injected
    return _publish_span(tracer, stream, message_type, count)


@contextlib.contextmanager
def _publish_span(
    tracer: trace.Tracer, stream: str, message_type: str, count: int
) -> Iterator[None]:
    attributes = _messaging("send", stream)
    attributes["decider.message.type"] = message_type
    attributes["messaging.batch.message_count"] = count
    with tracer.start_as_current_span(
        f"send {stream}", kind=SpanKind.PRODUCER, attributes=attributes
    ):
        yield


def _links() -> list[trace.SpanContext]:
    links: list[trace.SpanContext] | None = getattr(_LINKS, "spans", None)
    if links is None:
        links = _LINKS.spans = []
    if len(links) >= MAX_LINKS:
        del links[0]
    return links


def _take_links() -> list[trace.SpanContext]:
    links: list[trace.SpanContext] = getattr(_LINKS, "spans", None) or []
    _LINKS.spans = []
    return links
