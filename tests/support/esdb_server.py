"""The EventStoreDB test server in a process of its own, as service tests need it: reachable
by several ``decider run`` processes, and stoppable and restartable on the same log file."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from tests.support.waiting import wait_until


def free_port() -> int:
    """A TCP port of 127.0.0.1 that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class EsdbServerProcess:
    """The EventStoreDB test server as a process, on a fixed port and log file (so that it can
    be stopped and started again on the same log), ended by pid in :meth:`stop`."""

    def __init__(self, port: int, log_file: Path, output: Path) -> None:
        self.port = port
        self.log_file = log_file
        self.output = output
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        """The connection string of the server."""
        return f"esdb://127.0.0.1:{self.port}?Tls=false"

    def start(self) -> None:
        """Start the server and wait until it listens (fails the test if it exits)."""
        with self.output.open("a") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "decider.stores.esdb.testserver",
                    "--port",
                    str(self.port),
                    "--file",
                    str(self.log_file),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_until(self._listening, 30, "the EventStoreDB test server to listen")

    def _listening(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"the test server exited: {self.output.read_text()[-2000:]}")
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self) -> None:
        """SIGTERM (then SIGKILL after 30 s) if it runs; safe to call twice."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
