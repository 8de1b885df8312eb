"""The ``decider`` command line: run an App as a service, and look at what it stored.

::

    decider run samples.traffic_fine:app --store sqlite:///events.db
    decider show IssueTrafficFineForSpeedingViolation-PR-1 --app samples.traffic_fine:app
    decider status --app samples.traffic_fine:app --limit 5
    decider parked --app samples.traffic_fine:app
    decider retry <command-id> --app samples.traffic_fine:app
    decider publish fines.PoliceReportPublished '{...}' --app samples.traffic_fine:app
    decider list --stuck 15m --json
    decider skipped redrive --all
    decider reset commands --to-time 2026-01-31T12:00Z
    decider diagram samples.traffic_fine:app IssueTrafficFineForSpeedingViolation
    decider console --app samples.traffic_fine:app --store sqlite:///events.db
    decider replay-check --app samples.traffic_fine:app --limit 100

``--store`` defaults to ``$DECIDER_STORE`` and ``--app`` to ``$DECIDER_APP``. Exit status: 0
done, 1 an operation failed (a store error, a command that is not parked, a stream without
events), 2 a bad argument; an error is one ``decider: error: ...`` line on stderr. Output cut
short by a closed pipe (``decider list | head``) ends quietly with status 141 (128 + SIGPIPE),
as other Unix tools do.

argparse (stdlib) rather than click or typer: the parser tree is plain data, argcomplete
completes it as it is (``decider completion bash``), and the runtime keeps its few dependencies.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from decider.processors.app.errors import InstanceEnded, NotParked, ProcessorDied
from decider.processors.cli.console import add_commands as add_console_commands
from decider.processors.cli.documents import instance_document, parked_document, status_document
from decider.processors.cli.loading import (
    APP_ENV,
    STORE_ENV,
    CliError,
    UsageError,
    load_app,
    open_uri,
    store_uri,
)
from decider.processors.cli.operate import (
    add_operator_commands,
    app_and_store,
    app_arg,
    emit,
    emit_json,
)
from decider.processors.cli.running import EarlySignals, Heartbeat, metrics_endpoint, run_service
from decider.processors.cli.views import instance_lines, parked_lines, status_lines
from decider.processors.engine import logs
from decider.processors.operate.handler_status import handler_lines, handler_status
from decider.processors.operate.partition_status import (
    join_group,
    partition_document,
    partition_lines,
    partition_rows,
)
from decider.processors.operate.queries import list_parked, retry_parked, show, status
from decider.processors.operate.replay_check import replay_stored
from decider.processors.service import gc_tuning
from decider.processors.service.service import Service
from decider.processors.workflows.cache import DEFAULT_CACHE_SIZE
from decider.stores.errors import StoreError
from decider.stores.redact import redact_uri

__all__ = ["CliError", "UsageError", "build_parser", "main"]

LOGGER = logging.getLogger(__name__)
"""The command line's own log lines (``decider.processors.cli``)."""

DISTRIBUTION = "decider-workflows"
"""The name this project is installed under (``pip install decider-workflows``)."""

LOG_LEVEL_ENV = "DECIDER_LOG_LEVEL"
"""The environment variable that gives ``decider run``'s log level when ``--log-level`` is not
given."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``decider`` command line; returns the exit status (the console script's entry)."""
    parser = build_parser()
    _complete(parser)
    args = parser.parse_args(argv)
    try:
        code: int = args.command(args)
    except BrokenPipeError:
        # The reader went away (``| head``): no traceback, and nothing more to flush.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except CliError as exc:
        _error(str(exc))
        return exc.exit_code
    except StoreError as exc:
        _error(f"{type(exc).__name__}: {exc}")
        return 1
    except KeyboardInterrupt:
        return 130
    return code


def package_version() -> str:
    """The installed distribution's version, or ``unknown`` when run from a bare checkout."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _complete(parser: argparse.ArgumentParser) -> None:
    """Answer a shell's completion request (argcomplete, when installed) and exit; else
    nothing."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    try:
        import argcomplete
    except ImportError:
        return
    argcomplete.autocomplete(parser)


