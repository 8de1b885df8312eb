"""The command-line test server serves a plain esdbclient script with EventStoreDB's answers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs/examples/esdb_plain_client.py"

# What EventStoreDB 24.10 answers to the script, step by step (esdbclient's own messages).
EXPECTED = [
    "read before writing: not found",
    "appended OrderPlaced at revision 0",
    "conflict: Stream position of last event is 0 not StreamState.NO_STREAM",
    "idempotent re-append returns the same position: True",
    "read: [('OrderPlaced', 0), ('OrderPaid', 1)]",
    "caught up after ['OrderPlaced', 'OrderPaid']",
    "live: OrderShipped 2",
]


def test_a_plain_esdbclient_script_against_the_command_line_server() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "decider.stores.esdb.testserver", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()
        uri = banner.split()[-1]
        assert uri.startswith("esdb://127.0.0.1:"), banner
        done = subprocess.run(
            [sys.executable, str(SCRIPT), uri],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=ROOT,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == EXPECTED
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=10) == 0
    finally:
        server.kill()
        server.wait()
