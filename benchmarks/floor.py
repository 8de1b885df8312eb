"""Figure 12: CPU per workflow against the floor.

The traffic-fine sample end to end, as figure 5 runs it (:mod:`benchmarks.end_to_end`): N police
reports are published, then the ``Service`` starts and is timed to the last fine issued. Beside
it, in the same run, a hand-written loop does the same work: one thread, stdlib ``json``, plain
dicts, the store's own schema and indexes (SQLite: WAL and ``synchronous=FULL``), batches of
500 inputs and one transaction per batch per stage (the workflow stage, then the command stage,
until every fine is issued). It reads the same inputs, runs the same ``decide``/``evolve`` and
the same handlers, and writes the same 11 rows per workflow with derived ids
(:func:`decider.event_id`), the same metadata and the same partition keys (the instance
stream's ``crc32``, :func:`~decider.processors.group.partitions.stream_key`, computed once per
instance; none on the routed fines), with each stage's checkpoint in the batch's transaction.
That loop is the floor: what the work costs with nothing around it.

The live shape (SQLite): the same service, started on an empty store while another process
publishes the N reports (one ``App.publish`` each, as fast as it goes), against the catch-up
run above: service CPU per workflow live / catch-up, in the same run (issue 24's bound: 1.3x),
with both rates (workflows per second; the live one from the publisher's first report to the
last fine, so bounded by the publisher) beside it. Its rows must be the catch-up run's.

Both sides publish the same inputs (fixed message ids), so they must write the same rows: each
side reports a digest of the rows it wrote (stream, revision, id, type, data, metadata,
partition key), and a run whose digests differ, or that did not write 11 events per workflow,
fails.

CPU per workflow: the service's is the process's CPU (all threads, ``getrusage``) less the
observer thread's (the benchmark's own thread that waits for the last fine, timed by
``time.thread_time`` in it), divided by N; the split per thread comes from
``/proc/self/task/<tid>/schedstat`` (nanoseconds on a CPU; ``stat``'s clock ticks where the
kernel keeps no schedstat), read before the service stops, named by ``threading``; "other" is
the rest (threads that ended during the run, ``Service.start`` on the main thread). The loop's
is its process's CPU. On PostgreSQL the server's CPU per workflow is summed over the backends of the
run's own connections (found in ``pg_stat_activity`` by the ``application_name`` the run puts
in its conninfo; their ``/proc/<pid>/stat``), so other users of the server are not counted, nor
the server's shared processes (WAL writer, checkpointer). The observer shares the service's
store, so its subscription's reads are in the service's server figure (one stream, small).

Python calls per workflow: a separate, shorter run of each side with a ``sys.setprofile`` hook
that counts ``call`` events (the service's threads through ``threading.setprofile``; the
observer's thread left out).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any
from zlib import crc32

from benchmarks import pg
from benchmarks.end_to_end import RunFailed, _open_store, _python_env, _wait_for_fines
from benchmarks.fresh import end
from benchmarks.harness import Figure, Pending, Result, Target
from decider import Began, Completed, InitiatedBy, Received, Send, Sent, event_id
from decider.processors import Service
from decider.stores import EventStore
from decider.streams import instance_stream, stream_name
from samples.traffic_fine import app as sample
from samples.traffic_fine.messages import (
    GenerateTrafficFineManualIdentificationCode,
    GenerateTrafficFineSystemNumber,
    IssueTrafficFine,
    ParkingViolation,
    PoliceReportPublished,
    SpeedingViolation,
    TrafficFineManualIdentificationCodeGenerated,
    TrafficFineSystemNumberGenerated,
)
from samples.traffic_fine.workflow import workflow

STORES = ("sqlite", "memory", "postgres")
"""The stores figure 12 runs on."""

TARGETS = {"sqlite": 2.0, "memory": 2.5, "postgres": 2.0}
"""Issue 24's bounds on service CPU / loop CPU per workflow."""

SERVER_TARGET = 1.5
"""Issue 24's bound on the PostgreSQL server's CPU per workflow, service / loop."""

LIVE_TARGET = 1.3
"""Issue 24's bound on the live shape's service CPU per workflow / the catch-up run's (SQLite)."""

BATCH = 500
"""The loop's batch: inputs (or commands) per transaction."""

EVENTS_PER_WORKFLOW = 11
"""8 instance events, 2 handler results and 1 issued fine."""

_ROOT = Path(__file__).resolve().parent.parent
_TICK = os.sysconf("SC_CLK_TCK")
_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_WORKFLOW_CHECKPOINT = f"{sample.app.name}.workflow.{workflow.name}"
_COMMAND_CHECKPOINT = f"{sample.app.name}.commands"


_Row = tuple[str, int, bytes, str, bytes, bytes, int | None]
"""stream, revision, event id (16 bytes), type, data, metadata, partition key."""


def _message_id(index: int) -> str:
    return f"msg_floor_{index:06d}"


