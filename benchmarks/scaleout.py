"""Figure 9: scale-out, several ``decider run --partitions auto`` processes on one store.

Each run starts k service processes of the traffic-fine sample (``samples.traffic_fine.app:app``)
on a fresh store (an SQLite file, or a fresh PostgreSQL schema), waits until they have split
the partitions evenly, then a separate publisher process appends N police reports (in chunks
of 100, ``--chunk``) while the services run: the shape users see. Timed: from the publisher's
first append until every fine is issued (the command processor's last effect), counted through
a filtered subscription; the publisher's own start (a Python process importing the app, a few
tenths of a second) is left out, as it would count the same fixed time against every k. Each
run also says when the publisher began and ended its appends: a run whose last fine comes just
after the publisher's last append was waiting for its inputs. ``--publishers M`` splits the reports
between M publisher processes, for a machine whose services outrun one publisher. ``--rounds
R`` runs every process count R times, in turns, and each figure is the median over the rounds
of what it is in one round (a ratio against k = 1 is taken within a round).

- **Throughput**: workflows/s with k = 1, 2, 4 processes, and the scaling efficiency
  ``rate(k) / (k x rate(1))``. WARNING: the figure depends on the cores the machine has (each
  process is one core at most, behind its GIL); the report names them.
- **Growth**: one process at N = 5,000 and N = 50,000: the rate at the larger N against the
  rate at the smaller (target >= 0.9: the rate must not fall as the log grows). Each run also
  records the service's CPU seconds per 1,000 workflows (Linux), which a loaded machine
  disturbs less than the rate.
- **CPU per workflow** (Linux): the CPU milliseconds the service processes used per workflow
  from the publisher's start to the last fine (``cpu_ms_per_workflow``), and those of the
  busiest process (``busiest_cpu_ms_per_workflow``). The first is what k processes cost beyond
  one (each reads the whole log, a batch commits once per partition); the second bounds the rate
  where every process has a core (``1 / busiest``), so ``busiest(1) / (k x busiest(k))`` is the
  efficiency the run projects for such a machine (``projected_efficiency``; PostgreSQL's own CPU
  not counted). On a machine with fewer cores than processes, or one shared with other work,
  these show more than the rate does.
- **What the group's work costs** (three figures per store, the largest k against k = 1;
  targets at k = 4): the **total CPU per workflow**, the services' plus, on PostgreSQL, the
  server's backends of the services' connections (found by their ``application_name``, read
  from ``/proc``: the server must run on this machine), target <= 1.15x; the **events read per
  event written**: what every processor's subscriptions delivered in all processes
  (``decider_processor_delivered_total``, scraped from each service's metrics endpoint, the
  ``metrics`` extra) over the events the run added to the log, target <= 1.2x; and the
  **busiest process's share** of the services' CPU, target <= 28% (an even share is 25%). A
  group that adds capacity reads each event about once, whatever its size.
- **Failover**: with 3 processes, one is SIGKILLed when a third of the fines are issued; the
  figure is the seconds until every partition it held has its checkpoint moved on again (taken
  over after the lease expires), against the target lease expiry + 1 s. The run must still end
  with every fine issued exactly once (0 lost, 0 duplicated).

Run alone: ``python -m benchmarks --only scaleout`` (``--quick`` for small sizes), or at a size
of your choice: ``python -m benchmarks.scaleout --n 10000 --processes 1,2,4,8`` (N = 10,000 by
default). The failover
run on the EventStoreDB test server (``--stores esdb``, a fresh server process per run) needs
kurrentdbclient: ``.venv-kurrentdb/bin/python -m benchmarks.scaleout --stores esdb
--failover-only``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import pg, thread_cpu
from benchmarks.fresh import child_env, fresh_store
from benchmarks.harness import Figure, Pending, Result, Target, format_table
from decider.processors.app.streams import workflow_processor_name
from decider.processors.group.partitions import checkpoint_name, lease_name
from decider.stores import CaughtUp, EventStore, Filter
from decider.stores.leases import LeaseStore
from decider.stores.protocol import CheckpointStore, TransactionalStore
from samples.traffic_fine.app import ISSUED_STREAM, REPORTS_STREAM, app
from samples.traffic_fine.messages import PoliceReportPublished, SpeedingViolation
from samples.traffic_fine.workflow import workflow

APP_SPEC = "samples.traffic_fine.app:app"
STORES = ("sqlite", "postgres", "esdb")
"""The stores a run can use. ``esdb``: the EventStoreDB test server, a fresh process per run (as
a real node would be), which ``--partitions auto`` needs kurrentdbclient for (its atomic
multi-stream append fences the commits): run it with the ``.venv-kurrentdb`` Python."""
LEASE_TTL = 3.0
"""The lease time to live the services run with (the failover target is this + 1 s)."""

CHUNK = 100
"""Reports per publisher append (``--chunk``)."""
_ISSUED = Filter(stream_prefixes=(ISSUED_STREAM,), event_types=("fines.IssueTrafficFine",))
_ROOT = Path(__file__).resolve().parent.parent


class RunFailed(RuntimeError):
    """A scale-out run did not start, timed out, or did not issue every fine exactly once."""


@contextlib.contextmanager
def _store(kind: str, pg_uri: str | None) -> Iterator[tuple[EventStore, str]]:
    """A fresh store of ``kind`` and the URI the service processes open it by."""
    if kind == "esdb":
        with _esdb_store() as opened:
            yield opened
        return
    with fresh_store(kind, pg_uri) as opened:
        yield opened


@contextlib.contextmanager
def _esdb_store() -> Iterator[tuple[EventStore, str]]:
    """A fresh EventStoreDB test server process and a fenced store on it."""
    from benchmarks.end_to_end import esdb_test_server
    from decider.stores.esdb._batch import open_esdb_store
    from decider.stores.esdb.store import CLIENT

    with esdb_test_server() as uri:
        store = open_esdb_store(uri)
        try:
            if not isinstance(store, TransactionalStore):
                raise RunFailed(
                    f"--partitions auto on EventStoreDB needs kurrentdbclient ({CLIENT.package} "
                    "is installed): run with .venv-kurrentdb/bin/python"
                )
            yield store, uri
        finally:
            store.close()


class _Services:
    """k ``decider run --partitions auto`` processes, ended by pid (also on failure); each
    serves its metrics (where the ``metrics`` extra is installed) on a port of its own, and on
    PostgreSQL names its connections ``application_name`` (:attr:`backends`)."""

    def __init__(self, uri: str, count: int, log_dir: Path) -> None:
        self.application = f"decider-bench-{uuid.uuid4().hex[:8]}"
        """The ``application_name`` of the services' PostgreSQL connections."""
        self.uri = _named(uri, self.application)
        self.log_dir = log_dir
        self.processes: list[subprocess.Popen[bytes]] = []
        self.metrics_ports: list[int] = []
        self._readings = 0
        for number in range(count):
            self.start(number)

    def start(self, number: int) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "decider.processors.cli", "run", APP_SPEC]
        env = child_env()
        if THREADS:
            command[2:2] = ["benchmarks.thread_cpu"]
            env[thread_cpu.DIRECTORY] = str(self.log_dir)
        command += ["--store", self.uri, "--partitions", "auto", "--lease-ttl", str(LEASE_TTL)]
        command += ["--progress-interval", "0", "--log-level", "WARNING"]
        if METRICS:
            port = _free_port()
            command += ["--metrics-port", str(port)]
            self.metrics_ports.append(port)
        with (self.log_dir / f"service{number}.log").open("ab") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=_ROOT, env=env
            )
        self.processes.append(process)
        return process

    def threads(self) -> list[dict[str, float]]:
        """The CPU seconds of each process's threads by name so far (``--threads``: the services
        run under :mod:`benchmarks.thread_cpu`), or ``[]``."""
        if not THREADS:
            return []
        self._readings += 1
        for process in self.processes:
            process.send_signal(signal.SIGUSR1)
        found = []
        for process in self.processes:
            path = self.log_dir / f"{process.pid}-{self._readings - 1}.json"
            deadline = time.monotonic() + 30
            while not path.exists():
                if time.monotonic() > deadline:
                    return []
                time.sleep(0.01)
            found.append(json.loads(path.read_text()))
        return found

    def delivered(self) -> list[float] | str:
        """The events each process's subscriptions delivered to its processors so far
        (``decider_processor_delivered_total``, summed), or why they cannot be known: the
        metrics are not served, or a scrape failed (its error)."""
        if not METRICS:
            return "no metrics (the 'metrics' extra)"
        found = []
        for number, port in enumerate(self.metrics_ports):
            url = f"http://127.0.0.1:{port}/metrics"
            try:
                with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT) as response:
                    text = response.read().decode()
            except OSError as exc:
                return f"service {number}'s metrics scrape failed: {exc!r}"
            found.append(
                sum(
                    float(line.rsplit(" ", 1)[1])
                    for line in text.splitlines()
                    if line.startswith("decider_processor_delivered_total{")
                )
            )
        return found

    def cpu_seconds(self) -> list[float]:
        """The CPU seconds (user + system) each running process used so far (Linux), or
        ``[]`` where ``/proc`` cannot tell."""
        ticks = os.sysconf("SC_CLK_TCK")
        found = []
        for process in self.processes:
            try:
                stat = Path(f"/proc/{process.pid}/stat").read_text()
            except OSError:
                return []
            fields = stat.rsplit(")", 1)[1].split()
            found.append((int(fields[11]) + int(fields[12])) / ticks)
        return found

    def check_alive(self) -> None:
        for process in self.processes:
            code = process.poll()
            if code is not None and code != -signal.SIGKILL:  # the failover's victim: killed
                raise RunFailed(f"service {process.pid} exited with {code}")

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