def _error(text: str) -> None:
    print(f"decider: error: {text}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="decider", description="Run decider workflows as a service, and inspect them."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")
    store_help = f"event store URI, e.g. sqlite:///events.db (default: ${STORE_ENV})"
    app_help = f"the App as module:attribute (default: ${APP_ENV})"

    _add_run(commands, store_help)

    show_cmd = commands.add_parser("show", help="an instance's history and folded state")
    show_cmd.add_argument("stream", help="the instance stream, <WorkflowName>-<instance id>")
    show_cmd.add_argument("--app", help=app_help)
    show_cmd.add_argument("--store", help=store_help)
    show_cmd.add_argument("--json", action="store_true", help="print one JSON document")
    show_cmd.set_defaults(command=_show)

    status_cmd = commands.add_parser("status", help="instances by status, and parked commands")
    status_cmd.add_argument("--app", help=app_help)
    status_cmd.add_argument("--store", help=store_help)
    status_cmd.add_argument("--workflow", help="only this workflow's instances")
    status_cmd.add_argument(
        "--limit", type=int, default=10, help="stream names listed per status (default: 10)"
    )
    status_cmd.add_argument("--json", action="store_true", help="print one JSON document")
    status_cmd.set_defaults(command=_status)

    parked = commands.add_parser("parked", help="the commands parked after their retries")
    parked.add_argument("--app", help=app_help)
    parked.add_argument("--store", help=store_help)
    parked.add_argument("--json", action="store_true", help="print one JSON document")
    parked.set_defaults(command=_parked)

    retry = commands.add_parser("retry", help="carry a parked command out again")
    retry.add_argument("command_id", help="the parked command's id (see `decider parked`)")
    retry.add_argument(
        "--force",
        action="store_true",
        help="retry it even though its workflow instance has ended",
    )
    retry.add_argument("--app", help=app_help)
    retry.add_argument("--store", help=store_help)
    retry.add_argument("--json", action="store_true", help="print one JSON document")
    retry.set_defaults(command=_retry)
    add_operator_commands(commands)

    add_console_commands(commands, app_help, store_help)

    replay = commands.add_parser(
        "replay-check",
        help="replay stored instances through the current code; exit 1 if any differ",
    )
    replay.add_argument("--app", help=app_help)
    replay.add_argument("--store", help=store_help)
    replay.add_argument("--workflow", help="only this workflow's instances")
    replay.add_argument("--limit", type=int, help="replay at most this many instances")
    replay.set_defaults(command=_replay_check)
    return parser


