"""Figure 8: the state-stored variant against the event-sourced one, end to end on SQLite.

The traffic-fine workflow run by a :class:`~decider.processors.Service` on a fresh SQLite file
(``synchronous=FULL``) as in figure 5, once registered event-sourced and once state-stored
(``app.workflow(..., stored="state")``: a state row and the outbox appended to the instance
stream, in one transaction per batch). The runs alternate, best of ``repeats`` each; the
ratio is state-stored workflows/s over event-sourced workflows/s (no target: the issue asks
for the comparison).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.end_to_end import run_once
from benchmarks.harness import Figure


def measure(n: int, repeats: int, timeout: float) -> Figure:
    """Figure 8 for ``n`` workflows."""
    best: dict[str, float] = {"events": 0.0, "state": 0.0}
    for _ in range(repeats):
        for stored in ("events", "state"):
            with tempfile.TemporaryDirectory(prefix="decider-bench-") as directory:
                run = run_once("sqlite", n, Path(directory), None, timeout, stored=stored)
            if run["errors"] or run["issued"] != n:
                raise AssertionError(f"the {stored} run did not complete: {run}")
            best[stored] = max(best[stored], run["workflows_per_s"])
    return Figure(
        key="state_stored_sqlite",
        title=f"8. SQLite: state-stored vs event-sourced, N={n:,}",
        unit="workflows/s",
        rate=best["state"],
        baseline="the same workflows event-sourced, same run",
        baseline_rate=best["events"],
        ratio=best["state"] / best["events"],
        ratio_is="state-stored workflows/s / event-sourced workflows/s (higher is better)",
        note=f"best of {repeats} alternating runs each",
        extra={"n": n, "repeats": repeats, "workflows_per_s": best},
    )