METRICS = all(
    importlib.util.find_spec(name) is not None
    for name in ("prometheus_client", "opentelemetry.sdk", "opentelemetry.exporter.prometheus")
)
"""Whether the services can serve their metrics (the ``metrics`` extra): the events they read
are counted from them."""
SCRAPE_TIMEOUT = 60.0
"""Seconds one scrape of a service's metrics endpoint may take (its samplers read what the
app's log gained since the last scrape)."""
THREADS = False
"""Whether each run also splits the services' CPU by thread (``--threads``)."""
PUBLISHERS = 1
"""Publisher processes per run, each appending its share of the reports (``--publishers``)."""


def _named(uri: str, application: str) -> str:
    """A PostgreSQL URI whose connections carry ``application_name``; others as they are."""
    if not uri.startswith(("postgresql://", "postgres://")):
        return uri
    return f"{uri}{'&' if '?' in uri else '?'}application_name={application}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _proc_cpu(pid: int) -> float | None:
    """The CPU seconds (user + system) process ``pid`` used so far, or ``None`` where
    ``/proc`` cannot tell (not Linux, gone, or another machine's)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _backend_cpu(pg_uri: str | None, application: str) -> dict[int, float] | None:
    """The CPU seconds each PostgreSQL backend of the services' connections used so far (by
    ``application_name``, from ``/proc``: the server must run on this machine), or ``None``."""
    if pg_uri is None:
        return None
    import psycopg

    with psycopg.connect(pg_uri, autocommit=True, connect_timeout=10) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (application,)
        ).fetchall()
    found = {int(pid): _proc_cpu(int(pid)) for (pid,) in rows}
    if not found or any(cpu is None for cpu in found.values()):
        return None
    return {pid: cpu for pid, cpu in found.items() if cpu is not None}


def _count_after(store: EventStore, position: int | None) -> tuple[int, int | None]:
    """How many events the log holds after ``position``, and the last one's position."""
    count, last = 0, position
    while page := store.read_all(last, 5_000):
        count += len(page)
        last = page[-1].position
    return count, last


