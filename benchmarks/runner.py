"""Runs the benchmarks of one mode and gathers their figures into a report.

``--quick`` is the smoke mode ``make test`` runs: every figure is measured on small sizes, so
it exercises every code path in well under a minute and says nothing reliable about speed.
The full mode uses the sizes the targets are stated for.

PostgreSQL (figures 3c-3g, its end-to-end run and figure 12) is part of every mode unless left out
(``postgres=False``, ``--no-postgres``); when it is in, the server must answer before anything
runs, or :class:`~benchmarks.pg.PostgresUnavailable` says which server did not.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from benchmarks import pg
from benchmarks.harness import Figure, Pending, Result

ALL_FIGURES: tuple[str, ...] = (
    "core",
    "codec",
    "append",
    "latency",
    "e2e",
    "client",
    "pool",
    "snapshots",
    "state",
    "scaleout",
    "alone",
    "floor",
)
"""The names of the benchmark groups, in the order they run."""

_USE_POSTGRES = ("append", "e2e", "scaleout", "alone", "floor")


@attrs.frozen
class Sizes:
    """How much work each benchmark does in one mode."""

    core_workflows: int
    core_rounds: int
    codec_workflows: int
    codec_rounds: int
    append_calls: int
    append_batches: int
    append_rounds: int
    latency_lengths: tuple[int, ...]
    latency_inputs: int
    e2e_sqlite: tuple[int, ...]
    e2e_memory: tuple[int, ...]
    e2e_esdb: tuple[int, ...]
    e2e_postgres: tuple[int, ...]
    e2e_timeout: float
    e2e_repeats: int
    pool_sizes: tuple[tuple[int, int], ...] = ()
    """Figure 6a: (pool size, workflows) pairs."""
    pool_hol: int = 0
    pool_crash: int = 0
    pool_instant: int = 0
    pool_per_worker: int = 10
    """Figure 6e: calls per worker."""
    snapshot_lengths: tuple[int, ...] = (10, 2_000)
    """Figure 7: the short and the long stream's lengths."""
    snapshot_cold_starts: int = 3
    state_n: int = 100
    """Figure 8: workflows per run."""
    state_repeats: int = 1
    scaleout_processes: tuple[int, ...] = (1, 2, 4)
    scaleout_n: int = 10_000
    scaleout_failover_n: int = 3_000
    scaleout_rounds: int = 3
    """Figure 9: each process count runs this many times, in turns; each figure the median."""
    scaleout_growth: tuple[int, int] = (5_000, 50_000)
    """Figure 9, growth: one process at the small and the large N."""
    alone: int = 300
    """Figure 10: workflows (and requests) one at a time, per store and place."""
    floor: tuple[int, int] = (2_000, 300)
    """Figure 12: workflows per run (``e2e_repeats`` pairs), and in the call-counting runs."""


QUICK = Sizes(
    core_workflows=300,
    core_rounds=3,
    codec_workflows=100,
    codec_rounds=3,
    append_calls=100,
    append_batches=5,
    append_rounds=3,
    latency_lengths=(10, 1_000, 10_000),
    latency_inputs=20,
    e2e_sqlite=(100, 300),
    e2e_memory=(100,),
    e2e_esdb=(100,),
    e2e_postgres=(100,),
    e2e_timeout=60.0,
    e2e_repeats=1,
    pool_sizes=((1, 10), (4, 20), (16, 40), (64, 64)),
    pool_hol=64,
    pool_crash=40,
    pool_instant=100,
    snapshot_lengths=(10, 2_000),
    snapshot_cold_starts=3,
    state_n=100,
    state_repeats=1,
    scaleout_processes=(1, 2),
    scaleout_n=200,
    scaleout_failover_n=300,
    scaleout_rounds=1,
    scaleout_growth=(200, 600),
    alone=20,
    floor=(200, 50),
)
"""The smoke-test sizes: every path runs, in seconds."""

FULL = Sizes(
    core_workflows=1_000,
    core_rounds=25,
    codec_workflows=300,
    codec_rounds=25,
    append_calls=1_000,
    append_batches=50,
    append_rounds=7,
    latency_lengths=(10, 1_000, 10_000),
    latency_inputs=200,
    e2e_sqlite=(1_000, 10_000),
    e2e_memory=(1_000, 10_000),
    e2e_esdb=(1_000, 10_000),
    e2e_postgres=(1_000,),
    e2e_timeout=180.0,
    e2e_repeats=3,
    pool_sizes=((1, 50), (4, 200), (16, 800), (64, 2_000)),
    pool_hol=400,
    pool_crash=300,
    pool_instant=1_000,
    pool_per_worker=50,
    snapshot_lengths=(10, 10_000),
    snapshot_cold_starts=15,
    state_n=2_000,
    state_repeats=3,
)
"""The sizes the targets are stated for."""


