"""``python -m benchmarks``: measure, print the table, optionally write the JSON report."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness import format_legend, format_markdown, format_table
from benchmarks.pg import PostgresUnavailable
from benchmarks.runner import ALL_FIGURES, run, to_json


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line: mode, JSON output, which groups to run."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Measure decider against same-run baselines; print a table, write JSON.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke mode: every figure on small sizes, seconds not minutes (times not reliable)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the report here")
    parser.add_argument(
        "--only",
        default=",".join(ALL_FIGURES),
        help=f"comma-separated groups to run (default: all of {','.join(ALL_FIGURES)})",
    )
    parser.add_argument(
        "--markdown", type=Path, metavar="PATH", help="also write the table as Markdown here"
    )
    parser.add_argument(
        "--no-esdb", action="store_true", help="skip the EventStoreDB test-server runs"
    )
    parser.add_argument(
        "--no-postgres",
        action="store_true",
        help="skip the PostgreSQL runs (otherwise PG_URI, or the tests' default, must answer)",
    )
    args = parser.parse_args(argv)
    args.only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in args.only if name not in ALL_FIGURES]
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; choose from {', '.join(ALL_FIGURES)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks; 0 once the report is printed (missed targets are not failures),
    2 with a one-line error if PostgreSQL is wanted and does not answer."""
    args = parse_args(argv)
    try:
        report = run(
            quick=args.quick,
            only=args.only,
            esdb=not args.no_esdb,
            postgres=not args.no_postgres,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except PostgresUnavailable as exc:
        print(f"python -m benchmarks: error: {exc}", file=sys.stderr)
        return 2
    mode = report["mode"]
    cpu = report["machine"]
    print(
        f"decider benchmarks, {mode} mode, {report['date']}, "
        f"{cpu['cores']} cores, Python {cpu['python']}, {report['seconds']:.1f}s"
    )
    print(format_table(report["results"]))
    print()
    print(format_legend(report["results"]))
    if args.markdown is not None:
        args.markdown.write_text(format_markdown(report["results"]) + "\n")
        print(f"Markdown table written to {args.markdown}")
    if args.json is not None:
        args.json.write_text(json.dumps(to_json(report), indent=2) + "\n")
        print(f"\nJSON report written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