def _held(store: EventStore) -> dict[str, set[int]]:
    """Unexpired partition leases by owner."""
    assert isinstance(store, LeaseStore)
    names = {lease_name(app.name, p): p for p in range(app.partitions)}
    now = datetime.now(UTC)
    owners: dict[str, set[int]] = {}
    for lease in store.leases():
        if lease.partition in names and lease.owner is not None and lease.expires_at > now:
            owners.setdefault(lease.owner, set()).add(names[lease.partition])
    return owners


def _wait(predicate: Callable[[], bool], timeout: float, what: str, services: _Services) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        services.check_alive()
        if time.monotonic() > deadline:
            raise RunFailed(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


def _balanced(store: EventStore, count: int) -> bool:
    owners = _held(store)
    share = math.ceil(app.partitions / count)
    return (
        len(owners) == count
        and sum(len(p) for p in owners.values()) == app.partitions
        and all(len(p) <= share for p in owners.values())
    )


def _publishers(uri: str, n: int) -> list[subprocess.Popen[bytes]]:
    """:data:`PUBLISHERS` publisher processes, each with its share of the N reports."""
    found = []
    for number in range(PUBLISHERS):
        first, last = n * number // PUBLISHERS, n * (number + 1) // PUBLISHERS
        command = [sys.executable, "-m", "benchmarks.scaleout", "--uri", uri]
        command += ["--n", str(last - first), "--first", str(first), "--chunk", str(CHUNK)]
        found.append(subprocess.Popen(command, cwd=_ROOT, env=child_env(), stdout=subprocess.PIPE))
    return found


def _published(publishers: list[subprocess.Popen[bytes]], started: float) -> dict[str, Any]:
    """When the publishers (ended) began and finished appending, from their ``published``
    lines: seconds after ``started`` (``time.monotonic``, one clock for every process on the
    machine), the first begin and the last end, so a run can show whether the services waited
    for their inputs; ``{}`` if a publisher did not say."""
    spans = []
    for publisher in publishers:
        assert publisher.stdout is not None
        for line in publisher.stdout.read().decode().splitlines():
            if line.startswith("published "):
                spans.append([float(t) - started for t in line.split()[1:3]])
    if len(spans) != len(publishers):
        return {}
    return {
        "publishers": len(spans),
        "publisher_began": min(began for began, _ in spans),
        "publisher_ended": max(ended for _, ended in spans),
    }


def publish(uri: str, n: int, first: int = 0) -> None:
    """A publisher process: N speeding reports to ``police-reports`` (numbered from
    ``first``), in chunks; at the end it prints ``published BEGAN ENDED``, the
    ``time.monotonic()`` before its first append and after its last."""
    from decider.processors.cli.loading import open_uri

    store = open_uri(uri)
    began = time.monotonic()
    try:
        for chunk in range(first, first + n, CHUNK):
            reports = [
                PoliceReportPublished(
                    police_report_id=f"pr_{index:06d}",
                    offense=SpeedingViolation(maximum_speed="50 km/h", measured_speed="72 km/h"),
                )
                for index in range(chunk, min(first + n, chunk + CHUNK))
            ]
            app.publish_many(store, reports, REPORTS_STREAM)
        print(f"published {began} {time.monotonic()}", flush=True)
    finally:
        store.close()


def _checkpoints(store: EventStore, partitions: set[int]) -> dict[int, int | None]:
    assert isinstance(store, CheckpointStore)
    processor = workflow_processor_name(app.name, workflow.name)
    return {p: store.load_checkpoint(checkpoint_name(processor, p)) for p in partitions}


def run_once(
    kind: str, count: int, n: int, timeout: float, pg_uri: str | None, *, kill_one: bool = False
) -> dict[str, Any]:
    """One run with ``count`` service processes; with ``kill_one``, the failover run."""
    with (
        _store(kind, pg_uri) as (store, uri),
        tempfile.TemporaryDirectory(prefix="decider-scaleout-logs-") as logs,
    ):
        services = _Services(uri, count, Path(logs))
        publishers: list[subprocess.Popen[bytes]] = []
        try:
            _wait(lambda: _balanced(store, count), 60, "the partitions to split", services)
            subscription = store.subscribe(None, _ISSUED)
            _, log_start = _count_after(store, None)
            delivered_before = services.delivered()
            server_before = _backend_cpu(
                pg_uri if kind == "postgres" else None, services.application
            )
            cpu_before = services.cpu_seconds()
            threads_before = services.threads()
            start, started = time.perf_counter(), time.monotonic()
            publishers = _publishers(uri, n)
            issued, failover, deadline = 0, None, start + timeout
            try:
                while issued < n and time.perf_counter() < deadline:
                    item = subscription.poll(0.2)
                    services.check_alive()
                    if item is None or isinstance(item, CaughtUp):
                        continue
                    issued += 1
                    if kill_one and failover is None and issued >= n // 3:
                        failover = _failover(store, services, deadline)
            finally:
                subscription.stop()
            seconds = time.perf_counter() - start
            cpu_after = services.cpu_seconds() if not kill_one else []
            threads_after = services.threads() if not kill_one else []
            server_after = (
                None
                if kill_one or server_before is None
                else _backend_cpu(pg_uri, services.application)
            )
            delivered_after = services.delivered() if not kill_one else "the failover run"
            for publisher in publishers:
                if publisher.wait(timeout=60) != 0:
                    raise RunFailed(f"a publisher exited with {publisher.returncode}")
            published = _published(publishers, started)
            if published:
                seconds -= published["publisher_began"]
            stored = len(store.read_stream(ISSUED_STREAM))
            written, _ = _count_after(store, log_start)
        finally:
            for publisher in publishers:
                if publisher.poll() is None:
                    publisher.kill()
                    publisher.wait()
            services.stop()
    if issued < n or stored != n:
        raise RunFailed(f"{kind} k={count}: {issued} fines seen, {stored} stored, of {n}")
    return {
        "store": kind,
        "processes": count,
        "n": n,
        "seconds": seconds,
        "workflows_per_s": n / seconds,
        "issued_stored": stored,
        "failover": failover,
        **published,
        **_cpu(cpu_before, cpu_after, n),
        **_threads(threads_before, threads_after, n),
        **_server_cpu(server_before, server_after, n),
        **_reads(delivered_before, delivered_after, written),
    }


def _cpu(before: list[float], after: list[float], n: int) -> dict[str, Any]:
    """The services' CPU during a run, per workflow: in all and of the busiest process."""
    if not before or len(before) != len(after):
        return {
            "cpu_ms_per_workflow": math.nan,
            "busiest_cpu_ms_per_workflow": math.nan,
            "busiest_share": math.nan,
        }
    used = [end - begin for begin, end in zip(before, after, strict=True)]
    return {
        "process_cpu_seconds": used,
        "cpu_ms_per_workflow": 1000 * sum(used) / n,
        "busiest_cpu_ms_per_workflow": 1000 * max(used) / n,
        "busiest_share": max(used) / sum(used) if sum(used) > 0 else math.nan,
    }


def _threads(
    before: list[dict[str, float]], after: list[dict[str, float]], n: int
) -> dict[str, Any]:
    """The services' CPU during a run by thread name, summed over the processes, in
    microseconds per workflow (``--threads``), the largest first."""
    if not before or len(before) != len(after):
        return {}
    split: dict[str, float] = {}
    for was, now in zip(before, after, strict=True):
        for name, seconds in now.items():
            split[name] = split.get(name, 0.0) + seconds - was.get(name, 0.0)
    ordered = sorted(split.items(), key=lambda item: -item[1])
    return {"threads_us_per_workflow": {name: 1e6 * s / n for name, s in ordered if s > 0}}


def _server_cpu(
    before: dict[int, float] | None, after: dict[int, float] | None, n: int
) -> dict[str, Any]:
    """The CPU the database server's backends of the services' connections used during a run,
    per workflow (a backend opened during the run counts from 0; one closed during it is not
    counted: the services keep theirs)."""
    if before is None or after is None:
        return {"server_cpu_ms_per_workflow": math.nan}
    used = sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())
    return {
        "server_backends": [
            len(before),
            len(after),
            len(set(after) - set(before)),
            len(set(before) - set(after)),
        ],
        "server_cpu_ms_per_workflow": 1000 * used / n,
    }


