"""Text views of the operator queries: an instance's history, the instances' status, parked
commands. Each returns lines, so the demo and tests use exactly what ``decider`` prints."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from decider import Lifecycle, Metadata
from decider.processors.app.definition import AppDefinition
from decider.processors.commands.parking import ParkedCommand
from decider.processors.operate.listing import InstancePage
from decider.processors.operate.queries import InstanceStatus, InstanceView
from decider.processors.operate.skipped import SkippedInput

_CLOSE = timedelta(seconds=1)


def instance_lines(app: AppDefinition, view: InstanceView) -> list[str]:
    """Every event of the instance (revision, position, recorded time, type, payload, metadata),
    then the workflow version it began under (if its workflow has one), its folded state and
    its status."""
    lines = [
        f"{view.stream}  (workflow {view.workflow}, {view.status.value}, "
        f"{len(view.history)} event{'s' if len(view.history) != 1 else ''})"
    ]
    for entry in view.history:
        _, data = app.codec.encode_event(entry.event)
        lines.append(
            f"  #{entry.revision:<3} {entry.type}  @{entry.position}  "
            f"{entry.recorded_at.isoformat(timespec='milliseconds')}"
        )
        lines.append(f"        event:    {data.decode()}")
        lines.append(f"        metadata: {_metadata(entry.metadata, entry.recorded_at)}")
    if view.version is not None:
        lines.append(f"  version: {view.version}")
    lines.append(f"  state:  {view.state!r}")
    lines.append(f"  status: {view.status.value}")
    if view.forked_to is not None:
        lines.append(f"  forked to: {view.forked_to} (its inputs go there now)")
    return lines


def _metadata(metadata: Metadata, stored_at: datetime) -> str:
    parts = [f"message_id={metadata.message_id}"]
    if metadata.correlation_id is not None:
        parts.append(f"correlation_id={metadata.correlation_id}")
    if metadata.causation_id is not None:
        parts.append(f"causation_id={metadata.causation_id}")
    if metadata.workflow_version is not None:
        parts.append(f"workflow_version={metadata.workflow_version}")
    # The service clock's stamp, shown only where it differs from the store's (a FakeClock).
    if metadata.recorded_at is not None and abs(metadata.recorded_at - stored_at) > _CLOSE:
        parts.append(f"recorded_at={metadata.recorded_at.isoformat(timespec='milliseconds')}")
    return " ".join(parts)


_LISTED = [lifecycle for lifecycle in Lifecycle if lifecycle is not Lifecycle.NOT_STARTED]
_ALWAYS = (Lifecycle.RUNNING, Lifecycle.COMPLETED)
"""Counted on every workflow's line; the other statuses only where some instance has them."""


def status_lines(
    app: AppDefinition, instances: list[InstanceStatus], parked: list[ParkedCommand], limit: int
) -> list[str]:
    """Counts per workflow and status (running and completed always, failed and cancelled where
    there are some), up to ``limit`` stream names per status, then the parked commands."""
    lines = [f"app {app.name}: {len(instances)} instance{'s' if len(instances) != 1 else ''}"]
    per_workflow = Counter((i.workflow, i.status) for i in instances)
    for name in sorted({i.workflow for i in instances} or app.workflows):
        counts = [
            f"{lifecycle.value} {per_workflow[name, lifecycle]}"
            for lifecycle in _LISTED
            if lifecycle in _ALWAYS or per_workflow[name, lifecycle]
        ]
        lines.append(f"  {name}: {', '.join(counts)}")
    for lifecycle in _LISTED:
        streams = [i.stream for i in instances if i.status is lifecycle]
        if not streams:
            continue
        shown = streams[:limit]
        more = f", first {len(shown)}" if len(shown) < len(streams) else ""
        lines.append(f"{lifecycle.value} ({len(streams)}{more}):")
        lines.extend(f"  {stream}" for stream in shown)
    lines.extend(parked_lines(parked))
    return lines


def parked_lines(parked: list[ParkedCommand]) -> list[str]:
    """One line per parked command: id, type, where it was sent, attempts, when, why."""
    if not parked:
        return ["parked commands: none"]
    lines = [f"parked commands ({len(parked)}):"]
    for command in parked:
        lines.append(
            f"  {command.command_id}  {command.command_type}  "
            f"{command.stream}@{command.revision}  attempts={command.attempts}  "
            f"parked_at={command.parked_at.isoformat(timespec='seconds')}  {command.reason}"
        )
        lines.extend(traceback_lines(command.traceback))
    return lines


def traceback_lines(traceback: str | None) -> list[str]:
    """A kept traceback under the line it belongs to, indented; none if there is none."""
    return [f"    {line}" for line in traceback.splitlines()] if traceback else []


def instance_list_lines(page: InstancePage, now: datetime) -> list[str]:
    """One line per instance: stream, status, events, when it began, how long since its last
    event (``STUCK`` where it is over its limit), then the next page's cursor if any."""
    if not page.instances:
        return ["no instances"]
    width = max(len(i.stream) for i in page.instances)
    lines = []
    for instance in page.instances:
        idle = _age(now - instance.updated_at)
        stuck = f"  STUCK (over {_age(instance.stuck_after)})" if instance.stuck_after else ""
        if instance.forked_to is not None:
            stuck += f"  forked to {instance.forked_to}"
        lines.append(
            f"{instance.stream:<{width}}  {instance.status.value:<9}  "
            f"events={instance.events:<3}  "
            f"started={instance.started_at.isoformat(timespec='seconds')}  "
            f"idle={idle}{stuck}"
        )
    if page.next_after is not None:
        lines.append(f"more: --after {page.next_after}")
    return lines


def _age(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def skipped_lines(skipped: list[SkippedInput]) -> list[str]:
    """One line per skip record: its id, the processor, the event, when, whether re-driven,
    why."""
    if not skipped:
        return ["skipped inputs: none"]
    lines = [f"skipped inputs ({len(skipped)}):"]
    for s in skipped:
        state = f"redriven as {s.redriven_as}" if s.redriven_as else "pending"
        lines.append(
            f"  {s.skip_id}  {s.processor}  {s.event_type} at {s.stream}@{s.revision}  "
            f"skipped_at={s.skipped_at.isoformat(timespec='seconds')}  {state}  {s.reason}"
        )
    return lines
