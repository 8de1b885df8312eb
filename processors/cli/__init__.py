"""The ``decider`` command line: run an App as a service, and look at what it stored.

::

    decider run samples.traffic_fine:app --store sqlite:///events.db
    decider show IssueTrafficFineForSpeedingViolation-PR-1 --app samples.traffic_fine:app
    decider status --app samples.traffic_fine:app --limit 5
    decider parked --app samples.traffic_fine:app
    decider retry <command-id> --app samples.traffic_fine:app

``--store`` defaults to ``$DECIDER_STORE`` and ``--app`` to ``$DECIDER_APP``. Exit status: 0
done, 1 an operation failed (a store error, a command that is not parked, a stream without
events), 2 a bad argument; an error is one ``decider: error: ...`` line on stderr.

argparse (stdlib) rather than click or typer: five subcommands do not justify a dependency.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import logging
import os
import sys
from collections.abc import Iterator, Sequence

from decider.processors.app import App
from decider.processors.base import LOGGER
from decider.processors.cli.loading import (
    APP_ENV,
    STORE_ENV,
    CliError,
    UsageError,
    load_app,
    open_uri,
    store_uri,
)
from decider.processors.cli.running import LOG_FORMAT, EarlySignals, run_service
from decider.processors.cli.views import instance_lines, parked_lines, status_lines
from decider.processors.errors import NotParked
from decider.processors.handler_status import handler_lines, handler_status
from decider.processors.queries import list_parked, retry_parked, show, status
from decider.processors.service import Service
from decider.stores.errors import StoreError
from decider.stores.protocol import EventStore

__all__ = ["CliError", "UsageError", "build_parser", "main"]

DISTRIBUTION = "decider-workflows"
"""The name this project is installed under (``pip install decider-workflows``)."""

LOG_LEVEL_ENV = "DECIDER_LOG_LEVEL"
"""The environment variable that gives ``decider run``'s log level when ``--log-level`` is not
given."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``decider`` command line; returns the exit status (the console script's entry)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.command(args)
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

    run = commands.add_parser("run", help="run an app's processors until SIGINT/SIGTERM")
    run.add_argument("app", help="the App as module:attribute, e.g. samples.traffic_fine:app")
    run.add_argument("--store", help=store_help)
    run.add_argument(
        "--log-level",
        default=os.environ.get(LOG_LEVEL_ENV, "INFO"),
        help=f"DEBUG, INFO, WARNING or ERROR (default: ${LOG_LEVEL_ENV} or INFO)",
    )
    run.add_argument(
        "--progress-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="log a progress line this often while it changes; 0: never (default: 10)",
    )
    run.add_argument("--batch-size", type=int, default=500, help="inputs per transaction")
    run.set_defaults(command=_run)

    show_cmd = commands.add_parser("show", help="an instance's history and folded state")
    show_cmd.add_argument("stream", help="the instance stream, <WorkflowName>-<instance id>")
    show_cmd.add_argument("--app", help=app_help)
    show_cmd.add_argument("--store", help=store_help)
    show_cmd.set_defaults(command=_show)

    status_cmd = commands.add_parser("status", help="instances by status, and parked commands")
    status_cmd.add_argument("--app", help=app_help)
    status_cmd.add_argument("--store", help=store_help)
    status_cmd.add_argument("--workflow", help="only this workflow's instances")
    status_cmd.add_argument(
        "--limit", type=int, default=10, help="stream names listed per status (default: 10)"
    )
    status_cmd.set_defaults(command=_status)

    parked = commands.add_parser("parked", help="the commands parked after their retries")
    parked.add_argument("--app", help=app_help)
    parked.add_argument("--store", help=store_help)
    parked.set_defaults(command=_parked)

    retry = commands.add_parser("retry", help="carry a parked command out again")
    retry.add_argument("command_id", help="the parked command's id (see `decider parked`)")
    retry.add_argument("--app", help=app_help)
    retry.add_argument("--store", help=store_help)
    retry.set_defaults(command=_retry)
    return parser


def _app_arg(args: argparse.Namespace) -> str:
    spec: str | None = args.app or os.environ.get(APP_ENV)
    if not spec:
        raise UsageError(f"no app: give --app module:attribute or set {APP_ENV}")
    return spec


def _run(args: argparse.Namespace) -> int:
    level = logging.getLevelName(str(args.log_level).upper())
    if not isinstance(level, int):
        raise UsageError(f"unknown log level {args.log_level!r}; use DEBUG, INFO, WARNING, ERROR")
    if args.progress_interval < 0 or args.batch_size < 1:
        raise UsageError("--progress-interval must be >= 0 and --batch-size >= 1")
    with EarlySignals() as early:
        app = load_app(args.app)
        uri = store_uri(args.store)
        store = open_uri(uri)
        try:
            try:
                service = Service(app, store, batch_size=args.batch_size)
            except (TypeError, ValueError) as exc:
                raise UsageError(str(exc)) from exc
            logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
            LOGGER.setLevel(level)
            if early.received.is_set():
                LOGGER.info("stop requested before app %r started: nothing to do", app.name)
                return 0
            LOGGER.info("running app %r (%s) on %s", app.name, args.app, uri)
            try:
                run_service(service, args.progress_interval, LOGGER, early.received)
            except TimeoutError as exc:
                raise CliError(f"the service did not stop in time: {exc}") from exc
        finally:
            _close(store)
    return 0


@contextlib.contextmanager
def _app_and_store(args: argparse.Namespace) -> Iterator[tuple[App, EventStore]]:
    """The app and the store a read-side command names; the store is closed afterwards."""
    app = load_app(_app_arg(args))
    store = open_uri(store_uri(args.store), must_exist=True)
    try:
        yield app, store
    finally:
        _close(store)


def _show(args: argparse.Namespace) -> int:
    with _app_and_store(args) as (app, store):
        try:
            view = show(store, app, args.stream)
        except KeyError as exc:
            raise UsageError(exc.args[0] if exc.args else str(exc)) from exc
        if not view.history:
            raise CliError(f"stream {args.stream!r} has no events")
        _print(instance_lines(app, view))
    return 0


def _status(args: argparse.Namespace) -> int:
    if args.limit < 0:
        raise UsageError(f"--limit must be >= 0, got {args.limit}")
    with _app_and_store(args) as (app, store):
        try:
            instances = status(store, app, args.workflow)
        except KeyError as exc:
            raise UsageError(exc.args[0] if exc.args else str(exc)) from exc
        _print(status_lines(app, instances, list_parked(store, app), args.limit))
        _print(handler_lines(handler_status(store, app)))
    return 0


def _parked(args: argparse.Namespace) -> int:
    with _app_and_store(args) as (app, store):
        _print(parked_lines(list_parked(store, app)))
    return 0


def _retry(args: argparse.Namespace) -> int:
    with _app_and_store(args) as (app, store):
        try:
            request = retry_parked(store, app, args.command_id)
        except NotParked as exc:
            raise CliError(str(exc)) from exc
        print(
            f"retry of {args.command_id} requested ({request}); "
            "a running service carries it out again"
        )
    return 0


def _print(lines: list[str]) -> None:
    print("\n".join(lines), flush=True)


def _close(store: object) -> None:
    close = getattr(store, "close", None)
    if callable(close):
        close()