def _add_run(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], store_help: str
) -> None:
    """The ``run`` subcommand and its options."""
    run = commands.add_parser("run", help="run an app's processors until SIGINT/SIGTERM")
    run.add_argument(
        "app_given",
        nargs="?",
        metavar="APP",
        help="the App as module:attribute, e.g. samples.traffic_fine:app "
        f"(or --app; default: ${APP_ENV})",
    )
    run.add_argument("--app", help=f"the App as module:attribute (default: ${APP_ENV})")
    run.add_argument("--store", help=store_help)
    run.add_argument(
        "--log-level",
        default=os.environ.get(LOG_LEVEL_ENV, "INFO"),
        help=f"DEBUG, INFO, WARNING or ERROR (default: ${LOG_LEVEL_ENV} or INFO)",
    )
    run.add_argument(
        "--log-format", choices=logs.FORMATS, default="text", help="log lines as text or JSON"
    )
    run.add_argument(
        "--log-config",
        type=Path,
        metavar="FILE",
        help="a logging.config.dictConfig document (.json or .toml); overrides the two above",
    )
    run.add_argument(
        "--progress-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="log a progress line this often while it changes; 0: never (default: 10)",
    )
    run.add_argument("--batch-size", type=int, default=500, help="inputs per transaction")
    run.add_argument(
        "--cache-size",
        type=int,
        default=DEFAULT_CACHE_SIZE,
        metavar="N",
        help="workflow instances kept in memory per workflow; more than are at work at once "
        f"(default: {DEFAULT_CACHE_SIZE:,})",
    )
    run.add_argument(
        "--gc-young-threshold",
        type=int,
        default=gc_tuning.YOUNG_THRESHOLD,
        metavar="N",
        help="collect Python's youngest garbage generation every N net allocations, with "
        "start-up's objects frozen; 0: leave the collector as Python sets it "
        f"(default: {gc_tuning.YOUNG_THRESHOLD:,}; see docs/service.md)",
    )
    run.add_argument(
        "--metrics-port",
        type=int,
        metavar="N",
        help="serve metrics for Prometheus on this port, 0: any free one (the 'metrics' extra)",
    )
    run.add_argument(
        "--metrics-host", default="127.0.0.1", help="the address to serve metrics on (loopback)"
    )
    run.add_argument(
        "--partitions",
        choices=("all", "auto"),
        default="all",
        help="all: this process does all the work (default); auto: share it with the app's "
        "other processes through leases in the store (see docs/scaling.md)",
    )
    run.add_argument(
        "--lease-ttl",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="with --partitions auto: how long a lease lasts unrenewed (default: 10)",
    )
    run.add_argument(
        "--esdb-consumer-group",
        nargs="?",
        const="",
        metavar="NAME",
        help="EventStoreDB/KurrentDB only: take commands from the persistent subscription "
        "NAME (default: <app>.commands), so the app's processes share them out as competing "
        "consumers (see docs/esdb.md)",
    )
    run.set_defaults(command=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        level = logs.parse_level(str(args.log_level))
        if args.log_config is not None:
            logs.load_config(args.log_config)  # a bad file is a usage error, before anything runs
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if (
        args.progress_interval < 0
        or args.batch_size < 1
        or args.cache_size < 0
        or args.gc_young_threshold < 0
    ):
        raise UsageError(
            "--progress-interval must be >= 0, --batch-size >= 1, --cache-size >= 0 and"
            " --gc-young-threshold >= 0"
        )
    spec = app_arg(args)
    with EarlySignals() as early:
        app = load_app(spec)
        uri = store_uri(args.store)
        store = open_uri(uri)
        try:
            try:
                group = join_group(store, app, args.partitions, args.lease_ttl)
                service = Service(
                    app,
                    store,
                    batch_size=args.batch_size,
                    cache_size=args.cache_size,
                    group=group,
                    consumer_group=args.esdb_consumer_group,
                    gc_young_threshold=args.gc_young_threshold,
                )
            except (TypeError, ValueError) as exc:
                raise UsageError(str(exc)) from exc
            try:
                logs.configure(level, args.log_format, args.log_config)
            except ValueError as exc:
                raise UsageError(str(exc)) from exc
            if early.received.is_set():
                LOGGER.info("stop requested before app %r started: nothing to do", app.name)
                return 0
            LOGGER.info("running app %r (%s) on %s", app.name, spec, redact_uri(uri))
            try:
                with metrics_endpoint(args), Heartbeat(store, app):
                    run_service(service, args.progress_interval, LOGGER, early.received)
            except TimeoutError as exc:
                raise CliError(f"the service did not stop in time: {exc}") from exc
            except ProcessorDied as exc:
                # The service logged the cause; one line says why the process ends, for a
                # supervisor to restart it.
                LOGGER.critical(
                    "%s; exiting with status 1", exc, extra={"processor": exc.processor}
                )
                return 1
        finally:
            _close(store)
    return 0


def _show(args: argparse.Namespace) -> int:
    with app_and_store(args) as (app, store):
        try:
            view = show(store, app, args.stream)
        except KeyError as exc:
            raise UsageError(exc.args[0] if exc.args else str(exc)) from exc
        if not view.history:
            raise CliError(f"stream {args.stream!r} has no events")
        if args.json:
            emit_json(instance_document(app, view))
        else:
            emit(instance_lines(app, view))
    return 0


def _status(args: argparse.Namespace) -> int:
    if args.limit < 0:
        raise UsageError(f"--limit must be >= 0, got {args.limit}")
    with app_and_store(args) as (app, store):
        try:
            instances = status(store, app, args.workflow)
        except KeyError as exc:
            raise UsageError(exc.args[0] if exc.args else str(exc)) from exc
        parked = list_parked(store, app)
        rows = partition_rows(store, app)
        if args.json:
            document = status_document(app, instances, parked)
            if rows:
                document["partitions"] = partition_document(rows)
            emit_json(document)
        else:
            emit(status_lines(app, instances, parked, args.limit) + partition_lines(rows))
            emit(handler_lines(handler_status(store, app)))
    return 0


def _parked(args: argparse.Namespace) -> int:
    with app_and_store(args) as (app, store):
        parked = list_parked(store, app)
        if args.json:
            emit_json(parked_document(parked))
        else:
            emit(parked_lines(parked))
    return 0


def _retry(args: argparse.Namespace) -> int:
    with app_and_store(args) as (app, store):
        try:
            request = retry_parked(store, app, args.command_id, force=args.force)
        except NotParked as exc:
            raise CliError(str(exc)) from exc
        except InstanceEnded as exc:
            raise CliError(f"{exc}; --force retries it anyway") from exc
        if args.json:
            emit_json({"command_id": args.command_id, "request_id": request})
        else:
            emit(
                [
                    f"retry of {args.command_id} requested ({request}); "
                    "a running service carries it out again"
                ]
            )
    return 0


def _replay_check(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 0:
        raise UsageError(f"--limit must be >= 0, got {args.limit}")
    with app_and_store(args) as (app, store):
        try:
            replays = replay_stored(store, app, workflow=args.workflow, limit=args.limit)
        except KeyError as exc:
            raise UsageError(exc.args[0] if exc.args else str(exc)) from exc
    differing = [str(replay) for replay in replays if not replay.report.ok]
    emit([*differing, f"{len(replays)} instances replayed, {len(differing)} differ"])
    return 1 if differing else 0


def _close(store: object) -> None:
    close = getattr(store, "close", None)
    if callable(close):
        close()