def _publish(store: EventStore, n: int) -> None:
    """The N reports both sides read, with fixed message ids (so both write the same rows)."""
    app = sample.make_app()
    for index in range(n):
        report = PoliceReportPublished(
            police_report_id=f"pr_{index:06d}",
            offense=SpeedingViolation(maximum_speed="50 km/h", measured_speed="72 km/h"),
        )
        app.publish(store, report, stream=sample.REPORTS_STREAM, message_id=_message_id(index))


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cpu(directory: str) -> float | None:
    """CPU seconds of the thread or process whose ``/proc`` directory this is; None if gone.

    ``schedstat``'s first field (nanoseconds on a CPU) where the kernel keeps it, else
    ``stat``'s utime + stime (clock ticks, 10 ms apart: too coarse for a short run's split).
    """
    try:
        with open(f"{directory}/schedstat", encoding="ascii") as file:
            return int(file.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"{directory}/stat", encoding="ascii") as file:
            fields = file.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK


def _threads() -> dict[int, float]:
    """CPU seconds of each live thread of this process, by native thread id."""
    seconds: dict[int, float] = {}
    for tid in os.listdir("/proc/self/task"):
        value = _cpu(f"/proc/self/task/{tid}")
        if value is not None:
            seconds[int(tid)] = value
    return seconds


def _names() -> dict[int, str]:
    """The names of this process's live threads, by native thread id."""
    return {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}


def _split(
    before: dict[int, float], after: dict[int, float], names: dict[int, str], skip: int | None
) -> dict[str, float]:
    """CPU seconds per thread name between two :func:`_threads` readings (``skip`` left out);
    threads of one name (a pool's) are summed under it with their numbers dropped."""
    split: dict[str, float] = collections.defaultdict(float)
    for tid, seconds in after.items():
        if tid == skip:
            continue
        # A pool's threads under one name; the schema left out of a PostgreSQL thread's name.
        name = names.get(tid, "unnamed").split("-bench_")[0]
        name = name.rstrip("0123456789_").rstrip("-") or name
        split[name] += seconds - before.get(tid, 0.0)
    ordered = sorted(split.items(), key=lambda item: -item[1])
    return {name: round(seconds, 6) for name, seconds in ordered if seconds > 0}


class _Calls:
    """Counts Python ``call`` events per thread while installed (a profile hook)."""

    def __init__(self) -> None:
        self.by_thread: collections.Counter[int] = collections.Counter()
        self._get_ident = threading.get_ident

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            self.by_thread[self._get_ident()] += 1

    def start(self, all_threads: bool) -> None:
        if all_threads:
            threading.setprofile(self)
        sys.setprofile(self)

    def stop(self) -> None:
        sys.setprofile(None)
        threading.setprofile(None)


class _PgBackends:
    """CPU seconds of the server backends serving this process's connections (found by
    ``application_name``), read from their ``/proc/<pid>`` (:func:`_cpu`)."""

    def __init__(self, uri: str) -> None:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        self._name = conninfo_to_dict(uri)["application_name"]
        self._connection = psycopg.connect(uri, autocommit=True, application_name="floor-observer")

    def read(self) -> dict[int, float]:
        rows = self._connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (self._name,)
        ).fetchall()
        seconds = {pid: _cpu(f"/proc/{pid}") for (pid,) in rows}
        return {pid: value for pid, value in seconds.items() if value is not None}

    def close(self) -> None:
        self._connection.close()


def _server_seconds(before: dict[int, float], after: dict[int, float]) -> float:
    # A backend that started during the run counts from zero (its start-up included).
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def _digest(rows: Iterable[_Row]) -> dict[str, Any]:
    """What a side wrote besides the inputs: a digest of its rows, and their shape.

    The issued fines' revisions are left out: fines of different workflows may be issued in
    any order.
    """
    digest = hashlib.sha256()
    streams: collections.Counter[str] = collections.Counter()
    events = 0
    for row in sorted(
        (stream, -1 if stream == sample.ISSUED_STREAM else revision, *rest)
        for stream, revision, *rest in rows
        if stream != sample.REPORTS_STREAM
    ):
        digest.update(repr(row).encode())
        streams[str(row[0]).split("-", 1)[0]] += 1
        events += 1
    return {"digest": digest.hexdigest(), "events": events, "streams": dict(streams)}


def _store_rows(store: EventStore) -> list[_Row]:
    return [
        (
            e.stream,
            e.revision,
            e.id.bytes,
            e.type,
            bytes(e.data),
            bytes(e.metadata),
            e.partition_key,
        )
        for e in store.read_all(None, None)
    ]


