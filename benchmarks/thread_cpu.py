"""Run a module as ``__main__`` (``python -m benchmarks.thread_cpu MODULE ARGS...``) and, at each
``SIGUSR1``, write the CPU seconds of each of its threads, by name, to
``$DECIDER_BENCH_THREADS/<pid>-<n>.json`` (n counts the signals from 0).

``benchmarks.scaleout --threads`` starts its services so, and signals them before and after its
window: where a group's extra CPU goes, thread by thread. The signal is blocked in every thread
but one of the wrapper's own, which waits for it (``sigwait``): the service's threads are never
interrupted, and nothing polls.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import threading
import time
from pathlib import Path

DIRECTORY = "DECIDER_BENCH_THREADS"
"""The environment variable naming the folder the readings go to."""


def threads_cpu() -> dict[str, float]:
    """CPU seconds of each live thread of this process, summed by name (a pool's threads, named
    with a number, under one name), and of that the system CPU under the name and
    ``[system]``."""
    split: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        try:
            seconds = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except (OSError, ValueError):
            continue  # ended meanwhile
        name = thread.name.rstrip("0123456789_-") or thread.name
        name = name.split(" (")[0]
        split[name] = split.get(name, 0.0) + seconds
        system = f"{name} [system]"
        split[system] = split.get(system, 0.0) + _system(thread.native_id)
    return split


def _system(native_id: int | None) -> float:
    """The system CPU seconds of a thread (of its total: in the kernel, for its system calls),
    in clock ticks' resolution; 0 where ``/proc`` cannot tell."""
    try:
        stat = Path(f"/proc/self/task/{native_id}/stat").read_text()
    except OSError:
        return 0.0
    return int(stat.rsplit(")", 1)[1].split()[12]) / os.sysconf("SC_CLK_TCK")


def _answer(directory: Path) -> None:
    for number in range(1_000_000):
        signal.sigwait({signal.SIGUSR1})
        path = directory / f"{os.getpid()}-{number}.json"
        partial = path.with_suffix(".part")
        partial.write_text(json.dumps(threads_cpu()))
        partial.rename(path)  # whole, or not there yet


def main() -> None:
    """Block ``SIGUSR1`` for every thread to come, answer it on a thread of its own, then run
    the module named by the first argument with the rest as its arguments."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    threading.Thread(
        target=_answer, args=(Path(os.environ[DIRECTORY]),), name="bench-thread-cpu", daemon=True
    ).start()
    module, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
