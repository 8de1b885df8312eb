"""The cyclic garbage collector's settings for a service process (a ``Service``, ``decider run``).

CPython collects its youngest generation every 700 net container allocations (its default
``gc.get_threshold()[0]``), and a full collection, which visits every tracked object of the
heap, after ten collections of the middle one whenever the objects promoted since the last full
one reach a quarter of the heap. A service holds a batch's objects (decoded events, drafts,
rows, its appends) for the whole batch and its commit, far longer than 700 allocations, so they
are promoted to the oldest generation, where they count towards the next full collection and
die soon after. In a burst the heap holds every instance at work (up to the cache's size), and
each full collection costs as much as the heap is large: the collector's share of the CPU then
grew with the number of workflows in flight. Measured with the traffic-fine sample on
PostgreSQL, one process (``benchmarks/scaleout.py --growth 5000,50000``): full collections
took 0.3 ms of CPU per workflow at N = 5,000 and 0.8 ms at N = 50,000 (about 270 of them,
150 ms each, at a peak heap of 340,000 objects), the whole growth of the service's CPU per
workflow (1.6 to 2.1 ms).

:func:`tune` (applied once per process by the first
:class:`~decider.processors.service.service.Service` started, unless it was made with
``gc_young_threshold=0``: ``decider run --gc-young-threshold 0``; the app is loaded and the
store opened by then):

- freezes the objects of start-up (modules, classes, the app) with :func:`gc.freeze`, so no
  collection visits them again;
- collects the youngest generation every :data:`YOUNG_THRESHOLD` net allocations instead of 700,
  so a batch's objects die young and only what lives on (cached instances) is promoted.

The settings are the process's, so the first service that tunes them sets them
(:func:`tune_once`); a later one, whatever its threshold, leaves them as they are.
"""

from __future__ import annotations

import gc
import threading

YOUNG_THRESHOLD = 100_000
"""Net container allocations between two collections of the youngest generation (CPython's
default: 700). The garbage of a cycle lives at most this long; each young collection visits
at most this many objects (a few milliseconds)."""


def tune(young_threshold: int = YOUNG_THRESHOLD) -> None:
    """Freeze the objects alive now (start-up's) out of every later collection, and collect the
    youngest generation every ``young_threshold`` net allocations (0: leave the collector as it
    is, nothing frozen). The other two thresholds stay as they are."""
    if young_threshold < 0:
        raise ValueError(f"the young threshold must not be negative, got {young_threshold}")
    if young_threshold == 0:
        return
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, old)


_tuned: set[int] = set()
"""The threshold this process was tuned with by :func:`tune_once` (empty: not yet)."""
_tuning = threading.Lock()


def tune_once(young_threshold: int = YOUNG_THRESHOLD) -> bool:
    """:func:`tune` unless this process was tuned before by this function (0: leave the
    collector as it is); whether it tuned it now. A service calls it as it starts."""
    if young_threshold < 0:
        raise ValueError(f"the young threshold must not be negative, got {young_threshold}")
    with _tuning:
        if _tuned or young_threshold == 0:
            return False
        tune(young_threshold)
        _tuned.add(young_threshold)
        return True