def service_once(
    kind: str,
    n: int,
    directory: Path,
    uri: str | None,
    schema: str | None,
    calls: bool,
    live: bool = False,
) -> dict[str, Any]:
    """The service's run in this process: CPU per workflow, its split, the rows it wrote
    (with ``calls``: Python calls per workflow instead of times worth reporting).

    ``live``: the live shape. Nothing is published before the service starts; as it starts,
    another process (:func:`publish_once`) publishes the N reports to the same store, one
    ``App.publish`` each, while the service runs (SQLite only: a store another process can
    open). The rate is N over the time from that process's first report to the last fine."""
    if live and kind != "sqlite":
        raise ValueError("the live shape runs on SQLite (another process writes the inputs)")
    store = _open_store(kind, directory, uri, schema)
    backends = _PgBackends(uri) if kind == "postgres" and uri else None
    publisher: subprocess.Popen[str] | None = None
    try:
        if not live:
            _publish(store, n)
        service = Service(sample.make_app(), store)
        go, observed = threading.Event(), dict[str, float]()

        def observe() -> None:
            go.wait()
            begin = time.thread_time()
            observed["issued"] = _wait_for_fines(store, n, time.perf_counter() + 600)
            observed["cpu"] = time.thread_time() - begin

        observer = threading.Thread(target=observe, name="floor-observer")
        observer.start()
        counter = _Calls()
        server_before = backends.read() if backends else {}
        threads_before = _threads()
        cpu_start, start = _process_cpu(), time.perf_counter()
        if calls:
            counter.start(all_threads=True)
        go.set()
        service.start()
        if live:
            publisher = subprocess.Popen(
                [
                    *(sys.executable, "-m", "benchmarks.floor", "--side", "publish"),
                    *("--store", kind, "--n", str(n), "--dir", str(directory)),
                ],
                stdout=subprocess.PIPE,
                text=True,
                cwd=_ROOT,
                env=_python_env(),
            )
        try:
            observer.join()
            seconds, cpu = time.perf_counter() - start, _process_cpu() - cpu_start
            ended_at = time.time()
            counter.stop()
            # The service's threads keep counting until they stop: count up to the last fine.
            counted = sum(c for ident, c in counter.by_thread.items() if ident != observer.ident)
            threads_after, names = _threads(), _names()
            server_after = backends.read() if backends else {}
        finally:
            service.stop()
        rows = _store_rows(store)
        errors = [repr(error) for error in service.errors]
        published_from: float | None = None
        if publisher is not None:
            out, _ = publisher.communicate(timeout=60)
            if publisher.returncode != 0:
                errors.append(f"the publisher exited {publisher.returncode}")
            else:
                published = json.loads(out.strip().splitlines()[-1])
                published_from = published["started_at"]
                observed["publish_seconds"] = published["seconds"]
    finally:
        if publisher is not None and publisher.poll() is None:
            end(publisher, grace=5.0)
        store.close()
        if backends:
            backends.close()
    service_cpu = cpu - observed["cpu"]
    split = _split(threads_before, threads_after, names, observer.native_id)
    rest = service_cpu - sum(split.values())
    if rest > 0:
        split["other"] = round(rest, 6)
    return {
        "side": "live" if live else "service",
        "store": kind,
        "n": n,
        "issued": int(observed["issued"]),
        "errors": errors,
        "seconds": seconds,
        "cpu_seconds": service_cpu,
        "cpu_us_per_workflow": service_cpu / n * 1e6,
        "observer_cpu_seconds": observed["cpu"],
        "threads": split,
        "server_cpu_us_per_workflow": (
            _server_seconds(server_before, server_after) / n * 1e6 if backends else None
        ),
        "calls_per_workflow": counted / n if calls else None,
        "live_seconds": None if published_from is None else ended_at - published_from,
        "publish_seconds": observed.get("publish_seconds"),
        **_digest(rows),
    }


def publish_once(kind: str, n: int, directory: Path) -> dict[str, Any]:
    """The live shape's publisher (a process of its own): the N reports, one ``App.publish``
    each, as fast as it goes; when it started (the wall clock, for the service's process) and
    how long it took."""
    store = _open_store(kind, directory, None, None)
    try:
        started_at, start = time.time(), time.perf_counter()
        _publish(store, n)
        return {"started_at": started_at, "seconds": time.perf_counter() - start}
    finally:
        store.close()


# The loop ---------------------------------------------------------------------------------

_Read = tuple[int, str, bytes, bytes]
"""position, type, data, metadata."""


