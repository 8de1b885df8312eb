"""Spans of ``decider run`` processes for the telemetry tests: an SDK exporter that appends
each ended span as a JSON line to a file, configured by an environment variable.

The service processes of a test import :mod:`tests.support.traced_app`, which calls
:func:`export_spans_from_env` when it is imported: that is how an app module plugs an
OpenTelemetry SDK into ``decider run`` (docs/service.md, "Tracing").
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

SPANS_ENV = "DECIDER_TEST_SPANS"
"""The file the process appends its spans to (unset: no SDK, nothing traced)."""


def span_record(span: ReadableSpan) -> dict[str, Any]:
    """A span as a JSON-ready dict: ids in hex, the parent's and the linked spans' ids."""
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent is not None else None,
        "links": [f"{link.context.span_id:016x}" for link in span.links],
        "kind": span.kind.name,
        "status": span.status.status_code.name,
        "attributes": dict(span.attributes or {}),
        "pid": os.getpid(),
    }


class FileSpanExporter(SpanExporter):
    """Appends each exported span to ``path`` as one JSON line (flushed at once)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(span_record(s), default=str) + "\n" for s in spans)
        with self._lock, self.path.open("a") as file:
            file.write(lines)
        return SpanExportResult.SUCCESS


def export_spans_from_env() -> None:
    """If :data:`SPANS_ENV` names a file, set a global SDK tracer provider exporting to it."""
    path = os.environ.get(SPANS_ENV)
    if not path:
        return
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(Path(path))))
    trace.set_tracer_provider(provider)


def read_spans(path: Path) -> list[dict[str, Any]]:
    """The spans a process wrote to ``path`` (none if it wrote no file)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
