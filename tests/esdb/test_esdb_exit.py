"""A script that opens an EventStoreDB/KurrentDB store, publishes and ends without closing it
exits: the store is closed at interpreter exit, before the client's ``__del__`` would close its
gRPC channel under a live append stream and wait forever. Run with either client (``make
test-kurrentdb`` runs it with kurrentdbclient)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.support.service import ROOT

SCRIPT = textwrap.dedent(
    """
    import sys
    from decider.stores.uri import open_store
    from samples.traffic_fine.app import REPORTS_STREAM, app
    from samples.traffic_fine.messages import PoliceReportPublished, SpeedingViolation

    store = open_store(sys.argv[1])
    offense = SpeedingViolation(maximum_speed="50", measured_speed="90")
    reports = [
        PoliceReportPublished(police_report_id=f"exit-{i}", offense=offense) for i in range(20)
    ]
    app.publish_many(store, reports, REPORTS_STREAM)
    print("published", flush=True)
    """
)


@pytest.mark.parametrize("scheme", ["esdb", "kurrentdb"])
def test_an_esdb_script_that_publishes_and_ends_without_closing_exits(
    esdb_uri: str, scheme: str
) -> None:
    uri = scheme + esdb_uri[esdb_uri.index("://") :]
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, uri],
            cwd=ROOT, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the script did not exit within 30 s after {exc.stdout!r}")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "published\n"
