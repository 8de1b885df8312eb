"""Runs the benchmarks of one mode and gathers their figures into a report.

``--quick`` is the smoke mode ``make test`` runs: every figure is measured on small sizes, so
it exercises every code path in well under a minute and says nothing reliable about speed.
The full mode uses the sizes the targets are stated for.
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

from benchmarks.harness import Figure, Pending, Result

ALL_FIGURES: tuple[str, ...] = ("core", "codec", "append", "latency", "e2e")
"""The names of the benchmark groups, in the order they run."""


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
    e2e_timeout: float
    e2e_repeats: int


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
    e2e_timeout=60.0,
    e2e_repeats=1,
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
    e2e_esdb=(1_000,),
    e2e_timeout=180.0,
    e2e_repeats=3,
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
) -> dict[str, Any]:
    """Run the chosen benchmark groups; a JSON-ready report with every figure."""
    sizes = QUICK if quick else FULL
    say = progress or (lambda _: None)
    started = time.perf_counter()
    results: list[Result] = []
    for group in only:
        if group not in ALL_FIGURES:
            raise ValueError(f"unknown benchmark {group!r}; choose from {', '.join(ALL_FIGURES)}")
    for group in ALL_FIGURES:
        if group not in only:
            continue
        say(f"running {group} ...")
        group_start = time.perf_counter()
        results.extend(_run_group(group, sizes, esdb, results, say))
        say(f"  {group} took {time.perf_counter() - group_start:.1f}s")
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "mode": "quick" if quick else "full",
        "machine": machine(),
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


def _run_group(
    group: str, sizes: Sizes, esdb: bool, earlier: list[Result], say: Callable[[str], None]
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

            return append.measure(sizes.append_calls, sizes.append_batches, sizes.append_rounds)

        return _pending_on_import_error("append", "3. store append", append)
    if group == "latency":

        def latency() -> list[Result]:
            from benchmarks import latency

            return latency.measure(sizes.latency_lengths, sizes.latency_inputs)

        return _pending_on_import_error("latency", "4. handle latency vs history", latency)

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
        )

    return _pending_on_import_error("e2e", "5. end to end", end_to_end)


def to_json(report: dict[str, Any]) -> dict[str, Any]:
    """The report with its figures turned into plain dicts."""
    return {**report, "results": [result.to_json() for result in report["results"]]}
