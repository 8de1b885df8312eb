"""The fines app's service runs (``tests.support.apps:fines_app``): how many workflows a run
publishes, when they are all done, and the checks at a run's end, shared by the crash tests and
the partition tests on every store."""

from __future__ import annotations

import json
from pathlib import Path

from decider.stores.protocol import EventStore
from tests.support.apps import FINE_PARKING, FINE_SPEEDING, fines_app
from tests.support.effects import read_effects
from tests.support.service import check_no_duplicates, completed
from tests.support.stores import instance_streams

WORKFLOWS = 300
"""The workflows a run publishes (reports of ``samples.traffic_fine.demo.reports``)."""
HANDLER_STREAMS = {
    "fines.GenerateTrafficFineSystemNumber": "number_with_effect",
    "fines.GenerateTrafficFineManualIdentificationCode": "code_with_effect",
}
"""The handlers of the number and code commands and the streams their results go to."""


def check_outcome(
    store: EventStore, effects_db: Path, speeding: set[str], workflows: int = WORKFLOWS
) -> int:
    """Every one of ``workflows`` completed with exactly its expected history (no event twice,
    no input handled twice), every command's effect happened once (the effects' ids are exactly
    the ``Sent`` command ids) with one result; returns how many handler calls were repeats."""
    streams = instance_streams(store, "IssueTrafficFineForSpeedingViolation-")
    assert len(streams) == workflows
    sent: dict[str, str] = {}
    for stream, events in streams.items():
        check_no_duplicates(stream, events)
        report_id = stream.removeprefix("IssueTrafficFineForSpeedingViolation-")
        expected = FINE_SPEEDING if report_id in speeding else FINE_PARKING
        assert [e.type for e in events] == expected, stream
        sent.update({str(e.id): e.type for e in events if e.type.startswith("Sent:")})
    # Each report started exactly one instance.
    causes = [json.loads(events[1].metadata)["causation_id"] for events in streams.values()]
    assert len(set(causes)) == workflows

    effects = read_effects(str(effects_db))
    assert set(effects) == set(sent), "effects and Sent commands differ"
    kinds = {"number": 0, "code": 0, "issue": 0}
    for command_id, (kind, calls) in effects.items():
        kinds[kind] += 1
        assert calls >= 1
        handler = HANDLER_STREAMS.get(sent[command_id].removeprefix("Sent:"))
        if handler is not None:
            results = store.read_stream(f"{handler}-{command_id}")
            assert len(results) == 1, f"{command_id}: {len(results)} results"
    assert kinds == {"number": len(speeding), "code": len(speeding), "issue": len(speeding)}
    return sum(calls for _, calls in effects.values()) - len(effects)


def all_done(
    store: EventStore, effects_db: Path, speeding: set[str], workflows: int = WORKFLOWS
) -> bool:
    """All ``workflows`` completed, and the last commands (issue the fine) carried out too."""
    if completed(store, fines_app) < workflows or not effects_db.exists():
        return False
    return len(read_effects(str(effects_db))) >= 3 * len(speeding)
