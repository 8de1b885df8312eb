"""New instances presumed new on every store (not only a pipelined one): once an input type has
begun enough instances in a row, their streams are not read before the ``NO_STREAM`` append; a
wrong presumption is a conflict that the engine resolves, after which the type is read again."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path

import pytest

from decider.processors import Service
from decider.processors.workflows.fresh_streams import PRESUME_AFTER
from decider.processors.workflows.processor import WorkflowProcessor
from decider.stores.protocol import EventStore, RecordedEvent
from samples.traffic_fine.app import REPORTS_STREAM, make_app
from samples.traffic_fine.messages import PoliceReportPublished
from samples.traffic_fine.workflow import workflow
from tests.processors.test_proc_traffic_fine import all_completed, check_exactly_once, report
from tests.support.stores import open_store, types

REPORT_TYPE = "fines.PoliceReportPublished"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def fresh_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    if request.param == "postgres":
        pytest.importorskip("psycopg")
    store, cleanups = open_store(request.param, tmp_path)
    yield store
    for cleanup in cleanups:
        cleanup()


def instance_reads(store: EventStore) -> collections.Counter[str]:
    """Count the reads of instance streams from revision 0 (``read_stream`` is wrapped)."""
    counted: collections.Counter[str] = collections.Counter()
    read_stream = store.read_stream

    def counting(
        stream: str, from_revision: int = 0, limit: int | None = None
    ) -> list[RecordedEvent]:
        if stream.startswith(f"{workflow.name}-") and from_revision == 0:
            counted["instance"] += 1
        return read_stream(stream, from_revision, limit)

    store.read_stream = counting  # type: ignore[method-assign]
    return counted


def processor(service: Service) -> WorkflowProcessor:
    found = service.processor(f"workflow.{workflow.name}")
    assert isinstance(found, WorkflowProcessor)
    return found


def test_streams_of_an_input_type_that_keeps_beginning_instances_are_not_read(
    fresh_store: EventStore,
) -> None:
    store = fresh_store
    app = make_app("fresh")
    reads = instance_reads(store)
    n = 120
    app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
    with Service(app, store) as service:
        assert service.wait_until(lambda: all_completed(store, app, n), 60)
        assert service.wait_idle(30)
        assert service.errors == []
        workflows = processor(service)
        # the first reads earn the presumption; the other new instances are not read
        assert reads["instance"] >= PRESUME_AFTER
        assert workflows.fresh.presumed >= n - 2 * PRESUME_AFTER
        assert reads["instance"] + workflows.fresh.presumed <= n
        assert workflows.conflicts == 0
    check_exactly_once(store, n)


def test_a_wrong_presumption_is_a_conflict_and_the_type_is_read_again(
    fresh_store: EventStore,
) -> None:
    store = fresh_store
    app = make_app("freshwrong")
    n = 40
    app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
    with Service(app, store) as service:
        assert service.wait_until(lambda: all_completed(store, app, n), 60)
        assert service.wait_idle(30)
        workflows = processor(service)
        assert workflows.fresh.presumes(REPORT_TYPE)
        # Reports published again (new message ids) for instances that completed, which left
        # the cache: presumed new, they conflict, and are decided on the stored instances.
        again = [
            PoliceReportPublished(police_report_id=r.police_report_id, offense=r.offense)
            for r in (report(i) for i in range(3))
        ]
        app.publish_many(store, again, REPORTS_STREAM)

        def ignored() -> bool:
            return all(
                types(store, workflow.stream(r.police_report_id))[-1].startswith("Ignored")
                for r in again
            )

        assert service.wait_until(ignored, 30)
        assert service.wait_idle(30)
        assert service.errors == []
        assert workflows.conflicts >= 1
        assert not workflows.fresh.presumes(REPORT_TYPE)
    for r in again:
        history = types(store, workflow.stream(r.police_report_id))
        assert history.count("Began") == 1
        assert history[-1] == f"Ignored:{REPORT_TYPE}"
