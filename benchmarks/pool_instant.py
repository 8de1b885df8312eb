"""Figure 6d: figure 5's SQLite run (instant handlers) on the code before the pool and now.

The old code is git commit :data:`OLD_REF`, unpacked with ``git archive`` into a temporary
folder and run from there (``PYTHONPATH`` puts its ``decider`` before the installed one); the
new run is :func:`benchmarks.end_to_end.run_in_child`. One after the other, in the same run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.end_to_end import RunFailed, run_in_child
from benchmarks.harness import Figure, Pending, Result, Target

OLD_REF = "77de7f9"
"""The commit before the pool (the engine refactor), measured by figure 6d."""

_ROOT = Path(__file__).resolve().parent.parent


def _old_tree(directory: Path) -> Path | None:
    """The code of :data:`OLD_REF`, unpacked into ``directory``; ``None`` if git cannot."""
    try:
        archive = subprocess.run(
            ["git", "archive", OLD_REF], cwd=_ROOT, capture_output=True, check=True, timeout=60
        )
        subprocess.run(
            ["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return directory


def _old_e2e(n: int, timeout: float) -> dict[str, Any]:
    """Figure 5's SQLite run on the code of :data:`OLD_REF`."""
    with tempfile.TemporaryDirectory(prefix="decider-old-") as name:
        (Path(name) / "tree").mkdir()
        tree = _old_tree(Path(name) / "tree")
        if tree is None:
            raise RunFailed(f"git archive {OLD_REF} failed (not a git checkout?)")
        env = dict(os.environ)
        env["PYTHONPATH"] = str(tree)
        (Path(name) / "run").mkdir()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.end_to_end",
                "--store",
                "sqlite",
                "--n",
                str(n),
                "--dir",
                str(Path(name) / "run"),
                "--timeout",
                str(timeout),
            ],
            capture_output=True,
            text=True,
            cwd=tree,
            env=env,
            timeout=timeout + 60,
            check=False,
        )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RunFailed(f"old e2e: status {done.returncode}: {done.stderr[-1500:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def instant(n: int, timeout: float, say: Callable[[str], None]) -> Result:
    """Figure 6d: new / old workflows/s of figure 5's SQLite run with ``n`` workflows."""
    title = f"6d. instant handlers: new vs before the pool ({OLD_REF}), N={n}"
    try:
        old = _old_e2e(n, timeout)
        new = run_in_child("sqlite", n, timeout)
    except RunFailed as exc:
        return Pending("pool_instant", title, f"failed: {exc}")
    ratio = new["workflows_per_s"] / old["workflows_per_s"]
    say(f"  {title}: {ratio:.2f}x")
    return Figure(
        key="pool_instant",
        title=title,
        unit="workflows/s",
        rate=new["workflows_per_s"],
        baseline=f"the same run on commit {OLD_REF}",
        baseline_rate=old["workflows_per_s"],
        ratio=ratio,
        ratio_is="new / old workflows/s (higher is better)",
        target=Target(">=", 0.9),
        note=f"figure 5's SQLite run; new {new['seconds']:.2f}s, old {old['seconds']:.2f}s",
        extra={"old": old, "new": new},
    )
