"""New instances presumed new on EventStoreDB (a pipelined store): once an input type has begun
enough instances in a row, their streams are not read before the ``NO_STREAM`` append; a wrong
presumption is a conflict that the engine resolves, after which the type is read again."""

from __future__ import annotations

import collections
from collections.abc import Iterator

import pytest

from decider.processors import Service
from decider.processors.workflows.fresh_streams import PRESUME_AFTER
from decider.processors.workflows.processor import WorkflowProcessor
from decider.stores.esdb import EsdbEventStore
from decider.stores.esdb._batch import open_esdb_store
from decider.stores.esdb.testserver import EsdbTestServer
from samples.traffic_fine.app import REPORTS_STREAM, make_app
from samples.traffic_fine.messages import PoliceReportPublished
from samples.traffic_fine.workflow import workflow
from tests.processors.test_proc_traffic_fine import all_completed, check_exactly_once, report
from tests.support.stores import types

REPORT_TYPE = "fines.PoliceReportPublished"


@pytest.fixture
def store() -> Iterator[EsdbEventStore]:
    with EsdbTestServer() as server:
        opened = open_esdb_store(server.uri)
        yield opened
        opened.close()


def reads_of(store: EsdbEventStore) -> collections.Counter[str]:
    """Count the streams the store reads from their start, by instance or not: a batch's
    together (``read_each``) and one at a time (``read_stream``, a lone new instance's first
    input); both are wrapped."""
    counted: collections.Counter[str] = collections.Counter()
    read_each, read_stream = store.read_each, store.read_stream

    def count(stream: str) -> None:
        counted["instance" if stream.startswith(f"{workflow.name}-") else stream] += 1

    def counting(reads: list[tuple[str, int]]) -> list[object]:
        for stream, revision in reads:
            if revision == 0:
                count(stream)
        return read_each(reads)  # type: ignore[return-value]

    def counting_one(stream: str, from_revision: int = 0, limit: int | None = None) -> object:
        if from_revision == 0:
            count(stream)
        return read_stream(stream, from_revision, limit)

    store.read_each = counting  # type: ignore[assignment, method-assign]
    store.read_stream = counting_one  # type: ignore[assignment, method-assign]
    return counted


def processor(service: Service) -> WorkflowProcessor:
    found = service.processor(f"workflow.{workflow.name}")
    assert isinstance(found, WorkflowProcessor)
    return found


def test_streams_of_an_input_type_that_keeps_beginning_instances_are_not_read(
    store: EsdbEventStore,
) -> None:
    app = make_app("fresh")
    reads = reads_of(store)
    n = 200
    app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
    with Service(app, store) as service:
        assert service.wait_until(lambda: all_completed(store, app, n), 60)
        assert service.wait_idle(30)
        assert service.errors == []
        workflows = processor(service)
        # the first reads (a batch's go out together) earn the presumption; most of the 200
        # new instances are not read
        assert reads["instance"] >= PRESUME_AFTER
        assert workflows.fresh.presumed >= n // 2
        assert reads["instance"] + workflows.fresh.presumed <= n
        assert workflows.conflicts == 0
    check_exactly_once(store, n)


def test_a_wrong_presumption_is_a_conflict_and_the_type_is_read_again(
    store: EsdbEventStore,
) -> None:
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