class _SqliteLoop:
    """The loop's store on SQLite: the store's schema, WAL, ``synchronous=FULL``."""

    def __init__(self, path: Path) -> None:
        import sqlite3

        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")

    def inputs(self, after: int, types: tuple[str, ...]) -> list[_Read]:
        marks = ", ".join("?" * len(types))
        return self.db.execute(
            "SELECT position, type, data, metadata FROM events"
            f" WHERE position > ? AND type IN ({marks}) ORDER BY position LIMIT ?",
            (after, *types, BATCH),
        ).fetchall()

    def sent(self, after: int) -> list[_Read]:
        return self.db.execute(
            "SELECT position, type, data, metadata FROM events"
            " WHERE position > ? AND substr(type, 1, 5) = 'Sent:' ORDER BY position LIMIT ?",
            (after, BATCH),
        ).fetchall()

    def write(self, rows: list[_Row], checkpoint: str, position: int) -> None:
        now = datetime.now(UTC).isoformat()
        self.db.execute("BEGIN")
        self.db.executemany(
            "INSERT INTO events"
            " (stream, revision, event_id, type, data, metadata, partition_key, recorded_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(*row, now) for row in rows],
        )
        self.db.execute(
            "INSERT INTO checkpoints (name, position) VALUES (?, ?)"
            " ON CONFLICT (name) DO UPDATE SET position = excluded.position",
            (checkpoint, position),
        )
        self.db.execute("COMMIT")

    def rows(self) -> list[_Row]:
        return self.db.execute(
            "SELECT stream, revision, event_id, type, data, metadata, partition_key FROM events"
        ).fetchall()

    def close(self) -> None:
        self.db.close()


class _MemoryLoop:
    """The loop's store in memory: a list of rows, a dict of checkpoints."""

    def __init__(self, published: list[_Row]) -> None:
        self.log: list[tuple[str, int, bytes, str, bytes, bytes, int | None, datetime]] = []
        self.checkpoints: dict[str, int] = {}
        for row in published:
            self.log.append((*row, datetime.now(UTC)))

    def _scan(self, after: int, keep: Callable[[str], bool]) -> list[_Read]:
        found: list[_Read] = []
        log = self.log
        for index in range(after, len(log)):
            row = log[index]
            if keep(row[3]):
                found.append((index + 1, row[3], row[4], row[5]))
                if len(found) == BATCH:
                    break
        return found

    def inputs(self, after: int, types: tuple[str, ...]) -> list[_Read]:
        return self._scan(after, set(types).__contains__)

    def sent(self, after: int) -> list[_Read]:
        return self._scan(after, lambda type_name: type_name.startswith("Sent:"))

    def write(self, rows: list[_Row], checkpoint: str, position: int) -> None:
        now = datetime.now(UTC)
        self.log.extend((*row, now) for row in rows)
        self.checkpoints[checkpoint] = position

    def rows(self) -> list[_Row]:
        return [row[:7] for row in self.log]

    def close(self) -> None:
        pass


class _PostgresLoop:
    """The loop's store on PostgreSQL (psycopg): the store's schema and positions (the
    transaction id shifted left, plus the index), one transaction per batch."""

    def __init__(self, uri: str, schema: str) -> None:
        import psycopg
        from psycopg import sql as pgsql

        self.db = psycopg.connect(uri)
        s = pgsql.Identifier(schema).as_string(None)
        self._events, self._checkpoints = f"{s}.events", f"{s}.checkpoints"
        self.db.execute("SET synchronous_commit = on")
        self.db.commit()

    def _read(self, where: str, params: tuple[Any, ...]) -> list[_Read]:
        rows = self.db.execute(
            f"SELECT position, type, data, metadata FROM {self._events}"
            f" WHERE position > %s AND {where} ORDER BY position LIMIT %s",
            params,
        ).fetchall()
        self.db.commit()
        return rows

    def inputs(self, after: int, types: tuple[str, ...]) -> list[_Read]:
        return self._read("type = ANY(%s)", (after, list(types), BATCH))

    def sent(self, after: int) -> list[_Read]:
        return self._read("type LIKE 'Sent:%%'", (after, BATCH))

    def write(self, rows: list[_Row], checkpoint: str, position: int) -> None:
        import uuid

        with self.db.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {self._events}"
                " (position, stream, revision, event_id, type, data, metadata, partition_key,"
                " recorded_at)"
                " VALUES ((pg_current_xact_id()::text::bigint << 20) + %s,"
                " %s, %s, %s, %s, %s, %s, %s, now())",
                [
                    (index, stream, revision, uuid.UUID(bytes=id_), type_name, data, metadata, key)
                    for index, (stream, revision, id_, type_name, data, metadata, key) in (
                        enumerate(rows)
                    )
                ],
            )
            cursor.execute(
                f"INSERT INTO {self._checkpoints} (name, position) VALUES (%s, %s)"
                " ON CONFLICT (name) DO UPDATE SET position = excluded.position",
                (checkpoint, position),
            )
        self.db.commit()

    def rows(self) -> list[_Row]:
        rows = self.db.execute(
            "SELECT stream, revision, event_id, type, data, metadata, partition_key"
            f" FROM {self._events}"
        ).fetchall()
        self.db.commit()
        return [(s, r, i.bytes, t, bytes(d), bytes(m), k) for s, r, i, t, d, m, k in rows]

    def close(self) -> None:
        self.db.close()


_LoopStore = _SqliteLoop | _MemoryLoop | _PostgresLoop


