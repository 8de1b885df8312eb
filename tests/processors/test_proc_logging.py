"""Each module logs to its own logger under ``decider``, with the context in ``extra``
fields; ``Service(logger=...)`` still takes every line."""

from __future__ import annotations

import logging

import pytest

from decider.processors import RetryPolicy, Service, list_parked
from decider.stores.protocol import EventStore
from tests.support.apps import JobRequested, job_app

FAST = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.002)


def _run_until_parked(store: EventStore, app_name: str, logger: logging.Logger | None) -> None:
    app, _ = job_app(app_name, retry=FAST)
    app.publish(store, JobRequested(job_id="j1", action="fail"), "jobs")
    with Service(app, store, logger=logger) as service:
        assert service.wait_until(lambda: len(list_parked(store, app)) == 1, 30)
        assert service.wait_idle(30)


def test_retries_parks_and_starts_carry_their_context(
    store: EventStore, app_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="decider"):
        _run_until_parked(store, app_name, None)
    by_logger = {r.name for r in caplog.records}
    assert by_logger >= {
        "decider.processors.service.service",
        "decider.processors.engine.base",
        "decider.processors.commands.pool",
        "decider.processors.commands.parking",
    }
    commands = f"{app_name}.commands"
    (retry,) = [r for r in caplog.records if r.name == "decider.processors.commands.pool"]
    (park,) = [r for r in caplog.records if r.name == "decider.processors.commands.parking"]
    for record in (retry, park):
        assert record.__dict__["processor"] == commands
        assert record.__dict__["event_type"] == "ptest.DoWork"
        assert (
            record.__dict__["command_id"] == list_parked(store, job_app(app_name)[0])[0].command_id
        )
    assert (retry.__dict__["attempt"], park.__dict__["attempt"]) == (1, 2)
    assert park.__dict__["stream"] == "Job-j1" and isinstance(park.__dict__["position"], int)
    starts = [r for r in caplog.records if "starting after position" in r.getMessage()]
    assert {r.__dict__["processor"] for r in starts} >= {commands, f"{app_name}.timers"}
    assert all("position" in r.__dict__ for r in starts)


def test_a_logger_given_to_the_service_takes_every_line(
    store: EventStore, app_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    mine = logging.getLogger("my.service")
    with caplog.at_level(logging.INFO, logger="my.service"):
        _run_until_parked(store, app_name, mine)
    names = {r.name for r in caplog.records if r.name.startswith(("my.", "decider"))}
    assert names == {"my.service"}
    assert any(r.__dict__.get("processor") == f"{app_name}.commands" for r in caplog.records)
