"""Figure 11: what the EventStoreDB client side costs: the service's CPU per workflow on the
test server against its CPU per workflow on SQLite, in the same run.

A real node runs on another machine; the test server here runs in a process of its own on
the same cores, so figure 5's end-to-end rates on it mix the client's cost with a Python
server's. The service process's CPU time (user + system, all its threads, from the service's
start to the last fine issued: figure 5's ``cpu_seconds``) leaves the server out: it is what
a user pays on their own machine for the same workflows. Three protocols: ``esdb_v1`` (v1
calls only, as on EventStoreDB 24.10), ``esdb_25`` (25.1's ``AppendSession``; kurrentdbclient
only) and ``esdb`` (26.1's ``AppendRecords``).

The runs are figure 5's own (:mod:`benchmarks.end_to_end`, a fresh process each, the test
server in another): taken from its figures when the ``e2e`` group ran in the same report, else
run here the same way. Each side is the run with the least CPU of its repeats.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import end_to_end
from benchmarks.harness import Figure, Pending, Result, Target
from decider.stores.esdb._client import load

TARGETS = {"esdb": Target("<=", 1.5), "esdb_25": None, "esdb_v1": Target("<=", 2.5)}
"""Issue 26's bounds on the ratio: AppendRecords (26.1) and the v1 protocol; none for 25.1."""

_PROTOCOL = {
    "esdb_v1": "v1 calls",
    "esdb_25": "25.1 AppendSession",
    "esdb": "26.1 AppendRecords",
}


def kinds() -> tuple[str, ...]:
    """The EventStoreDB kinds the installed client can run (25.1's needs kurrentdbclient)."""
    with_session = load().new_events is not None
    return ("esdb_v1", "esdb_25", "esdb") if with_session else ("esdb_v1", "esdb")


def _runs(
    kind: str, n: int, timeout: float, repeats: int, earlier: Sequence[Result]
) -> tuple[list[dict[str, Any]], str]:
    """The runs of ``kind`` at ``n`` and where they come from: figure 5's when it has them,
    else ``repeats`` new ones."""
    for result in earlier:
        if isinstance(result, Figure) and result.key == f"e2e_{kind}_{n}":
            return [result.extra], f"figure 5's fastest of {result.extra.get('repeats', 1)}"
    runs = [end_to_end.best_of_runs(kind, n, timeout, repeats=1) for _ in range(repeats)]
    return runs, f"least CPU of {repeats}"


def _cpu_ms_per_workflow(run: dict[str, Any]) -> float:
    return 1000 * float(run["cpu_seconds"]) / int(run["n"])


def measure(
    n: int,
    timeout: float,
    repeats: int,
    kinds: Sequence[str],
    earlier: Sequence[Result] = (),
    progress: Callable[[str], None] | None = None,
) -> list[Result]:
    """Figure 11 for ``n`` workflows: one figure per EventStoreDB kind in ``kinds``."""
    say = progress or (lambda _: None)
    try:
        sqlite_runs, sqlite_source = _runs("sqlite", n, timeout, repeats, earlier)
    except end_to_end.RunFailed as exc:
        return [
            Pending(f"client_cpu_{kind}_{n}", _title(kind, n), f"the SQLite run failed: {exc}")
            for kind in kinds
        ]
    sqlite = min(sqlite_runs, key=_cpu_ms_per_workflow)
    results: list[Result] = []
    for kind in kinds:
        key = f"client_cpu_{kind}_{n}"
        try:
            runs, source = _runs(kind, n, timeout, repeats, earlier)
        except end_to_end.RunFailed as exc:
            say(f"  {kind} N={n}: FAILED {exc}")
            results.append(Pending(key, _title(kind, n), f"failed: {exc}"))
            continue
        mine = min(runs, key=_cpu_ms_per_workflow)
        ms, sqlite_ms = _cpu_ms_per_workflow(mine), _cpu_ms_per_workflow(sqlite)
        say(f"  {kind} N={n}: {ms:.2f} ms CPU/workflow vs SQLite {sqlite_ms:.2f}")
        results.append(
            Figure(
                key=key,
                title=_title(kind, n),
                unit="ms CPU/workflow",
                rate=ms,
                baseline=f"the service on SQLite (synchronous=FULL), N={n:,}, same run",
                baseline_rate=sqlite_ms,
                ratio=ms / sqlite_ms,
                ratio_is=f"{kind} service CPU per workflow / SQLite's (lower is better)",
                target=TARGETS[kind],
                note=(
                    f"service process CPU {mine['cpu_seconds']:.2f}s vs"
                    f" {sqlite['cpu_seconds']:.2f}s (the test server's own not counted);"
                    f" end to end {mine['workflows_per_s']:.0f} vs"
                    f" {sqlite['workflows_per_s']:.0f} workflows/s;"
                    f" runs: {source}, SQLite {sqlite_source}"
                ),
                extra={"esdb": mine, "sqlite": sqlite},
            )
        )
    return results


def _title(kind: str, n: int) -> str:
    return f"11. client side, {_PROTOCOL[kind]} vs SQLite: service CPU, N={n:,}"
