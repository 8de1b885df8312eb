"""Two ``decider run --esdb-consumer-group`` processes on the EventStoreDB test server, one of
them SIGKILLed while it carries out commands: the server gives what it held to the other, and
at the end every workflow completed, every command's effect happened once (one row per
command id, exactly the ``Sent`` ids) and every command has its results once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from decider.stores.esdb import EsdbEventStore
from decider.stores.esdb._batch import open_esdb_store
from decider.stores.esdb.testserver import EsdbTestServer
from samples.traffic_fine.app import REPORTS_STREAM
from samples.traffic_fine.demo import reports
from samples.traffic_fine.messages import SpeedingViolation
from tests.support.apps import fines_app
from tests.support.effects import read_effects
from tests.support.service import ServiceProcess, completed, service_env
from tests.support.stores import instance_streams
from tests.support.waiting import wait_until

APP = "tests.support.apps:fines_app"
WORKFLOWS = 40
HANDLER_STREAMS = {
    "fines.GenerateTrafficFineSystemNumber": "number_with_effect",
    "fines.GenerateTrafficFineManualIdentificationCode": "code_with_effect",
}


@pytest.fixture
def store() -> Iterator[tuple[EsdbEventStore, str]]:
    with EsdbTestServer() as server:
        opened = open_esdb_store(server.uri)
        yield opened, server.uri
        opened.close()


def handler_calls(effects_db: Path) -> int:
    if not effects_db.exists():
        return 0
    return sum(calls for _, calls in read_effects(str(effects_db)).values())


def joined(service: ServiceProcess) -> bool:
    return service.check_alive() or bool(service.log_lines("joined consumer group"))


def test_a_consumer_killed_mid_command_leaves_its_commands_to_the_other(
    store: tuple[EsdbEventStore, str], tmp_path: Path
) -> None:
    events, uri = store
    effects_db = tmp_path / "effects.db"
    env = service_env(effects_db, handler_delay=0.02)
    services = [
        ServiceProcess(
            APP, uri, tmp_path / f"service{n}.log", env, options=["--esdb-consumer-group"]
        )
        for n in (1, 2)
    ]
    made = reports(WORKFLOWS, seed=3)
    speeding = {r.police_report_id for r in made if isinstance(r.offense, SpeedingViolation)}
    try:
        for service in services:
            service.start()
        for service in services:
            wait_until(service.started, 60, "both services started")
        wait_until(lambda: all(joined(s) for s in services), 60, "both in the consumer group")
        fines_app.publish_many(events, made, REPORTS_STREAM)
        first, second = services
        # Killed while its handlers run (each call takes 20 ms): what it held unanswered goes
        # to the other consumer when the server sees its connection drop.
        wait_until(
            lambda: first.check_alive() or handler_calls(effects_db) >= 10,
            60,
            "handlers at work",
        )
        first.kill()

        def done() -> bool:
            second.check_alive()
            if completed(events, fines_app) < WORKFLOWS or not effects_db.exists():
                return False
            return len(read_effects(str(effects_db))) >= 3 * len(speeding)

        wait_until(done, 90, "every workflow completed and command carried out")
        assert second.terminate() == 0
    finally:
        for service in services:
            service.cleanup()
    streams = instance_streams(events, "IssueTrafficFineForSpeedingViolation-")
    assert len(streams) == WORKFLOWS
    sent = {
        str(e.id): e.type
        for stream_events in streams.values()
        for e in stream_events
        if e.type.startswith("Sent:")
    }
    effects = read_effects(str(effects_db))
    assert set(effects) == set(sent), "effects and Sent commands differ"
    for command_id in effects:
        handler = HANDLER_STREAMS.get(sent[command_id].removeprefix("Sent:"))
        if handler is not None:
            assert len(events.read_stream(f"{handler}-{command_id}")) == 1, command_id
    repeats = sum(calls for _, calls in effects.values()) - len(effects)
    print(f"{repeats} handler calls were repeats")