def _reads(before: list[float] | str, after: list[float] | str, written: int) -> dict[str, Any]:
    """The events the services' subscriptions delivered during a run, per event written (with
    ``reads_unknown``, why not, where that cannot be known)."""
    if isinstance(before, str) or isinstance(after, str):
        why = before if isinstance(before, str) else after
    elif len(before) != len(after):
        why = "a service's metrics went missing during the run"
    elif not written:
        why = "the run wrote no events"
    else:
        read = [end - begin for begin, end in zip(before, after, strict=True)]
        return {
            "events_written": written,
            "process_events_read": read,
            "events_read_per_written": sum(read) / written,
        }
    return {"events_read_per_written": math.nan, "reads_unknown": why}


def _failover(store: EventStore, services: _Services, deadline: float) -> dict[str, Any]:
    """SIGKILL the first service; the seconds until each of its partitions progressed again:
    its checkpoint moved on, or (if it had nothing left to do) another process holds it with
    its checkpoint at or past the partition's last input (the log's last input on a store that
    keeps no partition keys)."""
    victim = services.processes[0]
    owner = next(o for o in _held(store) if o.split(":")[1] == str(victim.pid))
    partitions = _held(store)[owner]
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    killed = time.perf_counter()
    before = _checkpoints(store, partitions)
    inputs = Filter(event_types=tuple(app.workflows[workflow.name].inputs))
    logged = store.read_all(None, 10**7, inputs)
    head = logged[-1].position if logged else -1
    # Each partition's own last input: a process reads only its partitions' events, so the
    # checkpoint of a partition with nothing after it moves on only with the batches of the
    # other partitions its new owner holds (never past its owner's last event read).
    last: dict[int, int] = {}
    for event in logged:
        key = event.partition_key
        if key is None:  # a store that keeps no keys: the log's end for every partition
            last = {}
            break
        last[key % app.partitions] = event.position
    moved: dict[int, float] = {}
    while len(moved) < len(partitions) and time.perf_counter() < deadline:
        now = _checkpoints(store, partitions)
        held = {p for o, ps in _held(store).items() if o != owner for p in ps}
        for p in partitions - set(moved):
            now_p, before_p = now[p], before[p]
            mark = -1 if now_p is None else now_p
            was = -1 if before_p is None else before_p
            end = last.get(p, -1) if last else head
            if mark > was or (p in held and mark >= end):
                moved[p] = time.perf_counter() - killed
        time.sleep(0.05)
    if len(moved) < len(partitions):
        raise RunFailed(
            f"the killed process's partitions did not progress again in time: of "
            f"{sorted(partitions)}, {sorted(moved)} did; checkpoints {before} at the kill, "
            f"{_checkpoints(store, partitions)} now; inputs end at {head}; held {_held(store)}"
        )
    return {
        "partitions": sorted(partitions),
        "seconds_until_all_progressed": max(moved.values()),
        "seconds_until_first_progressed": min(moved.values()),
    }


