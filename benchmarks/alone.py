"""Figure 10: one workflow at a time, what a lightly loaded service and every caller see.

A lone workflow waits only for its commits: nothing on its path lingers for a batch to fill or
polls on a timer. This figure measures that path, on memory, SQLite and PostgreSQL, with the
service in the measuring process and (SQLite, PostgreSQL) in a separate ``decider run``
process; each store and place is measured in a fresh Python process of its own (as the
end-to-end runs are), so what earlier benchmarks left in the heap does not count:

- **workflow**: publish one police report of the traffic-fine sample, wait for its fine (the
  command processor's last effect, seen through a subscription of the publishing process),
  then the next; the median and p99 of each workflow's latency, and the rate they add up to.
  Each workflow is 3 inputs, 2 handler calls and about 7 commits.
- **request**: ``App.request`` of the quotes sample (``RequestQuote``, answered by a
  ``Reply``), one after the other; the median and p99 round trip.

The yardsticks are measured in the same run: ``R``, the raw single-row SQLite INSERT + COMMIT
rate with the same durability (figure 3a's baseline), and ``R_pg``, the raw psycopg
``BEGIN; INSERT; COMMIT`` rate (figure 3c's). Memory has no such floor: its figure is against
the issue's stated floor of 1,000 workflows/s, and the request's latencies against the stated
bounds (median <= 5 ms, p99 <= 20 ms on SQLite with the service in another process).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from benchmarks.fresh import ROOT, child_env, end, fresh_store
from benchmarks.harness import Figure, Result, Target
from decider.processors import App, Service
from decider.stores import CaughtUp, EventStore, Filter

_WORKFLOW_APP = "samples.traffic_fine.app:app"
_REQUEST_APP = "samples.quotes.app:app"
MEMORY_FLOOR = 1_000.0
"""Workflows/s one at a time on memory that the figure is held against."""
REQUEST_MEDIAN_MS = 5.0
REQUEST_P99_MS = 20.0

STORES = ("memory", "sqlite", "postgres")
PLACES = ("in process", "decider run")


@attrs.frozen
class Latencies:
    """Seconds of each of a run's operations, in order."""

    seconds: tuple[float, ...]

    @property
    def median_ms(self) -> float:
        """The median, in milliseconds."""
        return statistics.median(self.seconds) * 1000

    @property
    def p99_ms(self) -> float:
        """The 99th percentile (nearest rank), in milliseconds."""
        ordered = sorted(self.seconds)
        return ordered[max(0, round(0.99 * len(ordered)) - 1)] * 1000

    @property
    def rate(self) -> float:
        """Operations per second, one after the other."""
        return len(self.seconds) / sum(self.seconds)


@contextlib.contextmanager
def _store(kind: str, pg_uri: str | None) -> Iterator[tuple[EventStore, str | None]]:
    """A fresh store of ``kind`` and the URI another process opens it by (memory: none)."""
    if kind == "memory":
        from decider.stores.memory import MemoryEventStore

        yield MemoryEventStore(), None
        return
    with fresh_store(kind, pg_uri) as opened:
        yield opened


@contextlib.contextmanager
def _service(app: App, spec: str, store: EventStore, uri: str | None, place: str) -> Iterator[None]:
    """``app`` running on ``store``: a :class:`Service` here, or ``decider run`` in a process
    of its own (ended by pid)."""
    if place == "in process":
        service = Service(app, store)
        service.start()
        try:
            yield
        finally:
            service.stop()
        return
    assert uri is not None
    command = [sys.executable, "-m", "decider.processors.cli", "run", spec, "--store", uri]
    command += ["--progress-interval", "0", "--log-level", "WARNING"]
    process = subprocess.Popen(command, cwd=ROOT, env=child_env())
    try:
        yield
    finally:
        end(process)


def _workflows(store: EventStore, count: int, warm_up: int, timeout: float) -> Latencies:
    """Publish a report, wait for its fine, ``count`` times after ``warm_up`` untimed ones."""
    from samples.traffic_fine.app import ISSUED_STREAM, REPORTS_STREAM, make_app
    from samples.traffic_fine.messages import PoliceReportPublished, SpeedingViolation

    app = make_app()
    fines = store.subscribe(None, Filter(stream_prefixes=(ISSUED_STREAM,)))  # a fresh store
    seconds: list[float] = []
    try:
        for number in range(warm_up + count):
            report = PoliceReportPublished(
                police_report_id=f"alone-{number}",
                offense=SpeedingViolation(maximum_speed="50 km/h", measured_speed="80 km/h"),
            )
            started = time.perf_counter()
            app.publish(store, report, stream=REPORTS_STREAM)
            while True:
                item = fines.poll(timeout)
                if item is None:
                    raise TimeoutError(f"no fine for workflow {number} within {timeout}s")
                if not isinstance(item, CaughtUp):
                    break
            if number >= warm_up:
                seconds.append(time.perf_counter() - started)
    finally:
        fines.stop()
    return Latencies(tuple(seconds))


def _requests(store: EventStore, count: int, warm_up: int, timeout: float) -> Latencies:
    """``App.request`` a quote, ``count`` times after ``warm_up`` untimed ones."""
    from samples.quotes.app import REQUESTS_STREAM, make_app
    from samples.quotes.messages import QuoteLine, RequestQuote

    app = make_app()
    seconds: list[float] = []
    for number in range(warm_up + count):
        request = RequestQuote(
            quote_id=f"alone-{number}", customer_id="c", lines=(QuoteLine(sku="mug", quantity=2),)
        )
        started = time.perf_counter()
        app.request(store, request, timeout=timeout, stream=REQUESTS_STREAM)
        if number >= warm_up:
            seconds.append(time.perf_counter() - started)
    return Latencies(tuple(seconds))


