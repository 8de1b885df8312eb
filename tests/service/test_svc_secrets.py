"""No password reaches the output of ``decider``: its error paths, and a service run on
PostgreSQL with a password in the URI (the local server trusts, so any password connects)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from decider.stores.postgres import PostgresEventStore
from samples.traffic_fine.app import REPORTS_STREAM, app
from samples.traffic_fine.demo import reports
from tests.support.postgres import PG_URI, fresh_schema
from tests.support.service import (
    ServiceProcess,
    completed,
    decider_command,
    service_env,
)
from tests.support.waiting import wait_until

APP = "samples.traffic_fine:app"
SECRET = "S3cr3t-pw"
_PG = PG_URI.removeprefix("postgresql://")  # user@host:port/db
_USER, _, _WHERE = _PG.partition("@")

ERROR_PATHS = [
    ["run", APP, "--store", f"ftp://admin:{SECRET}@host/x"],
    ["run", APP, "--store", f"postgresql://u@127.0.0.1/db?password={SECRET}&bogus=1"],
    ["run", APP, "--store", f"postgresql://u:{SECRET}@127.0.0.1/db?schema="],
    ["run", APP, "--store", f"postgresql://u:{SECRET}%ZZ@127.0.0.1/db"],
    ["status", "--app", APP, "--store", f"postgresql://u:{SECRET}@127.0.0.1:1/db"],
    ["run", APP, "--store", f"esdb://admin:{SECRET}@localhost:2113?Tls=maybe"],
    ["run", APP, "--store", f"esdb://admin:{SECRET}@localhost:2113?Tls=false&Bogus=1"],
    ["status", "--app", APP, "--store", f"sqlite://admin:{SECRET}@h/no/such.db"],
]


@pytest.mark.parametrize("argv", ERROR_PATHS, ids=[a[-1] for a in ERROR_PATHS])
def test_error_paths_never_print_the_password(argv: list[str], tmp_path: Path) -> None:
    done = subprocess.run(
        [*decider_command(), *argv],
        capture_output=True,
        text=True,
        env=service_env(),
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert output.strip(), "the error says nothing"
    assert SECRET not in output


def test_a_service_run_never_logs_the_password(tmp_path: Path) -> None:
    with fresh_schema() as schema:
        uri = f"postgresql://{_USER}:{SECRET}@{_WHERE}?schema={schema}&sslpassword={SECRET}"
        store = PostgresEventStore(PG_URI, schema=schema)
        log = tmp_path / "service.log"
        env = {**service_env(), "DECIDER_LOG_LEVEL": "DEBUG"}
        service = ServiceProcess(APP, uri, log, env)
        try:
            app.publish_many(store, reports(5, seed=4), REPORTS_STREAM)
            service.start()
            wait_until(lambda: service.check_alive() or completed(store, app) == 5, 60, "5 done")
            assert service.terminate(signal.SIGTERM) == 0
        finally:
            service.cleanup()
            store.close()
        text = log.read_text()
        assert f"postgresql://{_USER}:***@" in text, text  # the store is named, hidden
        assert SECRET not in text