def measure(
    sizes: dict[str, Sequence[int]],
    n: int,
    failover_n: int,
    timeout: float,
    pg_uri: str | None,
    progress: Callable[[str], None] | None = None,
    rounds: int = 1,
) -> list[Result]:
    """Figure 9: workflows/s and efficiency per store and process count; failover time.

    ``sizes`` maps a store kind to the process counts to run (the first is the baseline; none:
    the failover run only). With ``rounds`` > 1 every count runs once per round, in turns
    (ascending, then descending), and each figure is the median over the rounds of what it is
    in one round: a ratio against k = 1 is taken within a round, of runs minutes apart.
    """
    say = progress or (lambda _: None)
    results: list[Result] = []
    cores = os.cpu_count() or 1
    for kind, counts in sizes.items():
        rounds_run: list[dict[int, dict[str, Any]]] = []
        failed: dict[int, str] = {}
        for number in range(rounds if counts else 0):
            # Alternate the order, so that a drift of the machine during the rounds (another
            # load starting, the page cache warming) does not always favour the same k.
            order = counts if number % 2 == 0 else tuple(reversed(counts))
            runs: dict[int, dict[str, Any]] = {}
            for count in order:
                try:
                    runs[count] = run_once(kind, count, n, timeout, pg_uri)
                except RunFailed as exc:
                    say(f"  {kind} k={count}: FAILED {exc}")
                    failed.setdefault(count, str(exc))
            if counts[0] in runs:
                base = runs[counts[0]]
                for count in counts:
                    if count in runs:
                        run = runs[count]
                        run["projected_efficiency"] = base["busiest_cpu_ms_per_workflow"] / (
                            count * run["busiest_cpu_ms_per_workflow"]
                        )
                        _say_run(say, kind, count, run, number, rounds)
            rounds_run.append(runs)
        for count in counts:
            key = f"scaleout_{kind}_{count}"
            title = f"9. {kind}: {count} process{'es' if count > 1 else ''}, N={n:,}"
            paired = [r for r in rounds_run if count in r and counts[0] in r]
            if not paired:
                why = failed.get(count) or failed.get(counts[0]) or "no run"
                results.append(Pending(key, title, f"failed: {why}"))
                continue
            rate = statistics.median(r[count]["workflows_per_s"] for r in paired)
            base_rate = statistics.median(r[counts[0]]["workflows_per_s"] for r in paired)
            projected = statistics.median(r[count]["projected_efficiency"] for r in paired)
            cpu = statistics.median(r[count]["cpu_ms_per_workflow"] for r in paired)
            busiest = statistics.median(r[count]["busiest_cpu_ms_per_workflow"] for r in paired)
            results.append(
                Figure(
                    key=key,
                    title=title,
                    unit="workflows/s",
                    rate=rate,
                    baseline=f"{counts[0]} process(es), same store, same run",
                    baseline_rate=base_rate,
                    ratio=rate / (count * base_rate),
                    ratio_is="scaling efficiency: rate(k) / (k x rate(1))"
                    + (f", medians of {len(paired)} rounds" if len(paired) > 1 else ""),
                    target=Target(">=", 0.7) if kind == "postgres" and count == 4 else None,
                    note=(
                        f"publisher concurrent; on {cores} cores; CPU ms/workflow {cpu:.2f}"
                        f" (busiest process {busiest:.2f}, projected efficiency"
                        f" {projected:.2f})"
                        + (
                            "; rates by round "
                            + ", ".join(f"{r[count]['workflows_per_s']:.0f}" for r in paired)
                            if len(paired) > 1
                            else f"; {paired[0][count]['seconds']:.2f}s"
                        )
                    ),
                    extra={"runs": [r[count] for r in paired]}
                    if len(paired) > 1
                    else paired[0][count],
                )
            )
        if counts:
            results += cost_figures(kind, counts, rounds_run, n, say)
        if failover_n <= 0:  # --failover-n 0: no failover run
            continue
        key = f"scaleout_{kind}_failover"
        title = f"9. {kind}: failover, 3 processes, one SIGKILLed, N={failover_n:,}"
        try:
            run = run_once(kind, 3, failover_n, timeout, pg_uri, kill_one=True)
        except RunFailed as exc:
            say(f"  {kind} failover: FAILED {exc}")
            results.append(Pending(key, title, f"failed: {exc}"))
            continue
        seconds = run["failover"]["seconds_until_all_progressed"]
        say(f"  {kind} failover: {seconds:.2f}s")
        results.append(
            Figure(
                key=key,
                title=title,
                unit="s",
                rate=seconds,
                baseline="lease ttl + 1 s (the target)",
                baseline_rate=LEASE_TTL + 1,
                ratio=seconds / (LEASE_TTL + 1),
                ratio_is="seconds until its partitions progressed / (lease ttl + 1 s)",
                target=Target("<=", 1.0),
                note=f"0 lost, 0 duplicated: {run['issued_stored']} fines of {failover_n}",
                extra=run,
            )
        )
    return results