def _offense(data: dict[str, str]) -> SpeedingViolation | ParkingViolation:
    if "location" in data:
        return ParkingViolation(location=data["location"])
    return SpeedingViolation(
        maximum_speed=data["maximum_speed"], measured_speed=data["measured_speed"]
    )


_DECODE: dict[str, Callable[[dict[str, Any]], Any]] = {
    "fines.PoliceReportPublished": lambda d: PoliceReportPublished(
        police_report_id=d["police_report_id"], offense=_offense(d["offense"])
    ),
    "fines.TrafficFineSystemNumberGenerated": lambda d: TrafficFineSystemNumberGenerated(
        police_report_id=d["police_report_id"], number=d["number"]
    ),
    "fines.TrafficFineManualIdentificationCodeGenerated": lambda d: (
        TrafficFineManualIdentificationCodeGenerated(
            police_report_id=d["police_report_id"], number=d["number"], code=d["code"]
        )
    ),
    "fines.GenerateTrafficFineSystemNumber": lambda d: GenerateTrafficFineSystemNumber(
        police_report_id=d["police_report_id"]
    ),
    "fines.GenerateTrafficFineManualIdentificationCode": lambda d: (
        GenerateTrafficFineManualIdentificationCode(
            police_report_id=d["police_report_id"], system_number=d["system_number"]
        )
    ),
    "fines.IssueTrafficFine": lambda d: IssueTrafficFine(
        police_report_id=d["police_report_id"],
        system_number=d["system_number"],
        manual_identification_code=d["manual_identification_code"],
    ),
}
"""Stored type name -> the message from its decoded JSON (the sample's messages, by hand)."""

_ENCODE: dict[type, tuple[str, Callable[[Any], dict[str, Any]]]] = {
    GenerateTrafficFineSystemNumber: (
        "fines.GenerateTrafficFineSystemNumber",
        lambda m: {"police_report_id": m.police_report_id},
    ),
    GenerateTrafficFineManualIdentificationCode: (
        "fines.GenerateTrafficFineManualIdentificationCode",
        lambda m: {"police_report_id": m.police_report_id, "system_number": m.system_number},
    ),
    IssueTrafficFine: (
        "fines.IssueTrafficFine",
        lambda m: {
            "police_report_id": m.police_report_id,
            "system_number": m.system_number,
            "manual_identification_code": m.manual_identification_code,
        },
    ),
    TrafficFineSystemNumberGenerated: (
        "fines.TrafficFineSystemNumberGenerated",
        lambda m: {"police_report_id": m.police_report_id, "number": m.number},
    ),
    TrafficFineManualIdentificationCodeGenerated: (
        "fines.TrafficFineManualIdentificationCodeGenerated",
        lambda m: {"police_report_id": m.police_report_id, "number": m.number, "code": m.code},
    ),
}
"""Message class -> its stored type name and its JSON-ready dict (by hand)."""

_HANDLERS: dict[str, Callable[[Any, str], list[object]]] = {
    "fines.GenerateTrafficFineSystemNumber": sample.generate_system_number,
    "fines.GenerateTrafficFineManualIdentificationCode": (
        sample.generate_manual_identification_code
    ),
}
_ROUTED = {"fines.IssueTrafficFine": sample.ISSUED_STREAM}
_INPUTS = (
    "fines.PoliceReportPublished",
    "fines.TrafficFineSystemNumberGenerated",
    "fines.TrafficFineManualIdentificationCodeGenerated",
)


def _metadata(message_id: str, correlation_id: str, causation_id: str) -> bytes:
    return _JSON.encode(
        {"message_id": message_id, "correlation_id": correlation_id, "causation_id": causation_id}
    ).encode()


