"""Figure 6: the command pool. Traffic-fine workflows on SQLite whose handlers do "I/O".

- **6a I/O-bound throughput**: both handlers sleep 20 ms (``time.sleep``) or await
  ``asyncio.sleep(0.02)`` (``async def``); pool sizes 1, 4, 16, 64. Commands carried out per
  second, from service start to the last fine issued, against the ideal ``pool size / 0.02 s``.
  Target >= 0.7x until the CPU limit (where the pool stops being the bottleneck: the service's
  CPU seconds approach the run's seconds times the cores it can use).
- **6b head-of-line**: pool 16, 20 ms sync handlers; the system-number handler fails always
  for every second workflow (parked after 2 attempts, 0.2 s apart). The time until every other
  (healthy) workflow's fine is issued, against the same run with no failures. Target <= 1.2x.
- **6c crash amplification**: a ``decider``-style service process with 20 ms sync handlers
  (pool 1, the old throughput, so the run spans several kills) is SIGKILLed every 3 s and
  started again until every fine is issued. Handler calls (counted in an append-only file)
  per command committed. Before the pool, with a kill every 3 s, no result was ever committed
  (issue 11: 583-665 calls for 0 results).
- **6e the pool alone**: the same 20 ms sync calls through :class:`CommandPool` with no store,
  workflow or commit (pool 16 and 64): where the pool itself stops scaling, against the ideal.
- **6d instant handlers, old and new**: figure 5's SQLite run (instant handlers) with the
  code before the pool and with this tree, one after the other
  (:mod:`benchmarks.pool_instant`). Target >= 0.9x (no slower, within noise).

Every run is a fresh Python process (:func:`run_child`), so runs share no GIL and no cache.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.end_to_end import RunFailed
from benchmarks.harness import Figure, Pending, Result, Target
from benchmarks.pool_instant import instant
from decider.processors import App, RetryPolicy, Service
from decider.processors.app.definition import HandlerRegistration
from decider.processors.commands.pool import CommandPool, Job
from decider.processors.engine.clock import SystemClock
from decider.stores import CaughtUp, Filter
from decider.stores.sqlite import SqliteEventStore
from samples.traffic_fine import app as sample
from samples.traffic_fine.messages import (
    GenerateTrafficFineManualIdentificationCode,
    GenerateTrafficFineSystemNumber,
    IssueTrafficFine,
    PoliceReportPublished,
    SpeedingViolation,
)
from samples.traffic_fine.workflow import workflow

DELAY = 0.02
"""What one "I/O-bound" handler call takes."""

POOLS = (1, 4, 16, 64)
"""The pool sizes of figure 6a."""

_ROOT = Path(__file__).resolve().parent.parent
_ISSUED = Filter(stream_prefixes=(sample.ISSUED_STREAM,))


def report_id(index: int) -> str:
    """The police report id of workflow ``index``."""
    return f"pr_{index:06d}"


def _unhealthy(police_report_id: str) -> bool:
    return int(police_report_id.removeprefix("pr_")) % 2 == 1


def make_app(kind: str, pool: int, fail: bool, calls_file: Path | None = None) -> App:
    """The traffic-fine app with handlers that take :data:`DELAY` (``kind``: ``"sync"``,
    ``"async"``, or ``"instant"`` for the sample's own); with ``fail``, the system-number
    handler fails for every odd-numbered report. Each call appends a line to ``calls_file``."""
    app = App("bench-pool", pool_size=pool, retry=RetryPolicy(max_attempts=2, initial_delay=0.2))
    inputs = sample.make_app().workflows[workflow.name].inputs.values()
    app.workflow(workflow, inputs={route.cls: route.route for route in inputs})
    calls = None if calls_file is None else os.open(calls_file, os.O_WRONLY | os.O_APPEND)

    def before(command: Any, command_id: str) -> None:
        if calls is not None:
            os.write(calls, f"{command_id}\n".encode())
        number = isinstance(command, GenerateTrafficFineSystemNumber)
        if fail and number and _unhealthy(command.police_report_id):
            raise RuntimeError("the number service refuses this report")

    def wrap(name: str, func: Callable[[Any, str], list[object]]) -> Callable[..., Any]:
        if kind == "async":

            async def handle_async(command: Any, command_id: str) -> list[object]:
                await asyncio.sleep(DELAY)
                before(command, command_id)
                return func(command, command_id)

            handle_async.__name__ = name
            return handle_async

        def handle(command: Any, command_id: str) -> list[object]:
            if kind == "sync":
                time.sleep(DELAY)
            before(command, command_id)
            return func(command, command_id)

        handle.__name__ = name
        return handle

    app.add_handler(GenerateTrafficFineSystemNumber, wrap("number", sample.generate_system_number))
    app.add_handler(
        GenerateTrafficFineManualIdentificationCode,
        wrap("code", sample.generate_manual_identification_code),
    )
    app.route(IssueTrafficFine, stream=sample.ISSUED_STREAM)
    return app


def publish(app: App, store: SqliteEventStore, n: int) -> None:
    """Publish ``n`` speeding reports, in one append."""
    reports = [
        PoliceReportPublished(
            police_report_id=report_id(i),
            offense=SpeedingViolation(maximum_speed="50 km/h", measured_speed="72 km/h"),
        )
        for i in range(n)
    ]
    app.publish_many(store, reports, sample.REPORTS_STREAM)


def _issued_by(
    store: SqliteEventStore, n: int, deadline: float, start: float, fail: bool
) -> dict[str, Any]:
    """Wait until the fines are issued: every one, or (``fail``) the healthy ones; when."""
    wanted = {report_id(i) for i in range(n)}
    subscription = store.subscribe(None, _ISSUED)
    seen: set[str] = set()
    healthy_at = all_at = None
    healthy = {r for r in wanted if not _unhealthy(r)}
    try:
        while time.perf_counter() < deadline and all_at is None:
            item = subscription.poll(max(0.0, deadline - time.perf_counter()))
            if item is None or isinstance(item, CaughtUp):
                continue
            seen.add(json.loads(item.data)["police_report_id"])
            if healthy_at is None and healthy <= seen:
                healthy_at = time.perf_counter() - start
                if fail:
                    break
            if seen == wanted:
                all_at = time.perf_counter() - start
    finally:
        subscription.stop()
    return {"issued": len(seen), "healthy_seconds": healthy_at, "seconds": all_at}


def run_throughput(
    kind: str, pool: int, n: int, fail: bool, directory: Path, timeout: float
) -> dict[str, Any]:
    """One run in this process: ``n`` workflows, their figures."""
    app = make_app(kind, pool, fail)
    store = SqliteEventStore(directory / "pool.db", synchronous="FULL")
    try:
        publish(app, store, n)
        service = Service(app, store)
        cpu = os.times()
        start = time.perf_counter()
        service.start()
        try:
            found = _issued_by(store, n, start + timeout, start, fail)
            if fail:
                # The unhealthy workflows never issue a fine: the run ends with the healthy.
                found["seconds"] = found["healthy_seconds"]
        finally:
            used = os.times()
            service.stop()
        errors = [repr(e) for e in service.errors]
    finally:
        store.close()
    seconds = found["seconds"]
    commands = 2 * n  # a clean run's; a failing run is timed to its healthy workflows
    return {
        "kind": kind,
        "pool": pool,
        "n": n,
        "fail": fail,
        **found,
        "commands": commands,
        "commands_per_s": None if seconds is None else commands / seconds,
        "cpu_seconds": (used.user + used.system) - (cpu.user + cpu.system),
        "errors": errors,
    }


def _crash_child(directory: Path, pool: int) -> None:
    """The service of figure 6c: runs until killed."""
    app = make_app("sync", pool, fail=False, calls_file=directory / "calls.log")
    store = SqliteEventStore(directory / "pool.db", synchronous="FULL")
    Service(app, store).run_forever()


def _python_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def run_child(arguments: Sequence[str], timeout: float) -> dict[str, Any]:
    """``python -m benchmarks.pool <arguments>`` in a fresh process; its JSON line."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.pool", *arguments],
        capture_output=True,
        text=True,
        cwd=_ROOT,
        env=_python_env(),
        timeout=timeout + 60,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RunFailed(f"pool run {arguments}: status {done.returncode}: {done.stderr[-1500:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def crash_amplification(n: int, pool: int, every: float, timeout: float) -> dict[str, Any]:
    """Figure 6c: kill the service every ``every`` seconds until all ``n`` fines are issued."""
    with tempfile.TemporaryDirectory(prefix="decider-pool-") as name:
        directory = Path(name)
        (directory / "calls.log").touch()
        store = SqliteEventStore(directory / "pool.db", synchronous="FULL")
        app = make_app("sync", pool, fail=False)
        publish(app, store, n)
        kills = 0
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                child = subprocess.Popen(
                    [sys.executable, "-m", "benchmarks.pool", "crash-child", "--dir", name],
                    cwd=_ROOT,
                    env=_python_env(),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                try:
                    finished = _wait_issued(store, n, every)
                finally:
                    child.send_signal(signal.SIGKILL)
                    child.wait(10)
                if finished:
                    break
                kills += 1
            issued = len(store.read_stream(sample.ISSUED_STREAM))
            results = sum(
                1
                for event in _all(store)
                if event.stream.startswith(("number-", "code-")) and event.revision == 0
            )
        finally:
            store.close()
        calls = len((directory / "calls.log").read_text().splitlines())
    return {
        "n": n,
        "pool": pool,
        "kills": kills,
        "issued": issued,
        "results": results,
        "calls": calls,
    }


def _all(store: SqliteEventStore) -> list[Any]:
    events: list[Any] = []
    after = None
    while page := store.read_all(after, 1000):
        events.extend(page)
        after = page[-1].position
    return events


def _wait_issued(store: SqliteEventStore, n: int, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``n`` issued fines; whether they are all there."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if len(store.read_stream(sample.ISSUED_STREAM)) >= n:
            return True
        time.sleep(0.05)  # another process writes: nothing to wait on but the clock
    return len(store.read_stream(sample.ISSUED_STREAM)) >= n


def _pool_alone(size: int, jobs: int) -> Result:
    """Figure 6e: ``jobs`` 20 ms sleeps through a pool of ``size``, nothing else."""

    def sleep(command: object, command_id: str) -> list[object]:
        time.sleep(DELAY)
        return []

    registration = HandlerRegistration("bench", "sleep", sleep, RetryPolicy())
    pool = CommandPool("bench", size, SystemClock(), logging.getLogger("bench"))
    pool.start(needs_loop=False)
    done = threading.Semaphore(0)
    start = time.perf_counter()
    try:
        for index in range(jobs):
            pool.submit(Job(f"k{index}", registration, None, str(index), lambda _: done.release()))
        for _ in range(jobs):
            done.acquire()
        seconds = time.perf_counter() - start
    finally:
        pool.close()
    ideal = size / DELAY
    return Figure(
        key=f"pool_alone_{size}",
        title=f"6e. the pool alone, 20 ms sync calls, pool {size}",
        unit="calls/s",
        rate=jobs / seconds,
        baseline="ideal = pool size / 0.02 s",
        baseline_rate=ideal,
        ratio=jobs / seconds / ideal,
        ratio_is="calls/s / ideal (higher is better)",
        target=Target(">=", 0.7),
        note=f"{jobs} calls in {seconds:.2f}s, no store",
    )


def measure(
    sizes: dict[int, int],
    hol_n: int,
    crash_n: int,
    instant_n: int,
    timeout: float,
    per_worker: int,
    progress: Callable[[str], None] | None = None,
) -> list[Result]:
    """Figures 6a-6d; ``sizes``: workflows per pool size for 6a."""
    say = progress or (lambda _: None)
    results: list[Result] = []
    for kind in ("sync", "async"):
        for pool, n in sizes.items():
            key = f"pool_{kind}_{pool}"
            title = f"6a. {kind} 20 ms handlers, pool {pool}"
            try:
                run = _throughput(kind, pool, n, fail=False, timeout=timeout)
            except RunFailed as exc:
                results.append(Pending(key, title, f"failed: {exc}"))
                continue
            ideal = pool / DELAY
            cores = os.cpu_count() or 1
            say(f"  {title}: {run['commands_per_s']:.0f} commands/s")
            results.append(
                Figure(
                    key=key,
                    title=title,
                    unit="commands/s",
                    rate=run["commands_per_s"],
                    baseline="ideal = pool size / 0.02 s",
                    baseline_rate=ideal,
                    ratio=run["commands_per_s"] / ideal,
                    ratio_is="commands/s / ideal (higher is better)",
                    target=Target(">=", 0.7),
                    note=(
                        f"N={n} workflows ({run['commands']} commands) in {run['seconds']:.2f}s;"
                        f" CPU {run['cpu_seconds']:.2f}s ="
                        f" {run['cpu_seconds'] / run['seconds']:.0%} of one core (the GIL's"
                        f" limit; {cores} cores)"
                    ),
                    extra=run,
                )
            )
    results.extend(_pool_alone(size, size * per_worker) for size in (16, 64))
    results.append(_head_of_line(hol_n, timeout, say))
    results.append(_crash(crash_n, say))
    results.append(instant(instant_n, timeout, say))
    return results


def _throughput(kind: str, pool: int, n: int, fail: bool, timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="decider-pool-") as name:
        arguments = ["throughput", "--kind", kind, "--pool", str(pool), "--n", str(n)]
        arguments += ["--dir", name, "--timeout", str(timeout)] + (["--fail"] if fail else [])
        run = run_child(arguments, timeout)
    if run["seconds"] is None or run["errors"]:
        raise RunFailed(f"{kind} pool {pool}: {run['issued']} of {n} issued, {run['errors'][:2]}")
    return run


def _head_of_line(n: int, timeout: float, say: Callable[[str], None]) -> Result:
    title = "6b. head-of-line: healthy workflows, half failing"
    try:
        clean = _throughput("sync", 16, n, fail=False, timeout=timeout)
        failing = _throughput("sync", 16, n, fail=True, timeout=timeout)
    except RunFailed as exc:
        return Pending("pool_head_of_line", title, f"failed: {exc}")
    ratio = failing["healthy_seconds"] / clean["healthy_seconds"]
    say(f"  {title}: {ratio:.2f}x")
    return Figure(
        key="pool_head_of_line",
        title=title,
        unit="s",
        rate=failing["healthy_seconds"],
        baseline="the same healthy workflows, no failures",
        baseline_rate=clean["healthy_seconds"],
        ratio=ratio,
        ratio_is="time to the last healthy fine / same without failures (lower is better)",
        target=Target("<=", 1.2),
        note=f"N={n}, pool 16, 20 ms sync handlers; failing: 2 attempts 0.2 s apart, parked",
        extra={"clean": clean, "failing": failing},
    )


def _crash(n: int, say: Callable[[str], None]) -> Result:
    title = "6c. crash amplification: SIGKILL every 3 s"
    run = crash_amplification(n, pool=1, every=3.0, timeout=300)
    if run["issued"] < n or run["results"] == 0:
        return Pending("pool_crash", title, f"did not finish: {run}")
    ratio = run["calls"] / run["results"]
    say(f"  {title}: {ratio:.2f} calls per committed command ({run['kills']} kills)")
    return Figure(
        key="pool_crash",
        title=title,
        unit="calls",
        rate=run["calls"],
        baseline="commands committed",
        baseline_rate=run["results"],
        ratio=ratio,
        ratio_is="handler calls per committed command (1.0 is no repeat; lower is better)",
        target=Target("<=", 1.1),
        note=f"N={n} workflows, pool 1, 20 ms sync handlers, {run['kills']} kills",
        extra=run,
    )


def _child_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pool")
    parser.add_argument("mode", choices=("throughput", "crash-child"))
    parser.add_argument("--kind", choices=("sync", "async", "instant"), default="sync")
    parser.add_argument("--pool", type=int, default=1)
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--fail", action="store_true")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    if args.mode == "crash-child":
        _crash_child(args.dir, args.pool)
        return 0
    result = run_throughput(args.kind, args.pool, args.n, args.fail, args.dir, args.timeout)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