def _say_run(
    say: Callable[[str], None],
    kind: str,
    count: int,
    run: dict[str, Any],
    number: int,
    rounds: int,
) -> None:
    """Print one run's line (round ``number`` of ``rounds``)."""
    say(
        f"  {kind} k={count}"
        + (f" (round {number + 1} of {rounds})" if rounds > 1 else "")
        + f": {run['seconds']:.2f}s, {run['workflows_per_s']:.0f}/s; "
        f"CPU ms/workflow {run['cpu_ms_per_workflow']:.2f}, busiest process "
        f"{run['busiest_cpu_ms_per_workflow']:.2f}, projected efficiency "
        f"{run['projected_efficiency']:.2f}"
        + (
            f"; {'the publisher' if run['publishers'] == 1 else 'the publishers'}"
            f" started in {run['publisher_began']:.2f}s, then appended"
            f" for {run['publisher_ended'] - run['publisher_began']:.2f}s"
            if "publisher_began" in run
            else ""
        )
    )
    if "threads_us_per_workflow" in run:
        split = run["threads_us_per_workflow"].items()
        say(f"    by thread, us/workflow: {', '.join(f'{k} {v:.0f}' for k, v in split)}")


TARGET_PROCESSES = 4
"""The process count the cost figures' targets are set for (a smaller largest count: no
target)."""


def total_cpu(run: dict[str, Any]) -> float:
    """A run's CPU milliseconds per workflow: the services', plus PostgreSQL's backends of their
    connections (``nan`` where those cannot be read); SQLite has no server, and the EventStoreDB
    test server's CPU is not counted."""
    own: float = run["cpu_ms_per_workflow"]
    if run["store"] != "postgres":
        return own
    server: float = run.get("server_cpu_ms_per_workflow", math.nan)
    return own + server


