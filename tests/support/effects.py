"""The side table in which the service apps' handlers record their effects.

The SQLite file named by ``$SVC_EFFECTS_DB`` holds ``effects(command_id PRIMARY KEY, kind,
calls, pid)``: one row per command id (the effect, made idempotent by its key), ``calls``
counting how many times a handler ran for it (at-least-once delivery shows as calls > 1), and
the process id of the last call (which service process carried it out).
Handlers run in ``decider run`` processes, so the table is a file, not a Python object.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time

EFFECTS_ENV = "SVC_EFFECTS_DB"
"""The environment variable that names the effects file."""

DELAY_ENV = "SVC_HANDLER_DELAY"
"""The environment variable with the seconds each recorded effect takes."""

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS effects("
    "command_id TEXT PRIMARY KEY, kind TEXT NOT NULL, calls INTEGER NOT NULL, pid INTEGER)"
)
_local = threading.local()


def effects_connection(path: str) -> sqlite3.Connection:
    """A connection to the effects file ``path``, its table created."""
    connection = sqlite3.connect(path, timeout=30, isolation_level=None)
    # WAL is kept by the file once set. Setting it takes the file's lock without waiting on
    # the busy handler, so a reader that asks while a handler writes fails with "database is
    # locked": ask only while the file is not in WAL yet, and try again for the timeout.
    deadline = time.monotonic() + 30
    while connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        try:
            connection.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)  # another process holds the lock for a moment
    # A killed process loses nothing the OS already has; only power loss would.
    connection.execute("PRAGMA synchronous=OFF")
    connection.execute(SCHEMA)
    return connection


def record_effect(command_id: str, kind: str) -> None:
    """The effect of a command, keyed by its id: a second call only counts.

    ``$SVC_HANDLER_DELAY`` seconds pass first, as for a call to a remote service, so that a
    run lasts long enough to be killed in the middle.
    """
    delay = float(os.environ.get(DELAY_ENV) or 0)
    if delay:
        threading.Event().wait(delay)
    connection: sqlite3.Connection | None = getattr(_local, "connection", None)
    if connection is None:
        connection = _local.connection = effects_connection(os.environ[EFFECTS_ENV])
    connection.execute(
        "INSERT INTO effects(command_id, kind, calls, pid) VALUES (?, ?, 1, ?) "
        "ON CONFLICT(command_id) DO UPDATE SET calls = calls + 1, pid = excluded.pid",
        (command_id, kind, os.getpid()),
    )


def writing_effects(pid: int, path: str) -> bool:
    """Whether process ``pid`` is inside a write of the effects file ``path``: it holds an
    exclusive lock on the file or its WAL (``-wal``, ``-shm``), as a write transaction or a
    checkpoint does, and every other writer waits for it (Linux: ``/proc/locks``)."""
    files = set()
    for suffix in ("", "-wal", "-shm"):
        try:
            found = os.stat(path + suffix)
        except FileNotFoundError:
            continue
        device = f"{os.major(found.st_dev):02x}:{os.minor(found.st_dev):02x}"
        files.add(f"{device}:{found.st_ino}")
    with open("/proc/locks", encoding="ascii") as locks:
        for line in locks:
            # "1: POSIX  ADVISORY  WRITE 1234 fe:00:2163707 120 120"; "1: -> POSIX ..." waits.
            fields = line.split()
            held = len(fields) == 8 and fields[3] == "WRITE" and fields[4] == str(pid)
            if held and fields[5] in files:
                return True
    return False


def read_effects(path: str) -> dict[str, tuple[str, int]]:
    """command id -> (kind, calls)."""
    connection = effects_connection(path)
    try:
        rows = connection.execute("SELECT command_id, kind, calls FROM effects").fetchall()
    finally:
        connection.close()
    return {command_id: (kind, calls) for command_id, kind, calls in rows}


def effect_pids(path: str) -> dict[str, int]:
    """command id -> the process id of its last handler call."""
    connection = effects_connection(path)
    try:
        rows = connection.execute("SELECT command_id, pid FROM effects").fetchall()
    finally:
        connection.close()
    return dict(rows)
