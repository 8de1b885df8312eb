"""Figure 2: the codec on the traffic-fine workflow's events and their metadata.

The subject encodes each event of a complete traffic-fine history with
``Codec.encode_event`` and its metadata with ``Codec.encode_metadata``, then decodes both back
with ``decode_event`` / ``decode_metadata``. The baseline does only the JSON part of that work:
``json.dumps`` and ``json.loads`` of the equivalent dicts (the very documents the codec
writes, prepared before timing), so the ratio is what turning objects into dicts and back
costs on top of JSON itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from benchmarks.core import through_framework, traffic_fine_inputs
from benchmarks.harness import Figure, Target, compare_best
from decider import Codec, Metadata, WorkflowEvent, event_id

Item = tuple[WorkflowEvent[Any, Any], Metadata]


def sample_items(workflows: int) -> list[list[Item]]:
    """Each workflow's events with the metadata a workflow processor would give them."""
    items: list[list[Item]] = []
    for index, history in enumerate(through_framework(traffic_fine_inputs(workflows))):
        instance_id = f"wf_{index:06d}"
        stream = f"IssueTrafficFineForSpeedingViolation-{instance_id}"
        cause = f"msg_01JD{index:022d}"
        items.append(
            [
                (
                    event,
                    Metadata(
                        message_id=str(event_id(stream, cause, position)),
                        correlation_id=instance_id,
                        causation_id=cause,
                    ),
                )
                for position, event in enumerate(history)
            ]
        )
    return items


def through_codec(codec: Codec, workflows: Sequence[list[Item]]) -> int:
    """Encode then decode every event and its metadata; the number of events round-tripped."""
    count = 0
    for items in workflows:
        for event, metadata in items:
            type_name, data = codec.encode_event(event)
            meta = codec.encode_metadata(metadata)
            codec.decode_event(type_name, data)
            codec.decode_metadata(meta)
            count += 1
    return count


def equivalent_documents(
    codec: Codec, workflows: Sequence[list[Item]]
) -> list[list[tuple[Any, Any]]]:
    """The (event body, metadata) dicts the codec writes, parsed back from its own output."""
    return [
        [
            (
                json.loads(codec.encode_event(event)[1]),
                json.loads(codec.encode_metadata(metadata)),
            )
            for event, metadata in items
        ]
        for items in workflows
    ]


def through_json(documents: Sequence[list[tuple[Any, Any]]]) -> int:
    """``json.dumps`` then ``json.loads`` of every dict, as compactly as the codec writes."""
    dumps, loads = json.dumps, json.loads
    count = 0
    for items in documents:
        for body, meta in items:
            data = dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
            meta_data = dumps(meta, separators=(",", ":"), ensure_ascii=False).encode()
            loads(data)
            loads(meta_data)
            count += 1
    return count


def measure(workflows: int, rounds: int) -> Figure:
    """Figure 2: codec time over plain JSON time for every event of ``workflows`` workflows."""
    codec = Codec()
    items = sample_items(workflows)
    documents = equivalent_documents(codec, items)
    for workflow_items in items:
        for event, metadata in workflow_items:
            type_name, data = codec.encode_event(event)
            if codec.decode_event(type_name, data) != event:
                raise AssertionError(f"the codec does not round-trip {event!r}")
            if codec.decode_metadata(codec.encode_metadata(metadata)) != metadata:
                raise AssertionError(f"the codec does not round-trip {metadata!r}")
    events = sum(len(workflow_items) for workflow_items in items)
    subject, baseline = compare_best(
        lambda: through_codec(codec, items), lambda: through_json(documents), rounds
    )
    return Figure(
        key="codec",
        title="2. codec: encode+decode event+metadata",
        unit="events/s",
        rate=events / subject,
        baseline="json.dumps + json.loads of the equivalent dicts",
        baseline_rate=events / baseline,
        ratio=subject / baseline,
        ratio_is="codec time / plain JSON time (lower is better)",
        target=Target("<=", 3.0),
        extra={
            "workflows_per_round": workflows,
            "events_per_round": events,
            "rounds": rounds,
            "estimator": "best of interleaved rounds",
        },
    )