def _loop(store: _LoopStore, n: int) -> int:
    """The floor: both stages in turn, a batch each, until ``n`` fines are issued; the fines."""
    decode, encode, loads, dumps = _DECODE, _ENCODE, json.loads, _JSON.encode
    decide, evolve = workflow.decide, workflow.evolve
    # instance id -> (state, next revision, its stream, its partition key: made once)
    states: dict[str, tuple[Any, int, str, int]] = {}
    issued_revision = 0
    after_inputs = after_sent = 0
    while issued_revision < n:
        rows: list[_Row] = []
        batch = store.inputs(after_inputs, _INPUTS)
        for _, type_name, data, raw_metadata in batch:
            metadata = loads(raw_metadata)
            message = decode[type_name](loads(data))
            cause = metadata["message_id"]
            if type_name == "fines.PoliceReportPublished":
                instance = message.police_report_id
                state, revision = workflow.initial_state, 0
                stream = instance_stream(workflow.name, instance)
                key = crc32(stream.encode())  # stream_key's: the instance stream's crc32
                events: list[tuple[Any, str, bytes]] = [
                    (Began(), "Began", b"{}"),
                    (InitiatedBy(message), "InitiatedBy:" + type_name, data),
                ]
            else:
                instance = metadata["correlation_id"]
                state, revision, stream, key = states[instance]
                events = [(Received(message), "Received:" + type_name, data)]
            # decide sees the state before the input; every event recorded then moves it.
            for command in decide(message, state):
                if isinstance(command, Send):
                    name, to_dict = encode[type(command.message)]
                    sent = Sent(command.message)
                    events.append((sent, "Sent:" + name, dumps(to_dict(command.message)).encode()))
                else:
                    events.append((Completed(), "Completed", b"{}"))
            for index, (event, stored_type, stored_data) in enumerate(events):
                state = evolve(state, event)
                new_id = event_id(stream, cause, index)
                rows.append(
                    (
                        stream,
                        revision + index,
                        new_id.bytes,
                        stored_type,
                        stored_data,
                        _metadata(str(new_id), instance, cause),
                        key,
                    )
                )
            states[instance] = (state, revision + len(events), stream, key)
        if batch:
            after_inputs = batch[-1][0]
            store.write(rows, _WORKFLOW_CHECKPOINT, after_inputs)
        rows = []
        commands = store.sent(after_sent)
        for _, type_name, data, raw_metadata in commands:
            metadata = loads(raw_metadata)
            command_type = type_name[5:]
            command_id, correlation = metadata["message_id"], metadata["correlation_id"]
            if command_type in _ROUTED:
                stream = _ROUTED[command_type]
                new_id = event_id(stream, command_id, 0)
                rows.append(
                    (
                        stream,
                        issued_revision,
                        new_id.bytes,
                        command_type,
                        data,
                        _metadata(str(new_id), correlation, command_id),
                        None,  # a routed copy: no instance's key (the router's own)
                    )
                )
                issued_revision += 1
                continue
            handler = _HANDLERS[command_type]
            key = states[correlation][3]  # a handler's results: inputs of the instance
            results = handler(decode[command_type](loads(data)), command_id)
            stream = stream_name(handler.__name__, command_id)
            for index, result in enumerate(results):
                name, to_dict = encode[type(result)]
                new_id = event_id(stream, command_id, index)
                rows.append(
                    (
                        stream,
                        index,
                        new_id.bytes,
                        name,
                        dumps(to_dict(result)).encode(),
                        _metadata(str(new_id), correlation, command_id),
                        key,
                    )
                )
        if commands:
            after_sent = commands[-1][0]
            store.write(rows, _COMMAND_CHECKPOINT, after_sent)
        if not batch and not commands:
            raise RunFailed(f"the loop stalled at {issued_revision} fines of {n}")
    return issued_revision


def loop_once(
    kind: str, n: int, directory: Path, uri: str | None, schema: str | None, calls: bool
) -> dict[str, Any]:
    """The loop's run in this process, measured as :func:`service_once` measures the service."""
    store: _LoopStore
    # The inputs are published through the store, as for the service, then read by the loop.
    published = _open_store(kind, directory, uri, schema)
    try:
        _publish(published, n)
        inputs = _store_rows(published)
    finally:
        published.close()
    if kind == "sqlite":
        store = _SqliteLoop(directory / "e2e.db")
    elif kind == "memory":
        store = _MemoryLoop(inputs)
    elif kind == "postgres" and uri is not None and schema is not None:
        store = _PostgresLoop(uri, schema)
    else:
        raise ValueError(f"no loop for {kind!r}")
    backends = _PgBackends(uri) if kind == "postgres" and uri else None
    try:
        counter = _Calls()
        server_before = backends.read() if backends else {}
        cpu_start, start = _process_cpu(), time.perf_counter()
        if calls:
            counter.start(all_threads=False)
        try:
            issued = _loop(store, n)
        finally:
            counter.stop()
        seconds, cpu = time.perf_counter() - start, _process_cpu() - cpu_start
        server_after = backends.read() if backends else {}
        rows = store.rows()
    finally:
        store.close()
        if backends:
            backends.close()
    return {
        "side": "loop",
        "store": kind,
        "n": n,
        "issued": issued,
        "errors": [],
        "seconds": seconds,
        "cpu_seconds": cpu,
        "cpu_us_per_workflow": cpu / n * 1e6,
        "server_cpu_us_per_workflow": (
            _server_seconds(server_before, server_after) / n * 1e6 if backends else None
        ),
        "calls_per_workflow": sum(counter.by_thread.values()) / n if calls else None,
        **_digest(rows),
    }


# Runs in child processes, and the figure ----------------------------------------------------


