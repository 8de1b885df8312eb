"""``make demo`` in small: the demo script runs the service process and reports success."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.service import ROOT


def test_the_demo_completes_every_workflow_and_stops_the_service_cleanly(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    db.write_bytes(b"")  # a leftover file is removed first
    result = subprocess.run(
        [sys.executable, "-m", "samples.traffic_fine.demo", "--reports", "60", "--db", str(db)],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=90,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "published 60 police reports" in out
    assert "completed 60/60" in out
    assert "  workflows completed: 60 of 60\n" in out
    assert "  in flight:           0\n" in out
    assert "  parked commands:     0\n" in out
    assert "SIGTERM -> exit status 0 (graceful)" in out
    assert "stopped at position" in out
    assert "\n  #7   Completed  @" in out
    assert out.rstrip().endswith("  state:  Final()\n  status: completed")


def test_the_demo_fails_loudly_when_it_cannot_finish(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "samples.traffic_fine.demo",
            "--reports",
            "2000",
            "--timeout",
            "0",
            "--db",
            str(tmp_path / "demo.db"),
        ],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 1
    assert "demo: FAILED: only " in result.stderr