_DELIVERED_LATER = ("stores.", "processors", "samples.traffic_fine.app")


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
    }


def _pending_on_import_error(key: str, title: str, run: Callable[[], list[Result]]) -> list[Result]:
    """``run()``, or one pending figure if a project module it needs does not exist (yet).

    Only the modules other work streams deliver count (``stores.*``, ``processors.*``, the
    sample's app); any other missing module is a real error and propagates.
    """
    try:
        return run()
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith(_DELIVERED_LATER):
            raise
        return [Pending(key, title, f"module {exc.name!r} is not available")]


def run(
    quick: bool,
    only: Sequence[str] = ALL_FIGURES,
    esdb: bool = True,
    progress: Callable[[str], None] | None = None,
    postgres: bool = True,
) -> dict[str, Any]:
    """Run the chosen benchmark groups; a JSON-ready report with every figure.

    With ``postgres``, the PostgreSQL figures run on ``PG_URI`` (:func:`benchmarks.pg.uri`);
    :class:`~benchmarks.pg.PostgresUnavailable` before anything runs if it does not answer.
    """
    sizes = QUICK if quick else FULL
    say = progress or (lambda _: None)
    started = time.perf_counter()
    results: list[Result] = []
    for group in only:
        if group not in ALL_FIGURES:
            raise ValueError(f"unknown benchmark {group!r}; choose from {', '.join(ALL_FIGURES)}")
    pg_uri: str | None = None
    if postgres and any(group in only for group in _USE_POSTGRES):
        pg_uri = pg.uri()
        pg.check_reachable(pg_uri)
    for group in ALL_FIGURES:
        if group not in only:
            continue
        say(f"running {group} ...")
        group_start = time.perf_counter()
        results.extend(_run_group(group, sizes, esdb, pg_uri, results, say))
        say(f"  {group} took {time.perf_counter() - group_start:.1f}s")
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "mode": "quick" if quick else "full",
        "machine": machine(),
        "postgres": None if pg_uri is None else pg.redact(pg_uri),
        "argv": sys.argv[1:],
        "seconds": time.perf_counter() - started,
        "results": results,
    }


def _raw_rate(results: list[Result], sizes: Sizes) -> float:
    """R from figure 3a's baseline when it ran, else measured now the same way."""
    for result in results:
        if isinstance(result, Figure) and result.key == "append_single":
            assert result.baseline_rate is not None
            return result.baseline_rate
    from benchmarks import append

    return append.measure_raw_single(sizes.append_calls, sizes.append_rounds)


def _pg_raw_rate(results: list[Result], sizes: Sizes, pg_uri: str) -> float:
    """R_pg from figure 3c's baseline when it ran, else measured now the same way."""
    for result in results:
        if isinstance(result, Figure) and result.key == "append_pg_single":
            assert result.baseline_rate is not None
            return result.baseline_rate
    from benchmarks import append_postgres

    return append_postgres.measure_raw_single(pg_uri, sizes.append_calls, sizes.append_rounds)


