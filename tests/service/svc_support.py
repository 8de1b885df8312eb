"""Helpers of the service tests: ``decider run`` processes, waits on conditions, store checks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from decider import Lifecycle
from decider.processors import App, status
from decider.stores.protocol import EventStore, RecordedEvent

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def decider_command() -> list[str]:
    """The console script beside this Python (what users run), else ``python -m``."""
    script = Path(sys.executable).with_name("decider")
    return [str(script)] if script.exists() else [sys.executable, "-m", "decider.processors.cli"]


def service_env(effects_db: Path | None = None, handler_delay: float = 0.0) -> dict[str, str]:
    """The environment of a service process: this folder importable, the effects file named,
    each handler call slowed by ``handler_delay`` seconds."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    env.pop("DECIDER_STORE", None)
    env.pop("DECIDER_APP", None)
    if effects_db is not None:
        env["SVC_EFFECTS_DB"] = str(effects_db)
    env["SVC_HANDLER_DELAY"] = str(handler_delay)
    return env


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` (the service is another process: nothing notifies us) until it holds;
    fail the test naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        pause.wait(0.02)


class ServiceProcess:
    """One ``decider run`` process, its log in a file; started again after each stop."""

    def __init__(self, app_spec: str, uri: str, log: Path, env: dict[str, str]) -> None:
        self.app_spec = app_spec
        self.uri = uri
        self.log = log
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> ServiceProcess:
        assert self.process is None or self.process.poll() is not None, "already running"
        self.runs += 1
        arguments = ["run", self.app_spec, "--store", self.uri, "--progress-interval", "0.5"]
        with self.log.open("a") as log:
            log.write(f"===== run {self.runs}\n")
            log.flush()
            self.process = subprocess.Popen(
                [*decider_command(), *arguments],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=ROOT,
            )
        return self

    def check_alive(self) -> None:
        """Fail the test at once (with the log's end) if the process died."""
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(
                f"the service exited with status {self.process.returncode}:\n{self.tail()}"
            )

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
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def log_lines(self, needle: str) -> list[str]:
        return [line for line in self.log.read_text().splitlines() if needle in line]


def completed(store: EventStore, app: App) -> int:
    return sum(i.status is Lifecycle.COMPLETED for i in status(store, app))


def read_stream(store: EventStore, stream: str) -> list[RecordedEvent]:
    return store.read_stream(stream)


def instance_streams(store: EventStore, prefix: str) -> dict[str, list[RecordedEvent]]:
    """Every stream starting with ``prefix``, with its events."""
    streams: dict[str, list[RecordedEvent]] = {}
    for event in store.read_all():
        if event.stream.startswith(prefix):
            streams.setdefault(event.stream, []).append(event)
    return streams


def check_no_duplicates(stream: str, events: list[RecordedEvent]) -> None:
    """No two events with one id; no input message id handled twice; revisions 0..n-1."""
    import json

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