def run_once(
    kind: str, place: str, count: int, timeout: float, pg_uri: str | None
) -> dict[str, Any]:
    """One store and place: the workflows' and the requests' latencies."""
    from samples.quotes.app import make_app as quotes_app
    from samples.traffic_fine.app import make_app as fines_app

    warm_up = max(3, count // 20)
    with _store(kind, pg_uri) as (store, uri):
        with _service(fines_app(), _WORKFLOW_APP, store, uri, place):
            workflows = _workflows(store, count, warm_up, timeout)
        with _service(quotes_app(), _REQUEST_APP, store, uri, place):
            requests = _requests(store, count, warm_up, timeout)
    return {
        "store": kind,
        "place": place,
        "count": count,
        "workflow_seconds": list(workflows.seconds),
        "request_seconds": list(requests.seconds),
        "workflow": workflows,
        "request": requests,
    }


def run_in_child(
    kind: str, place: str, count: int, timeout: float, pg_uri: str | None
) -> dict[str, Any]:
    """:func:`run_once` in a fresh Python process (``python -m benchmarks.alone``), as the
    end-to-end runs are: its heap, collector and caches are the run's own, not what the
    benchmarks before it left in this process."""
    command = [sys.executable, "-m", "benchmarks.alone", "--store", kind, "--place", place]
    command += ["--count", str(count), "--timeout", str(timeout)]
    if pg_uri is not None:
        command += ["--uri", pg_uri]
    done = subprocess.run(
        command,
        check=False,
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout * 4,
    )
    if done.returncode != 0:
        raise RuntimeError(f"one-at-a-time run {kind}/{place} failed: {done.stderr[-2000:]}")
    run: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    run["workflow"] = Latencies(tuple(run["workflow_seconds"]))
    run["request"] = Latencies(tuple(run["request_seconds"]))
    return run


def _child_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.alone")
    parser.add_argument("--store", choices=STORES, required=True)
    parser.add_argument("--place", choices=PLACES, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--uri", default=None)
    args = parser.parse_args(argv)
    run = run_once(args.store, args.place, args.count, args.timeout, args.uri)
    del run["workflow"], run["request"]
    print(json.dumps(run), flush=True)
    return 0


def _figures(run: dict[str, Any], raw: float | None, raw_pg: float | None) -> list[Result]:
    kind, place = run["store"], run["place"]
    workflows: Latencies = run["workflow"]
    requests: Latencies = run["request"]
    where = "service in this process" if place == "in process" else "service in `decider run`"
    note = (
        f"workflow median {workflows.median_ms:.2f} ms, p99 {workflows.p99_ms:.2f} ms; "
        f"app.request median {requests.median_ms:.2f} ms, p99 {requests.p99_ms:.2f} ms "
        f"({requests.rate:.0f}/s); N={run['count']}"
    )
    extra = {
        "workflow_median_ms": workflows.median_ms,
        "workflow_p99_ms": workflows.p99_ms,
        "request_median_ms": requests.median_ms,
        "request_p99_ms": requests.p99_ms,
        "request_per_s": requests.rate,
        "count": run["count"],
    }
    slug = f"{kind}_{'inproc' if place == 'in process' else 'run'}"
    if kind == "memory":
        baseline, baseline_rate, target = "1,000 workflows/s (stated floor)", MEMORY_FLOOR, 1.0
    elif kind == "sqlite":
        assert raw is not None
        baseline, baseline_rate, target = "R", raw, 0.04
    else:
        assert raw_pg is not None
        baseline, baseline_rate, target = "R_pg", raw_pg, 0.03
    results: list[Result] = [
        Figure(
            key=f"alone_{slug}",
            title=f"10. one at a time: {kind}, {where}",
            unit="workflows/s",
            rate=workflows.rate,
            baseline=baseline,
            baseline_rate=baseline_rate,
            ratio=workflows.rate / baseline_rate,
            ratio_is=f"workflows/s / {baseline} (higher is better)",
            target=Target(">=", target),
            note=note,
            extra=extra,
        )
    ]
    if kind == "sqlite" and place == "decider run":
        for name, value, bound in (
            ("median", requests.median_ms, REQUEST_MEDIAN_MS),
            ("p99", requests.p99_ms, REQUEST_P99_MS),
        ):
            results.append(
                Figure(
                    key=f"alone_request_{name}_{slug}",
                    title=f"10. app.request {name} round trip: {kind}, {where}",
                    unit="ms",
                    rate=value,
                    baseline=f"{bound:g} ms (stated bound)",
                    baseline_rate=bound,
                    ratio=value / bound,
                    ratio_is=f"{name} ms / {bound:g} ms (lower is better)",
                    target=Target("<=", 1.0),
                    note=note,
                    extra=extra,
                )
            )
    return results


def measure(
    stores: Sequence[str],
    count: int,
    timeout: float,
    raw: Callable[[], float],
    raw_pg: Callable[[], float] | None,
    pg_uri: str | None,
    progress: Callable[[str], None] = lambda _: None,
) -> list[Result]:
    """Figure 10 for each store of ``stores`` (in process; SQLite and PostgreSQL also in a
    ``decider run`` process), ``count`` workflows and requests each, beside R and R_pg."""
    results: list[Result] = []
    rate = raw() if "sqlite" in stores else None
    rate_pg = raw_pg() if "postgres" in stores and raw_pg is not None else None
    for kind in stores:
        for place in PLACES:
            if kind == "memory" and place != "in process":
                continue  # a memory store cannot be shared with another process
            progress(f"  one at a time: {kind}, {place}")
            run = run_in_child(kind, place, count, timeout, pg_uri)
            results += _figures(run, rate, rate_pg)
    return results


if __name__ == "__main__":
    sys.exit(_child_main())