def cost_figures(
    kind: str,
    counts: Sequence[int],
    rounds: Sequence[dict[int, dict[str, Any]]],
    n: int,
    say: Callable[[str], None],
) -> list[Result]:
    """What the group's work costs as it grows, at the largest process count against the first
    (one process): the total CPU per workflow, the events read per event written, and the
    busiest process's share of the services' CPU (targets at :data:`TARGET_PROCESSES`). Each is
    taken within a round (its runs of the two counts) and the figure is the median over the
    rounds that ran both."""
    k, first = counts[-1], counts[0]
    at = f"{k} processes vs {first}, N={n:,}"
    keys = (f"scaleout_{kind}_cpu", f"scaleout_{kind}_reads", f"scaleout_{kind}_busiest")
    titles = (
        f"9. {kind}: total CPU per workflow, {at}",
        f"9. {kind}: events read per event written, {at}",
        f"9. {kind}: busiest process's share of the work, {k} processes, N={n:,}",
    )
    paired = [runs for runs in rounds if k in runs and first in runs]
    if not paired:
        return [
            Pending(key, title, "a run failed") for key, title in zip(keys, titles, strict=True)
        ]
    targeted = k == TARGET_PROCESSES
    server = "" if kind == "sqlite" else " + the server's backends"
    if kind == "esdb":
        server = " (the test server's CPU not counted)"
    notes = []
    for runs in rounds:
        each = ", ".join(
            f"k={c} {total_cpu(r):.2f} ms ({r['cpu_ms_per_workflow']:.2f} services), "
            + (
                f"{r['events_read_per_written']:.2f} read/written"
                if "reads_unknown" not in r
                else "read/written unknown"
            )
            + f", busiest {r['busiest_share']:.0%}"
            + (
                f", backends {r['server_backends'][2]} opened, {r['server_backends'][3]} closed"
                if "server_backends" in r
                else ""
            )
            for c, r in sorted(runs.items())
        )
        say(f"  {kind} cost: {each}")
        notes.append(each)
    rounds_note = f" (medians of {len(paired)} rounds)" if len(paired) > 1 else ""
    results: list[Result] = []
    cpu_ratios = [total_cpu(r[k]) / total_cpu(r[first]) for r in paired]
    if any(math.isnan(ratio) for ratio in cpu_ratios):
        results.append(Pending(keys[0], titles[0], "CPU not measurable here (/proc)"))
    else:
        results.append(
            Figure(
                key=keys[0],
                title=titles[0],
                unit="ms/workflow",
                rate=statistics.median(total_cpu(r[k]) for r in paired),
                baseline=f"{first} process, same store, same run",
                baseline_rate=statistics.median(total_cpu(r[first]) for r in paired),
                ratio=statistics.median(cpu_ratios),
                ratio_is=f"CPU per workflow (services{server}) at k / at 1 (lower is better)"
                + (
                    f"; the median of the rounds' ratios"
                    f" {', '.join(f'{ratio:.2f}' for ratio in cpu_ratios)}"
                    if len(paired) > 1
                    else ""
                ),
                target=Target("<=", 1.15) if targeted else None,
                note="; ".join(notes),
                extra={
                    "per_count": {
                        c: statistics.median(total_cpu(r[c]) for r in rounds if c in r)
                        for c in counts
                        if any(c in r for r in rounds)
                    },
                    "ratios": cpu_ratios,
                },
            )
        )
    read_ratios = [
        r[k]["events_read_per_written"] / r[first]["events_read_per_written"] for r in paired
    ]
    if any(math.isnan(ratio) for ratio in read_ratios):
        unknown = [r[c].get("reads_unknown") for r in paired for c in (k, first)]
        why = next((w for w in unknown if w), "not counted")
        results.append(Pending(keys[1], titles[1], why))
    else:
        results.append(
            Figure(
                key=keys[1],
                title=titles[1],
                unit="events read / written",
                rate=statistics.median(r[k]["events_read_per_written"] for r in paired),
                baseline=f"{first} process, same store, same run",
                baseline_rate=statistics.median(
                    r[first]["events_read_per_written"] for r in paired
                ),
                ratio=statistics.median(read_ratios),
                ratio_is="events all processes read per event written, at k / at 1" + rounds_note,
                target=Target("<=", 1.2) if targeted else None,
                note="; ".join(notes),
                extra={"ratios": read_ratios},
            )
        )
    shares = [r[k]["busiest_share"] for r in paired]
    if any(math.isnan(share) for share in shares):
        results.append(Pending(keys[2], titles[2], "CPU not measurable here (/proc)"))
    else:
        share = statistics.median(shares)
        results.append(
            Figure(
                key=keys[2],
                title=titles[2],
                unit="share",
                rate=share,
                baseline=f"an even share, 1/{k}",
                baseline_rate=1 / k,
                ratio=share,
                ratio_is="the busiest process's CPU / all the services' CPU" + rounds_note,
                target=Target("<=", 0.28) if targeted else None,
                note="; ".join(
                    f"per process: {', '.join(f'{c:.2f}s' for c in r[k]['process_cpu_seconds'])}"
                    for r in paired
                ),
                extra={"shares": shares},
            )
        )
    return results