def _run_group(
    group: str,
    sizes: Sizes,
    esdb: bool,
    pg_uri: str | None,
    earlier: list[Result],
    say: Callable[[str], None],
) -> list[Result]:
    if group == "core":
        from benchmarks import core

        return [core.measure(sizes.core_workflows, sizes.core_rounds)]
    if group == "codec":
        from benchmarks import codec

        return [codec.measure(sizes.codec_workflows, sizes.codec_rounds)]
    if group == "append":

        def append() -> list[Result]:
            from benchmarks import append

            results = append.measure(sizes.append_calls, sizes.append_batches, sizes.append_rounds)
            if pg_uri is not None:
                from benchmarks import append_postgres

                results += append_postgres.measure(
                    pg_uri, sizes.append_calls, sizes.append_batches, sizes.append_rounds
                )
                results += append_postgres.measure_concurrent(
                    pg_uri, sizes.append_calls, sizes.append_rounds
                )
            return results

        return _pending_on_import_error("append", "3. store append", append)
    if group == "latency":

        def latency() -> list[Result]:
            from benchmarks import latency

            return latency.measure(sizes.latency_lengths, sizes.latency_inputs)

        return _pending_on_import_error("latency", "4. handle latency vs history", latency)

    if group == "pool":

        def pool() -> list[Result]:
            from benchmarks import pool

            return pool.measure(
                dict(sizes.pool_sizes),
                sizes.pool_hol,
                sizes.pool_crash,
                sizes.pool_instant,
                sizes.e2e_timeout,
                sizes.pool_per_worker,
                say,
            )

        return _pending_on_import_error("pool", "6. command pool", pool)
    if group == "scaleout":

        def scaleout() -> list[Result]:
            from benchmarks import scaleout

            stores = ("sqlite", "postgres") if pg_uri is not None else ("sqlite",)
            results = scaleout.measure(
                dict.fromkeys(stores, sizes.scaleout_processes),
                sizes.scaleout_n,
                sizes.scaleout_failover_n,
                sizes.e2e_timeout * 3,
                pg_uri,
                progress=say,
                rounds=sizes.scaleout_rounds,
            )
            small, big = sizes.scaleout_growth
            return results + scaleout.measure_growth(
                stores, small, big, sizes.e2e_timeout * 3, pg_uri, progress=say
            )

        return _pending_on_import_error("scaleout", "9. scale-out", scaleout)

    if group == "snapshots":

        def snapshots() -> list[Result]:
            from benchmarks import snapshots

            return snapshots.measure(sizes.snapshot_lengths, sizes.snapshot_cold_starts)

        return _pending_on_import_error("snapshots", "7. cold load with snapshots", snapshots)

    if group == "alone":

        def alone() -> list[Result]:
            from benchmarks import alone

            stores = ("memory", "sqlite") + (("postgres",) if pg_uri is not None else ())
            return alone.measure(
                stores,
                sizes.alone,
                sizes.e2e_timeout,
                lambda: _raw_rate(earlier, sizes),
                None if pg_uri is None else (lambda: _pg_raw_rate(earlier, sizes, pg_uri)),
                pg_uri,
                say,
            )

        return _pending_on_import_error("alone", "10. one at a time", alone)

    if group == "floor":

        def floor() -> list[Result]:
            from benchmarks import floor

            stores = ("sqlite", "memory") + (("postgres",) if pg_uri is not None else ())
            n, calls_n = sizes.floor
            return floor.measure(
                stores, n, calls_n, sizes.e2e_repeats, sizes.e2e_timeout, pg_uri, say
            )

        return _pending_on_import_error("floor", "12. CPU per workflow against the floor", floor)

    if group == "state":

        def state() -> list[Result]:
            from benchmarks import state_stored

            return [state_stored.measure(sizes.state_n, sizes.state_repeats, sizes.e2e_timeout)]

        return _pending_on_import_error("state", "8. state-stored vs event-sourced", state)

    if group == "client":

        def client() -> list[Result]:
            from benchmarks import client_cost

            n, kinds = sizes.e2e_esdb[0], client_cost.kinds()
            repeats, timeout = sizes.e2e_repeats, sizes.e2e_timeout
            return client_cost.measure(n, timeout, repeats, kinds, earlier, say) if esdb else []

        return _pending_on_import_error("client", "11. EventStoreDB client side", client)

    def end_to_end() -> list[Result]:
        from benchmarks import end_to_end

        return end_to_end.measure(
            sqlite_sizes=sizes.e2e_sqlite,
            memory_sizes=sizes.e2e_memory,
            esdb_sizes=sizes.e2e_esdb if esdb else (),
            timeout=sizes.e2e_timeout,
            raw_rate=_raw_rate(earlier, sizes),
            repeats=sizes.e2e_repeats,
            progress=say,
            postgres_sizes=sizes.e2e_postgres if pg_uri is not None else (),
            pg_raw_rate=None if pg_uri is None else _pg_raw_rate(earlier, sizes, pg_uri),
            pg_uri=pg_uri,
        )

    return _pending_on_import_error("e2e", "5. end to end", end_to_end)


def to_json(report: dict[str, Any]) -> dict[str, Any]:
    """The report with its figures turned into plain dicts."""
    return {**report, "results": [result.to_json() for result in report["results"]]}
