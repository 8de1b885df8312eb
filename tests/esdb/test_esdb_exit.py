"""A script that opens an EventStoreDB/KurrentDB store, publishes and ends without closing it
exits: the store is closed at interpreter exit, before the client's ``__del__`` would close its
gRPC channel under a live append stream and wait forever, and closing returns only once no
thread works on the append call any more (a daemon thread frozen at exit while it held the
call's lock hung the call's collection). Run with either client (``make test-kurrentdb`` runs
it with kurrentdbclient)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.support.service import ROOT

RUNS = 4
"""Scripts run at once: the hang was a race, one exit in a hundred or more under load."""

SCRIPT = textwrap.dedent(
    """
    import sys
    from decider.stores.uri import open_store
    from samples.traffic_fine.app import REPORTS_STREAM, app
    from samples.traffic_fine.messages import PoliceReportPublished, SpeedingViolation

    # threads switch as often as they can: a daemon thread is more often caught mid-call at exit
    sys.setswitchinterval(1e-6)
    store = open_store(sys.argv[1])
    offense = SpeedingViolation(maximum_speed="50", measured_speed="90")
    reports = [
        PoliceReportPublished(police_report_id=f"exit-{i}", offense=offense) for i in range(20)
    ]
    app.publish_many(store, reports, REPORTS_STREAM)
    print("published", flush=True)
    """
)


def start(uri: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, uri],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.parametrize("scheme", ["esdb", "kurrentdb"])
def test_an_esdb_script_that_publishes_and_ends_without_closing_exits(
    esdb_uri: str, scheme: str
) -> None:
    uri = scheme + esdb_uri[esdb_uri.index("://") :]
    scripts = [start(uri) for _ in range(RUNS)]
    try:
        for script in scripts:
            try:
                stdout, stderr = script.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                script.kill()
                stdout, _ = script.communicate()
                pytest.fail(f"a script did not exit within 30 s after {stdout!r}")
            assert script.returncode == 0, stderr
            assert stdout == "published\n"
    finally:
        for script in scripts:
            if script.poll() is None:
                script.kill()
                script.communicate()
