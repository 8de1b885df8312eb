"""``decider run`` processes for the service tests, and checks of what they stored.

A test starts its processes through :class:`ServiceProcess` and ends them by pid, also when it
fails (:meth:`ServiceProcess.cleanup` in a fixture's teardown).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from decider import Lifecycle
from decider.processors import App, status
from decider.stores.protocol import EventStore, RecordedEvent
from tests.support.effects import DELAY_ENV, EFFECTS_ENV

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root: the working directory of the processes, so ``tests`` imports."""


def decider_command() -> list[str]:
    """The console script beside this Python (what users run), else ``python -m``."""
    script = Path(sys.executable).with_name("decider")
    return [str(script)] if script.exists() else [sys.executable, "-m", "decider.processors.cli"]


def service_env(effects_db: Path | None = None, handler_delay: float = 0.0) -> dict[str, str]:
    """The environment of a service process: no store or app from the caller's environment,
    the effects file named, each handler call slowed by ``handler_delay`` seconds."""
    env = dict(os.environ)
    env.pop("DECIDER_STORE", None)
    env.pop("DECIDER_APP", None)
    if effects_db is not None:
        env[EFFECTS_ENV] = str(effects_db)
    env[DELAY_ENV] = str(handler_delay)
    return env


class ServiceProcess:
    """One ``decider run`` process, its log in a file; started again after each stop.

    ``command`` is the ``decider`` to run (default :func:`decider_command`), ``cwd`` the
    directory it runs in (default the repository, whose ``tests`` the app specs name),
    ``options`` more ``decider run`` options (e.g. ``("--partitions", "auto")``).
    """

    def __init__(
        self,
        app_spec: str,
        uri: str,
        log: Path,
        env: dict[str, str],
        command: list[str] | None = None,
        cwd: Path = ROOT,
        options: Sequence[str] = (),
    ) -> None:
        self.app_spec = app_spec
        self.uri = uri
        self.log = log
        self.env = env
        self.command = command or decider_command()
        self.cwd = cwd
        self.options = list(options)
        """More options of ``decider run`` (e.g. ``--metrics-port``)."""
        self.process: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> ServiceProcess:
        """Start the process (again), appending to the log."""
        assert self.process is None or self.process.poll() is not None, "already running"
        self.runs += 1
        arguments = ["run", self.app_spec, "--store", self.uri, "--progress-interval", "0.5"]
        arguments += self.options
        with self.log.open("a") as log:
            log.write(f"===== run {self.runs}\n")
            log.flush()
            self.process = subprocess.Popen(
                [*self.command, *arguments],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
            )
        return self

    def check_alive(self) -> Literal[False]:
        """Fail the test at once (with the log's end) if the process died; else ``False``, so
        that it can open a wait's condition: ``service.check_alive() or done()``."""
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(
                f"the service exited with status {self.process.returncode}:\n{self.tail()}"
            )
        return False

    def started(self) -> bool:
        """Whether the log says the service started; fails the test if the process died."""
        return self.check_alive() or bool(self.log_lines("started"))

    def kill(self) -> None:
        """SIGKILL: no chance to finish or store anything."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def terminate(self, sig: signal.Signals = signal.SIGTERM) -> int:
        """Ask for a graceful stop; the exit status."""
        assert self.process is not None
        self.process.send_signal(sig)
        return self.process.wait(timeout=30)

    def cleanup(self) -> None:
        """Kill the process if it still runs (a test's teardown, also on failure)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the log."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def log_lines(self, needle: str) -> list[str]:
        """The log's lines that contain ``needle``."""
        return [line for line in self.log.read_text().splitlines() if needle in line]


def completed(store: EventStore, app: App) -> int:
    """How many of ``app``'s workflow instances completed."""
    return sum(i.status is Lifecycle.COMPLETED for i in status(store, app))


def check_no_duplicates(stream: str, events: list[RecordedEvent]) -> None:
    """No two events with one id; no input message id handled twice; revisions 0..n-1."""
    assert [e.revision for e in events] == list(range(len(events))), stream
    ids = Counter(e.id for e in events)
    assert max(ids.values()) == 1, f"{stream}: duplicated event ids {ids.most_common(2)}"
    inputs = [
        json.loads(e.metadata)["causation_id"]
        for e in events
        if e.type.partition(":")[0] in ("InitiatedBy", "Received", "Ignored")
    ]
    twice = [m for m, n in Counter(inputs).items() if n > 1]
    assert not twice, f"{stream}: input message ids handled twice: {twice}"
