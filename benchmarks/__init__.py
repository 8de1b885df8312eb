"""Benchmarks of decider against same-run baselines: ``python -m benchmarks [--quick]``.

One module per figure: :mod:`benchmarks.core` (1, the pure core), :mod:`benchmarks.codec` (2),
:mod:`benchmarks.append` (3a/3b, SQLite appends), :mod:`benchmarks.append_postgres` (3c/3d,
PostgreSQL appends), :mod:`benchmarks.latency` (4, handling time by history length),
:mod:`benchmarks.end_to_end` (5, workflows per second through a Service);
:mod:`benchmarks.harness` holds the timing and reporting, :mod:`benchmarks.pg` the PostgreSQL
server and its fresh schemas, :mod:`benchmarks.runner` the modes. See docs/benchmarks.md.
"""
