"""JSON documents of the operator queries, what ``--json`` prints: plain dicts and lists, times
in ISO 8601, stored payloads as parsed JSON."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import cattrs

from decider.processors.app.definition import AppDefinition
from decider.processors.commands.parking import ParkedCommand
from decider.processors.operate.queries import HistoryEntry, InstanceStatus, InstanceView

_CONVERTER = cattrs.Converter()


def instance_document(app: AppDefinition, view: InstanceView) -> dict[str, Any]:
    """An instance: its stream, workflow, status, folded state, and every event as stored."""
    events = []
    for entry in view.history:
        _, data = app.codec.encode_event(entry.event)
        events.append(
            {
                "revision": entry.revision,
                "position": entry.position,
                "type": entry.type,
                "recorded_at": entry.recorded_at.isoformat(),
                "data": json.loads(data),
                "metadata": _metadata(app, entry),
            }
        )
    return {
        "stream": view.stream,
        "workflow": view.workflow,
        "status": view.status.value,
        "state_type": type(view.state).__qualname__,
        "state": _plain(view.state),
        "events": events,
    }


def _metadata(app: AppDefinition, entry: HistoryEntry) -> Any:
    """The metadata as stored where it is JSON (so fields the codec does not know show too)."""
    try:
        return json.loads(entry.stored_metadata)
    except ValueError:
        return json.loads(app.codec.encode_metadata(entry.metadata))


def _plain(value: object) -> Any:
    """``value`` as JSON-ready data (attrs classes as objects; anything else as its repr)."""
    try:
        doc = _CONVERTER.unstructure(value)
        json.dumps(doc)
    except (TypeError, ValueError):
        return repr(value)
    return doc


def status_document(
    app: AppDefinition, instances: list[InstanceStatus], parked: list[ParkedCommand]
) -> dict[str, Any]:
    """Counts per workflow and status, every instance stream with its status, the parked
    commands."""
    counts = Counter((i.workflow, i.status.value) for i in instances)
    per_workflow: dict[str, dict[str, int]] = {name: {} for name in app.workflows}
    for (workflow, status), count in counts.items():
        per_workflow.setdefault(workflow, {})[status] = count
    return {
        "app": app.name,
        "instances": len(instances),
        "workflows": per_workflow,
        "streams": [
            {"stream": i.stream, "workflow": i.workflow, "status": i.status.value}
            for i in instances
        ],
        "parked": parked_document(parked)["parked"],
    }


def parked_document(parked: list[ParkedCommand]) -> dict[str, Any]:
    """The parked commands."""
    return {
        "parked": [
            {
                "command_id": c.command_id,
                "command_type": c.command_type,
                "stream": c.stream,
                "revision": c.revision,
                "reason": c.reason,
                "attempts": c.attempts,
                "parked_at": c.parked_at.isoformat(),
                "traceback": c.traceback,
            }
            for c in parked
        ]
    }