def measure_growth(
    kinds: Sequence[str],
    small_n: int,
    big_n: int,
    timeout: float,
    pg_uri: str | None,
    progress: Callable[[str], None] | None = None,
) -> list[Result]:
    """Growth: one process's rate at ``big_n`` against its rate at ``small_n``, per store."""
    say = progress or (lambda _: None)
    results: list[Result] = []
    for kind in kinds:
        key = f"scaleout_{kind}_growth"
        title = f"9. {kind}: 1 process, rate at N={big_n:,} vs N={small_n:,}"
        try:
            small = run_once(kind, 1, small_n, timeout, pg_uri)
            big = run_once(kind, 1, big_n, timeout, pg_uri)
        except RunFailed as exc:
            say(f"  {kind} growth: FAILED {exc}")
            results.append(Pending(key, title, f"failed: {exc}"))
            continue
        cpu = (small["cpu_ms_per_workflow"], big["cpu_ms_per_workflow"])
        cpu_note = (
            ""
            if math.isnan(cpu[0]) or math.isnan(cpu[1])
            else f"; service CPU {cpu[0]:.2f} vs {cpu[1]:.2f} ms/workflow"
        )
        say(
            f"  {kind} growth: {small['workflows_per_s']:.0f}/s vs"
            f" {big['workflows_per_s']:.0f}/s{cpu_note}"
        )
        results.append(
            Figure(
                key=key,
                title=title,
                unit="workflows/s",
                rate=big["workflows_per_s"],
                baseline=f"N={small_n:,}, same store, same run",
                baseline_rate=small["workflows_per_s"],
                ratio=big["workflows_per_s"] / small["workflows_per_s"],
                ratio_is=f"rate at N={big_n:,} / rate at N={small_n:,} (higher is better)",
                target=Target(">=", 0.9),
                note=f"publisher concurrent{cpu_note}",
                extra={"small": small, "big": big},
            )
        )
    return results


def measure_independent(
    kind: str, count: int, n: int, timeout: float, pg_uri: str | None
) -> dict[str, Any]:
    """The control for the CPU figure: ``count`` *independent* one-process groups at once (a
    store, a service and a publisher each, ``n // count`` workflows each) against one group of
    one process doing all ``n``. What is left of k processes' extra CPU per workflow once the
    group's own work (one store shared, leases, wake-ups across processes) is taken away: the
    processes sharing the machine's cores, and, with ``--chunk`` at the group's chunk divided
    by ``count`` (each publisher's appends then as small as a group's process's share of one),
    the smaller batches."""
    one = run_once(kind, 1, n, timeout, pg_uri)
    runs: list[dict[str, Any]] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            runs.append(run_once(kind, 1, n // count, timeout, pg_uri))
        except BaseException as exc:  # reported below, on the caller's thread
            failed.append(exc)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failed:
        raise RunFailed(f"an independent group failed: {failed[0]}")
    apart = sum(total_cpu(r) * r["n"] for r in runs) / sum(r["n"] for r in runs)
    return {"one": total_cpu(one), "independent": apart, "ratio": apart / total_cpu(one)}


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scaleout",
        description="Figure 9 at a size of your choice (or, with --uri, the publisher process).",
    )
    parser.add_argument("--uri", help="publish --n reports to this store and exit")
    parser.add_argument("--n", type=int, default=10_000, help="workflows per run")
    parser.add_argument(
        "--failover-n", type=int, default=1_000, help="workflows, failover run (0: none)"
    )
    parser.add_argument("--processes", default="1,2,4", help="process counts (first: baseline)")
    parser.add_argument("--stores", default="sqlite,postgres", help=f"of {','.join(STORES)}")
    parser.add_argument(
        "--failover-only", action="store_true", help="only the failover run (--failover-n)"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument(
        "--growth", default="", metavar="SMALL,BIG", help="only the growth figure at these sizes"
    )
    parser.add_argument(
        "--threads", action="store_true", help="also split the services' CPU by thread"
    )
    parser.add_argument(
        "--publishers", type=int, default=1, help="publisher processes, each its share of N"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every count this many times, in turns; each figure the rounds' median",
    )
    parser.add_argument(
        "--chunk",
        type=int,
        default=100,
        help="reports per publisher append (default 100)",
    )
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument(
        "--independent",
        type=int,
        default=0,
        metavar="K",
        help="only the control: K independent one-process groups against one",
    )
    args = parser.parse_args(argv)
    global THREADS, PUBLISHERS, CHUNK  # one setting for the whole run, as METRICS
    THREADS, PUBLISHERS, CHUNK = args.threads, max(1, args.publishers), max(1, args.chunk)
    if args.uri is not None:
        publish(args.uri, args.n, args.first)
        return 0
    counts = () if args.failover_only else tuple(int(c) for c in args.processes.split(","))
    kinds = [k for k in args.stores.split(",") if k]
    pg_uri = pg.uri() if "postgres" in kinds else None
    if args.independent:
        for kind in kinds:
            found = measure_independent(kind, args.independent, args.n, args.timeout, pg_uri)
            print(
                f"  {kind}: one process {found['one']:.3f} ms/workflow, {args.independent}"
                f" independent groups {found['independent']:.3f} ({found['ratio']:.2f}x)"
            )
        return 0
    if args.growth:
        small_n, big_n = (int(n) for n in args.growth.split(","))
        growth = measure_growth(kinds, small_n, big_n, args.timeout, pg_uri, print)
        print(format_table(growth))
        return 0
    results = measure(
        dict.fromkeys(kinds, counts),
        args.n,
        args.failover_n,
        args.timeout,
        pg_uri,
        print,
        rounds=max(1, args.rounds),
    )
    print(format_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