def _child_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.floor")
    parser.add_argument("--side", choices=("service", "loop", "live", "publish"), required=True)
    parser.add_argument("--store", choices=STORES, required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--uri", default=None)
    parser.add_argument("--schema", default=None)
    parser.add_argument("--calls", action="store_true", help="count Python calls instead")
    args = parser.parse_args(argv)
    if args.side == "publish":
        result = publish_once(args.store, args.n, args.dir)
    elif args.side == "live":
        result = service_once(
            args.store, args.n, args.dir, args.uri, args.schema, args.calls, live=True
        )
    else:
        run = service_once if args.side == "service" else loop_once
        result = run(args.store, args.n, args.dir, args.uri, args.schema, args.calls)
    print(json.dumps(result), flush=True)
    return 0


def run_in_child(
    side: str, kind: str, n: int, timeout: float, pg_uri: str | None, calls: bool = False
) -> dict[str, Any]:
    """One side's run in a fresh Python process (a PostgreSQL one in a fresh schema);
    :class:`~benchmarks.end_to_end.RunFailed` unless every fine was issued without errors."""
    with tempfile.TemporaryDirectory(prefix="decider-floor-") as directory:
        command = [sys.executable, "-m", "benchmarks.floor", "--side", side, "--store", kind]
        command += ["--n", str(n), "--dir", directory] + (["--calls"] if calls else [])
        env = _python_env()
        if kind == "postgres":
            if pg_uri is None:
                raise ValueError("a PostgreSQL run needs the server's uri")
            from psycopg.conninfo import make_conninfo

            # The name finds the run's own backends (:class:`_PgBackends`).
            name = f"decider-floor-{os.getpid()}-{side}"
            with pg.fresh_schema(pg_uri) as schema:
                command += ["--uri", make_conninfo(pg_uri, application_name=name)]
                command += ["--schema", schema]
                done = _run(command, env, timeout)
        else:
            done = _run(command, env, timeout)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RunFailed(f"floor {side} {kind} N={n}: exit {done.returncode}: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    if result["issued"] != n or result["errors"]:
        raise RunFailed(
            f"floor {side} {kind} N={n}: {result['issued']} fines, errors {result['errors'][:3]}"
        )
    if result["events"] != EVENTS_PER_WORKFLOW * n:
        raise RunFailed(f"floor {side} {kind} N={n}: wrote {result['events']} events")
    return result


def _run(
    command: list[str], env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            cwd=_ROOT,
            env=env,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise RunFailed(f"{command[3:]}: did not end within {timeout}s") from exc


def _short(thread: str, app_name: str) -> str:
    """A thread's name without the words every name of the service repeats."""
    for prefix in ("decider:", "decider "):
        thread = thread.removeprefix(prefix)
    return thread.removeprefix(f"{app_name}.")


def measure_store(
    kind: str, n: int, calls_n: int, repeats: int, timeout: float, pg_uri: str | None
) -> list[Result]:
    """Figure 12 on one store: ``repeats`` pairs of runs (service then loop, alternated), then
    one call-counting run of each side at ``calls_n``; the medians' ratio."""
    services, loops, lives = [], [], []
    for _ in range(repeats):
        services.append(run_in_child("service", kind, n, timeout, pg_uri))
        loops.append(run_in_child("loop", kind, n, timeout, pg_uri))
        if kind == "sqlite":
            lives.append(run_in_child("live", kind, n, timeout, pg_uri))
    for service, other in [*zip(services, loops, strict=True), *zip(services, lives, strict=False)]:
        if (service["digest"], service["streams"]) != (other["digest"], other["streams"]):
            raise RunFailed(
                f"floor {kind} N={n}: the {other['side']} run did not write what the service"
                f" wrote: {service['streams']} vs {other['streams']}"
            )
    service_calls = run_in_child("service", kind, calls_n, timeout, pg_uri, calls=True)
    loop_calls = run_in_child("loop", kind, calls_n, timeout, pg_uri, calls=True)

    def median(runs: list[dict[str, Any]], key: str) -> float:
        return statistics.median(float(run[key]) for run in runs)

    service_us, loop_us = (
        median(services, "cpu_us_per_workflow"),
        median(loops, "cpu_us_per_workflow"),
    )
    chosen = min(services, key=lambda run: abs(run["cpu_us_per_workflow"] - service_us))
    split_us = {name: round(seconds / n * 1e6, 1) for name, seconds in chosen["threads"].items()}
    calls = {
        "service": service_calls["calls_per_workflow"],
        "loop": loop_calls["calls_per_workflow"],
    }
    extra = {
        "n": n,
        "repeats": repeats,
        "service_us": [run["cpu_us_per_workflow"] for run in services],
        "loop_us": [run["cpu_us_per_workflow"] for run in loops],
        "service_seconds": [run["seconds"] for run in services],
        "loop_seconds": [run["seconds"] for run in loops],
        "observer_cpu_us": [run["observer_cpu_seconds"] / n * 1e6 for run in services],
        "threads_us_per_workflow": split_us,
        "calls_per_workflow": calls,
        "calls_n": calls_n,
        "events_per_workflow": services[0]["events"] / n,
        "streams": services[0]["streams"],
        "same_rows": True,
    }
    app_name = sample.app.name
    split_text = ", ".join(
        f"{_short(name, app_name)} {us:,.0f}" for name, us in split_us.items() if us >= 0.5
    )
    results: list[Result] = [
        Figure(
            key=f"floor_{kind}",
            title=f"12. {kind}: service CPU per workflow vs the floor, N={n:,}",
            unit="us CPU/workflow",
            rate=service_us,
            baseline="the hand-written loop's CPU per workflow, same run",
            baseline_rate=loop_us,
            ratio=service_us / loop_us,
            ratio_is="service CPU / loop CPU per workflow (lower is better)",
            target=Target("<=", TARGETS[kind]),
            note=(
                f"median of {repeats}; per thread (us/workflow): {split_text};"
                f" Python calls per workflow {calls['service']:,.0f} vs {calls['loop']:,.0f}"
                f" (N={calls_n}); both wrote the same rows"
                f" ({EVENTS_PER_WORKFLOW} events per workflow)"
            ),
            extra=extra,
        )
    ]
    if lives:
        results.append(_live_figure(n, services, lives))
    if kind == "postgres":
        server_us = median(services, "server_cpu_us_per_workflow")
        loop_server_us = median(loops, "server_cpu_us_per_workflow")
        extra_server = {
            "service_server_us": [run["server_cpu_us_per_workflow"] for run in services],
            "loop_server_us": [run["server_cpu_us_per_workflow"] for run in loops],
            "backends": "the run's own connections (pg_stat_activity by application_name)",
        }
        results.append(
            Figure(
                key="floor_postgres_server",
                title=f"12. postgres: server CPU per workflow vs the floor's, N={n:,}",
                unit="us CPU/workflow",
                rate=server_us,
                baseline="the server's CPU per workflow for the loop, same run",
                baseline_rate=loop_server_us,
                ratio=server_us / loop_server_us if loop_server_us > 0 else None,
                ratio_is="server CPU for the service / for the loop (lower is better)",
                target=Target("<=", SERVER_TARGET) if loop_server_us > 0 else None,
                note=f"median of {repeats}; the backends of the run's own connections only",
                extra=extra_server,
            )
        )
    return results


def _live_figure(n: int, services: list[dict[str, Any]], lives: list[dict[str, Any]]) -> Figure:
    """The live shape on SQLite against the catch-up runs of the same measurement."""
    live_us = statistics.median(run["cpu_us_per_workflow"] for run in lives)
    catch_up_us = statistics.median(run["cpu_us_per_workflow"] for run in services)
    live_rate = statistics.median(n / run["live_seconds"] for run in lives)
    catch_up_rate = statistics.median(n / run["seconds"] for run in services)
    publish_rate = statistics.median(n / run["publish_seconds"] for run in lives)
    chosen = min(lives, key=lambda run: abs(run["cpu_us_per_workflow"] - live_us))
    split_us = {name: round(seconds / n * 1e6, 1) for name, seconds in chosen["threads"].items()}
    split_text = ", ".join(
        f"{_short(name, sample.app.name)} {us:,.0f}" for name, us in split_us.items() if us >= 0.5
    )
    return Figure(
        key="floor_live_sqlite",
        title=f"12. sqlite live: service CPU per workflow, inputs published meanwhile, N={n:,}",
        unit="us CPU/workflow",
        rate=live_us,
        baseline="the catch-up run's service CPU per workflow, same run",
        baseline_rate=catch_up_us,
        ratio=live_us / catch_up_us,
        ratio_is="live CPU / catch-up CPU per workflow (lower is better)",
        target=Target("<=", LIVE_TARGET),
        note=(
            f"median of {len(lives)}; another process published the reports while the service"
            f" ran ({publish_rate:,.0f} reports/s alone); {live_rate:,.0f} workflows/s live"
            f" (first report to last fine) against {catch_up_rate:,.0f} in catch-up;"
            f" per thread (us/workflow): {split_text}; the same rows as the catch-up run"
        ),
        extra={
            "n": n,
            "live_us": [run["cpu_us_per_workflow"] for run in lives],
            "catch_up_us": [run["cpu_us_per_workflow"] for run in services],
            "live_workflows_per_second": live_rate,
            "catch_up_workflows_per_second": catch_up_rate,
            "publish_reports_per_second": publish_rate,
            "threads_us_per_workflow": split_us,
        },
    )


def measure(
    stores: Sequence[str],
    n: int,
    calls_n: int,
    repeats: int,
    timeout: float,
    pg_uri: str | None,
    progress: Callable[[str], None] | None = None,
) -> list[Result]:
    """Figure 12 on each store; a store whose run fails is reported pending with the reason."""
    say = progress or (lambda _: None)
    results: list[Result] = []
    for kind in stores:
        say(f"  floor {kind} N={n} x{repeats} ...")
        try:
            results.extend(measure_store(kind, n, calls_n, repeats, timeout, pg_uri))
        except RunFailed as exc:
            results.append(Pending(f"floor_{kind}", f"12. {kind}: CPU vs the floor", str(exc)))
    return results


if __name__ == "__main__":
    sys.exit(_child_main())
