"""What the benchmarks that run services in processes of their own share: a fresh SQLite file
or PostgreSQL schema with the URI another process opens it by, and that process's environment."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import pg
from decider.stores import EventStore

ROOT = Path(__file__).resolve().parent.parent
"""The repository's root, where a child process runs and finds ``samples`` and ``benchmarks``."""


def child_env() -> dict[str, str]:
    """This process's environment for a child: the repository on ``PYTHONPATH``, and no
    ``DECIDER_STORE`` or ``DECIDER_APP`` of the caller's to choose for it."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.pop("DECIDER_STORE", None)
    env.pop("DECIDER_APP", None)
    return env


@contextlib.contextmanager
def fresh_store(kind: str, pg_uri: str | None) -> Iterator[tuple[EventStore, str]]:
    """A fresh ``"sqlite"`` file (``synchronous=FULL``, in a temporary directory) or
    ``"postgres"`` schema (dropped afterwards), and the URI another process opens it by."""
    if kind == "sqlite":
        from decider.stores.sqlite import SqliteEventStore

        with tempfile.TemporaryDirectory(prefix="decider-bench-") as directory:
            path = Path(directory) / "events.db"
            store: EventStore = SqliteEventStore(path, synchronous="FULL")
            try:
                yield store, f"sqlite:///{path}"
            finally:
                store.close()
        return
    if kind != "postgres":
        raise ValueError(f"no fresh store of kind {kind!r} here (sqlite or postgres)")
    from decider.stores.postgres import PostgresEventStore

    if pg_uri is None:
        raise ValueError("a PostgreSQL run needs the server's uri")
    with pg.fresh_schema(pg_uri) as schema:
        store = PostgresEventStore(pg_uri, schema=schema)
        try:
            yield store, f"{pg_uri}{'&' if '?' in pg_uri else '?'}schema={schema}"
        finally:
            store.close()


def end(process: subprocess.Popen[Any], grace: float = 30.0) -> None:
    """End a child by its pid: SIGTERM, up to ``grace`` seconds to stop, then SIGKILL."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
