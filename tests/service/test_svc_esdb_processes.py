"""Two ``decider run`` processes of one app on one EventStoreDB node (the test server in a
process of its own), without partitions: both run every processor, so they race on the same
instance streams, result streams and checkpoints all the time.

Those races are expected (each is settled by an expected-revision check or by idempotency, and
the checkpoint's last save wins), so neither process may log an ERROR or a traceback for them.
At the end every workflow completed with exactly its expected history (no event twice, no
input handled twice), and every command has its effect and one result.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from samples.traffic_fine.app import REPORTS_STREAM
from samples.traffic_fine.demo import reports
from samples.traffic_fine.messages import SpeedingViolation
from tests.support.apps import fines_app
from tests.support.esdb_server import EsdbServerProcess, free_port
from tests.support.fines import all_done, check_outcome
from tests.support.service import ServiceProcess, service_env
from tests.support.waiting import wait_until

APP = "tests.support.apps:fines_app"
DONE_TIMEOUT = 120.0
WORKFLOWS = 60


@pytest.mark.slow
def test_two_processes_on_one_node_log_no_errors(tmp_path: Path) -> None:
    from decider.stores.esdb import EsdbEventStore

    effects_db = tmp_path / "effects.db"
    made = reports(WORKFLOWS, seed=13)
    speeding = {r.police_report_id for r in made if isinstance(r.offense, SpeedingViolation)}
    server = EsdbServerProcess(free_port(), tmp_path / "esdb.log", tmp_path / "esdb.out")
    services: list[ServiceProcess] = []
    try:
        server.start()
        store = EsdbEventStore(server.uri)
        try:
            for name in ("a", "b"):
                env = service_env(effects_db, 0.005)
                log = tmp_path / f"service-{name}.log"
                services.append(ServiceProcess(APP, server.uri, log, env).start())
            wait_until(lambda: all(s.started() for s in services), 60, "both services to start")
            # published while both run, so that both take part in every workflow
            fines_app.publish_many(store, made, REPORTS_STREAM)
            wait_until(
                lambda: (
                    any(s.check_alive() for s in services)
                    or all_done(store, effects_db, speeding, WORKFLOWS)
                ),
                DONE_TIMEOUT,
                "every workflow done by the two services",
            )
            assert [s.terminate() for s in services] == [0, 0]
            check_outcome(store, effects_db, speeding, WORKFLOWS)
        finally:
            store.close()
    finally:
        for service in services:
            service.cleanup()
        server.stop()
    for service in services:
        text = service.log.read_text(errors="replace")
        bad = [line for line in text.splitlines() if "ERROR" in line or "Traceback" in line]
        assert not bad, f"{service.log.name} logged errors:\n{service.tail(60)}"
