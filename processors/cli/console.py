"""The ``decider diagram`` and ``decider console`` subcommands.

::

    decider diagram samples.traffic_fine:app IssueTrafficFineForSpeedingViolation
    decider diagram APP WORKFLOW --store URI --observed          # what the instances did
    decider diagram APP WORKFLOW --store URI --instance STREAM   # one instance's path
    decider console --app APP --store URI [--port 8765] [--allow-actions]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from datetime import timedelta
from types import FrameType
from typing import Any

from decider.diagram import Diagram, path_classes, to_mermaid
from decider.processors.cli.loading import APP_ENV, UsageError, load_app, open_uri, store_uri
from decider.processors.console import data
from decider.processors.console.server import Console, serve
from decider.processors.operate.queries import show


def add_commands(commands: Any, app_help: str, store_help: str) -> None:
    """Add ``diagram`` and ``console`` to the ``decider`` subcommands (an argparse subparsers
    action)."""
    diagram = commands.add_parser(
        "diagram", help="a workflow's state diagram (Mermaid), from its decide and evolve"
    )
    diagram.add_argument("app", help="the App as module:attribute, e.g. samples.traffic_fine:app")
    diagram.add_argument("workflow", help="the workflow's name")
    diagram.add_argument("--store", help=f"{store_help}; needed by --observed and --instance")
    shown = diagram.add_mutually_exclusive_group()
    shown.add_argument(
        "--observed", action="store_true", help="the transitions the stored instances took, counted"
    )
    shown.add_argument(
        "--instance", metavar="STREAM", help="this instance's path on the definition"
    )
    diagram.add_argument(
        "--seed", type=int, default=0, help="seed of the generated inputs (default: 0)"
    )
    diagram.set_defaults(command=run_diagram)

    console = commands.add_parser("console", help="serve the web console (loopback by default)")
    console.add_argument("--app", help=app_help)
    console.add_argument("--store", help=store_help)
    console.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    console.add_argument("--port", type=int, default=8765, help="port; 0: any free one (8765)")
    console.add_argument(
        "--allow-actions",
        action="store_true",
        help="allow retrying parked commands and re-driving skipped inputs, with a token",
    )
    console.add_argument(
        "--stuck-after",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a running instance with no event for this long is stuck (default: each "
        "workflow's progress_within, as for 'decider list --stuck')",
    )
    console.set_defaults(command=run_console)


def run_diagram(args: argparse.Namespace) -> int:
    """Print the diagram ``args`` ask for as Mermaid text."""
    app = load_app(args.app)
    if args.workflow not in app.workflows:
        known = ", ".join(sorted(app.workflows)) or "none"
        raise UsageError(f"no workflow {args.workflow!r} in app {app.name!r} (known: {known})")
    if (args.observed or args.instance) and not (args.store or os.environ.get("DECIDER_STORE")):
        raise UsageError("--observed and --instance read the store: give --store URI")
    if args.observed:
        with _store(args.store) as store:
            print(to_mermaid(data.observed_diagram(store, app, args.workflow)))
        return 0
    definition = _definition(app, args.workflow, args.seed)
    if args.instance is None:
        print(to_mermaid(definition))
        return 0
    with _store(args.store) as store:
        try:
            view = show(store, app, args.instance)
        except KeyError as exc:
            raise UsageError(str(exc.args[0])) from exc
        if view.workflow != args.workflow or not view.history:
            raise UsageError(f"{args.instance!r} is not an instance of {args.workflow!r}")
        error = data.is_error(view, data.parked_of(store, app, args.instance))
        drawn = data.instance_diagram(app, view, definition, error=error)
        print(to_mermaid(drawn.diagram, path_classes(drawn.diagram, drawn.steps, error=error)))
    return 0


def _definition(app: Any, workflow: str, seed: int) -> Diagram:
    try:
        return data.definition(app, workflow, seed=seed)
    except ModuleNotFoundError as exc:
        if exc.name == "hypothesis":
            raise UsageError(
                "diagrams draw inputs with hypothesis: pip install 'decider-workflows[console]'"
            ) from exc
        raise


class _store:
    """The store a command names, opened (it must exist) and closed afterwards."""

    def __init__(self, uri: str | None) -> None:
        self.store = open_uri(store_uri(uri), must_exist=True)

    def __enter__(self) -> Any:
        return self.store

    def __exit__(self, *exc: object) -> None:
        close = getattr(self.store, "close", None)
        if callable(close):
            close()


def run_console(args: argparse.Namespace) -> int:
    """Serve the console until SIGINT or SIGTERM."""
    spec = args.app or os.environ.get(APP_ENV)
    if not spec:
        raise UsageError(f"no app: give --app module:attribute or set {APP_ENV}")
    if not 0 <= args.port <= 65535 or (args.stuck_after is not None and args.stuck_after <= 0):
        raise UsageError("--port must be 0-65535 and --stuck-after positive")
    app = load_app(spec)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    with _store(args.store) as store:
        console = Console(
            app,
            store,
            actions=args.allow_actions,
            stuck_after=(
                timedelta(seconds=args.stuck_after) if args.stuck_after is not None else None
            ),
        )
        try:
            serve(console, args.host, args.port, lambda line: print(line, flush=True), stop)
        except OSError as exc:
            raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc}") from exc
        finally:
            signal.signal(signal.SIGTERM, previous)
    print("decider console stopped", file=sys.stderr)
    return 0
