"""The operator's subcommands: ``publish``, ``list``, ``skipped``, ``reset``, ``cancel``,
``fork`` and ``completion``. Every listing takes ``--json`` (one JSON document on stdout)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from decider import Lifecycle
from decider.processors.app.definition import AppDefinition
from decider.processors.app.errors import OperationError
from decider.processors.cli.loading import (
    APP_ENV,
    STORE_ENV,
    CliError,
    UsageError,
    load_app,
    open_uri,
    store_uri,
)
from decider.processors.cli.views import instance_list_lines, skipped_lines, traceback_lines
from decider.processors.client.cancelling import request_cancel
from decider.processors.client.forking import fork
from decider.processors.operate.bulk_fork import fork_many
from decider.processors.operate.listing import InstanceQuery, list_instances
from decider.processors.operate.operations import (
    Reset,
    check_no_service,
    planned_reset,
    position_before,
    publish_json,
    reset_checkpoint,
    resolve_processor,
)
from decider.processors.operate.skipped import (
    NotRedrivable,
    find_skipped,
    list_skipped,
    redrive,
    skipped_event,
)
from decider.stores.protocol import EventStore

__all__ = ["add_operator_commands", "app_arg", "app_and_store", "emit", "emit_json", "parse_time"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """``90s``, ``15m``, ``1h30m``, ``2d`` (or plain seconds) as a timedelta.

    >>> parse_duration("1h30m")
    datetime.timedelta(seconds=5400)
    """
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return timedelta(seconds=float(text))
    if not text or _DURATION.sub("", text):
        raise UsageError(f"{text!r} is not a duration; write e.g. 90s, 15m, 1h30m or 2d")
    return timedelta(seconds=sum(float(n) * _UNITS[unit] for n, unit in _DURATION.findall(text)))


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """An ISO 8601 time (UTC if it names no zone), or a duration meaning that long ago."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        try:
            return (now or datetime.now(UTC)) - parse_duration(text)
        except UsageError:
            raise UsageError(
                f"{text!r} is neither an ISO 8601 time (2026-01-31T12:00:00Z) nor a duration "
                "(15m: fifteen minutes ago)"
            ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def emit(lines: list[str]) -> None:
    """Print ``lines`` on stdout."""
    print("\n".join(lines), flush=True)


def emit_json(doc: object) -> None:
    """Print ``doc`` as one JSON document on stdout."""
    print(json.dumps(doc, indent=2, default=str, ensure_ascii=False), flush=True)


def app_arg(args: argparse.Namespace) -> str:
    """The app a command names: its positional ``APP`` where it takes one (``run``,
    ``diagram``), else ``--app``, else ``$DECIDER_APP``; :class:`UsageError` if none, or if
    the positional and ``--app`` name two different apps."""
    given: str | None = getattr(args, "app_given", None)
    option: str | None = args.app
    if given and option and given != option:
        raise UsageError(f"two apps named: {given!r} and --app {option!r}; give one")
    spec = given or option or os.environ.get(APP_ENV)
    if not spec:
        raise UsageError(f"no app: give --app module:attribute or set {APP_ENV}")
    return spec


@contextlib.contextmanager
def app_and_store(
    args: argparse.Namespace, *, must_exist: bool = True
) -> Iterator[tuple[AppDefinition, EventStore]]:
    """The app and the store a command names; the store is closed afterwards.

    ``must_exist``: an SQLite file that does not exist is an error (a read of a mistyped path);
    else it is created (``publish`` on a fresh store).
    """
    app = load_app(app_arg(args))
    store = open_uri(store_uri(args.store), must_exist=must_exist)
    try:
        yield app, store
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()


def add_operator_commands(commands: Any) -> None:
    """Add this module's subcommands to the ``decider`` parser's subparsers."""
    _publish_parser(commands)
    _list_parser(commands)
    _skipped_parser(commands)
    _reset_parser(commands)
    _cancel_parser(commands)
    _fork_parser(commands)
    completion = commands.add_parser(
        "completion", help="print the shell code that completes decider's arguments"
    )
    completion.add_argument("shell", choices=("bash", "zsh", "fish"))
    completion.set_defaults(command=_completion)


def _common(parser: argparse.ArgumentParser, *, nested: bool = False) -> None:
    """``--app``, ``--store``, ``--json``; ``nested``: on an action's parser, where a value
    left out must not hide the one given before the action (argparse's defaults would)."""
    default: Any = argparse.SUPPRESS if nested else None
    parser.add_argument(
        "--app", default=default, help=f"the App as module:attribute (default: ${APP_ENV})"
    )
    parser.add_argument("--store", default=default, help=f"event store URI (default: ${STORE_ENV})")
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if nested else False,
        help="print one JSON document",
    )


# -- publish ------------------------------------------------------------------------------


def _publish_parser(commands: Any) -> None:
    parser = commands.add_parser("publish", help="publish an input message for the workflows")
    parser.add_argument("type", help="the message's registered type name, e.g. fines.Paid")
    parser.add_argument("data", nargs="?", default="-", help="its JSON (default or -: stdin)")
    parser.add_argument("--stream", help="the stream to append to (default: inputs-<app name>)")
    parser.add_argument("--message-id", help="its message id (the same id is stored once)")
    parser.add_argument("--correlation-id", help="its correlation id")
    _common(parser)
    parser.set_defaults(command=_publish)


def _publish(args: argparse.Namespace) -> int:
    document = sys.stdin.read() if args.data == "-" else args.data
    with app_and_store(args, must_exist=False) as (app, store):
        try:
            published = publish_json(
                store,
                app,
                args.type,
                document,
                stream=args.stream,
                message_id=args.message_id,
                correlation_id=args.correlation_id,
            )
        except OperationError as exc:
            raise UsageError(str(exc)) from exc
    if args.json:
        emit_json(published.as_json())
    else:
        emit([f"published {published.type} {published.message_id} to {published.stream}"])
    return 0


# -- list ---------------------------------------------------------------------------------


def _list_parser(commands: Any) -> None:
    parser = commands.add_parser("list", help="instances by workflow, status and age")
    parser.add_argument("--workflow", help="only this workflow's instances")
    parser.add_argument(
        "--status",
        action="append",
        choices=[m.value for m in Lifecycle if m is not Lifecycle.NOT_STARTED],
        help="only instances in this status (repeatable)",
    )
    for which in ("started", "updated"):
        for side in ("after", "before"):
            parser.add_argument(
                f"--{which}-{side}",
                metavar="TIME",
                help=f"{which} {side} TIME: ISO 8601, or a duration ago (15m, 2h, 1d)",
            )
    parser.add_argument(
        "--stuck",
        nargs="?",
        const="",
        metavar="DURATION",
        help="only running instances with no event for longer than DURATION "
        "(without it: than their workflow's progress_within)",
    )
    parser.add_argument("--limit", type=int, default=100, help="instances per page (default 100)")
    parser.add_argument("--after", type=int, metavar="CURSOR", help="the page after CURSOR")
    _common(parser)
    parser.set_defaults(command=_list)


def _list(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise UsageError(f"--limit must be >= 1, got {args.limit}")
    now = datetime.now(UTC)
    times = {
        f"{w}_{s}": parse_time(getattr(args, f"{w}_{s}"), now)
        for w in ("started", "updated")
        for s in ("after", "before")
        if getattr(args, f"{w}_{s}") is not None
    }
    query = InstanceQuery(
        workflow=args.workflow,
        statuses=frozenset(Lifecycle(s) for s in args.status or ()),
        stuck=args.stuck is not None,
        stuck_for=parse_duration(args.stuck) if args.stuck else None,
        limit=args.limit,
        after=args.after,
        **times,
    )
    with app_and_store(args) as (app, store):
        if query.stuck and query.stuck_for is None:
            _check_progress_within(app, args.workflow)
        try:
            page = list_instances(store, app, query, now)
        except KeyError as exc:
            raise UsageError(exc.args[0]) from exc
    if args.json:
        emit_json(
            {"instances": [i.as_json() for i in page.instances], "next_after": page.next_after}
        )
    else:
        emit(instance_list_lines(page, now))
    return 0


def _check_progress_within(app: AppDefinition, workflow: str | None) -> None:
    """:class:`UsageError` if ``--stuck`` without a duration can find nothing: no workflow
    asked about declares a ``progress_within``."""
    registrations = [r for name, r in app.workflows.items() if workflow in (None, name)]
    if not registrations or any(r.progress_within is not None for r in registrations):
        return  # an unknown workflow is reported by the listing
    which = (
        f"workflow {workflow!r} declares no progress_within"
        if workflow is not None
        else f"no workflow of app {app.name!r} declares a progress_within"
    )
    raise UsageError(
        f"{which}, so --stuck without a duration finds nothing: "
        "give one (--stuck 15m), or declare it when registering the workflow "
        "(app.workflow(..., progress_within=timedelta(minutes=15)))"
    )


# -- skipped ------------------------------------------------------------------------------


def _skipped_parser(commands: Any) -> None:
    parser = commands.add_parser("skipped", help="inputs the processors skipped; re-drive them")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    listing = actions.add_parser("list", help="the skip records (the default)")
    listing.add_argument("--pending", action="store_true", help="only those not re-driven")
    listing.add_argument("--processor", help="only this processor's")
    show = actions.add_parser("show", help="one skip record and the event it skipped")
    show.add_argument("skip_id", help="the skip record's id (or its unambiguous start)")
    again = actions.add_parser("redrive", help="hand skipped events to their processor again")
    which = again.add_mutually_exclusive_group(required=True)
    which.add_argument("skip_id", nargs="?", help="the skip record's id")
    which.add_argument("--all", action="store_true", help="every skip not re-driven yet")
    again.add_argument("--processor", help="with --all: only this processor's")
    _common(parser)
    for sub in (listing, show, again):
        _common(sub, nested=True)
    parser.set_defaults(command=_skipped, pending=False, processor=None)


def _skipped(args: argparse.Namespace) -> int:
    with app_and_store(args) as (app, store):
        processor = resolve(app, args.processor) if args.processor else None
        try:
            if args.action == "show":
                return _skipped_show(store, app, args)
            if args.action == "redrive":
                return _skipped_redrive(store, app, args, processor)
        except NotRedrivable as exc:
            raise CliError(str(exc)) from exc
        skipped = list_skipped(store, app, processor, pending_only=args.pending)
    if args.json:
        emit_json({"skipped": [s.as_json() for s in skipped]})
    else:
        emit(skipped_lines(skipped))
    return 0


def _skipped_show(store: EventStore, app: AppDefinition, args: argparse.Namespace) -> int:
    skipped = find_skipped(store, app, args.skip_id)
    event = skipped_event(store, skipped)
    doc: dict[str, Any] = skipped.as_json()
    doc["event"] = None
    if event is not None:
        doc["event"] = {
            "type": event.type,
            "data": event.data.decode(errors="replace"),
            "metadata": event.metadata.decode(errors="replace"),
            "recorded_at": event.recorded_at.isoformat(),
        }
    if args.json:
        emit_json(doc)
    else:
        emit([f"{key}: {value}" for key, value in doc.items() if key not in {"event", "traceback"}])
        if skipped.traceback:
            emit(["traceback:", *traceback_lines(skipped.traceback)])
        if event is None:
            emit(["event: not found where the record says"])
        else:
            emit([f"event.{key}: {value}" for key, value in doc["event"].items()])
    return 0


def _skipped_redrive(
    store: EventStore, app: AppDefinition, args: argparse.Namespace, processor: str | None
) -> int:
    if args.all:
        chosen = list_skipped(store, app, processor, pending_only=True)
    else:
        chosen = [find_skipped(store, app, args.skip_id)]
    done = [redrive(store, app, skipped) for skipped in chosen]
    if args.json:
        emit_json(
            {
                "redriven": [
                    {"skip_id": r.skip_id, "stream": r.stream, "event_id": r.event_id, "how": r.how}
                    for r in done
                ]
            }
        )
    else:
        emit([f"re-driven {r.skip_id}: {r.how} {r.event_id} in {r.stream}" for r in done])
        if not done:
            emit(["nothing to re-drive"])
    return 0


def resolve(app: AppDefinition, processor: str) -> str:
    """The full name of the processor ``processor`` names; :class:`UsageError` if none."""
    try:
        return resolve_processor(app, processor)
    except OperationError as exc:
        raise UsageError(str(exc)) from exc


# -- reset --------------------------------------------------------------------------------


def _reset_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "reset", help="move a processor's checkpoints (refused while a service runs)"
    )
    parser.add_argument("processor", help="e.g. commands, timers, workflow.<Name>, or full name")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--to", type=int, metavar="POSITION", help="the new checkpoint")
    target.add_argument(
        "--to-time", metavar="TIME", help="handle again what was recorded from TIME on"
    )
    parser.add_argument(
        "--partition",
        type=int,
        metavar="N",
        help="an app that ran partitioned: only partition N's checkpoint (default: every "
        "partition's)",
    )
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    _common(parser)
    parser.set_defaults(command=_reset)


def _reset(args: argparse.Namespace) -> int:
    with app_and_store(args) as (app, store):
        processor = resolve(app, args.processor)
        try:
            # Refused first: a question whose yes would be refused anyway is not asked.
            check_no_service(store, app)
            position = args.to
            if position is None:
                position = position_before(store, parse_time(args.to_time))
            plan = planned_reset(store, app, processor, position, args.partition)
        except OperationError as exc:
            raise CliError(str(exc)) from exc
        if not plan.moved:
            raise CliError(f"nothing changed: {_unchanged(plan)}")
        if not args.yes and not _confirm(f"reset {_moves(plan)}?"):
            raise CliError("not confirmed; nothing changed (--yes skips the question)")
        try:
            done = reset_checkpoint(store, app, processor, position, partition=args.partition)
        except OperationError as exc:
            raise CliError(str(exc)) from exc
    if args.json:
        emit_json(done.as_json())
    else:
        emit([f"{m.name}: checkpoint {_shown(m.previous)} -> {m.position}" for m in done.moved])
    return 0


def _shown(position: int | None) -> str:
    return "-" if position is None else str(position)


def _moves(plan: Reset) -> str:
    """The question's list of what would move (a long list of partitions cut short)."""
    parts = [f"{m.name} from {_shown(m.previous)} to {m.position}" for m in plan.moved]
    if len(parts) > 4:
        parts = [*parts[:3], f"... ({len(parts)} checkpoints in all)"]
    return ", ".join(parts)


def _unchanged(plan: Reset) -> str:
    where = (
        ""
        if plan.partitions is None
        else f" in partition {plan.partition}"
        if plan.partition is not None
        else f" in all {plan.partitions} partitions"
    )
    return f"{plan.processor} already resumes after position {plan.position}{where}"


def _confirm(question: str) -> bool:
    """Ask on stderr, read the answer from stdin: only ``y`` or ``yes`` is a yes."""
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    if not sys.stdin.isatty():
        print(file=sys.stderr)  # the answer was not echoed: end the question's line
    return answer.strip().lower() in ("y", "yes")


# -- cancel -------------------------------------------------------------------------------


def _cancel_parser(commands: Any) -> None:
    parser = commands.add_parser("cancel", help="ask a running instance to cancel")
    parser.add_argument("stream", help="the instance stream, <WorkflowName>-<instance id>")
    parser.add_argument("--reason", required=True, help="why (given to the workflow)")
    _common(parser)
    parser.set_defaults(command=_cancel)


def _cancel(args: argparse.Namespace) -> int:
    with app_and_store(args) as (app, store):
        if app.workflow_of_stream(args.stream) is None:  # a bad argument, as for show
            known = ", ".join(sorted(app.workflows)) or "none"
            raise UsageError(
                f"{args.stream!r} is not the stream of a workflow of {app.name!r} ({known})"
            )
        try:
            request = request_cancel(store, app, args.stream, args.reason)
        except OperationError as exc:
            raise CliError(str(exc)) from exc
    if args.json:
        emit_json(request.as_json())
    elif request.already:
        emit([f"a cancel of {request.stream} was already requested ({request.message_id})"])
    else:
        emit([f"cancel of {request.stream} requested ({request.message_id})"])
    return 0


# -- fork ---------------------------------------------------------------------------------


def _fork_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "fork",
        help="repair an instance: a new generation decides its inputs up to a revision again "
        "with the app's current code",
    )
    parser.add_argument(
        "stream",
        nargs="?",
        help="the instance stream, <WorkflowName>-<instance id> (or a generation's); "
        "left out: the instances of --workflow that --where and --since select",
    )
    parser.add_argument(
        "--at",
        type=int,
        metavar="REVISION",
        help="the new generation takes the inputs recorded up to this revision of STREAM "
        "(required with STREAM)",
    )
    _bulk_fork_arguments(parser)
    parser.add_argument("--reason", required=True, help="why (recorded in the fork's event)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print what the new generation would record, and write nothing",
    )
    _common(parser)
    parser.set_defaults(command=_fork)


def _fork(args: argparse.Namespace) -> int:
    if args.stream is None:
        return _fork_many(args)
    if args.workflow is not None or args.where or args.since is not None:
        raise UsageError("--workflow, --where and --since select instances: give them, or STREAM")
    if args.at is None:
        raise UsageError("fork STREAM needs --at REVISION")
    with app_and_store(args) as (app, store):
        if app.workflow_of_stream(args.stream) is None:  # a bad argument, as for cancel
            known = ", ".join(sorted(app.workflows)) or "none"
            raise UsageError(
                f"{args.stream!r} is not the stream of a workflow of {app.name!r} ({known})"
            )
        try:
            plan = fork(
                app, store, args.stream, at=args.at, reason=args.reason, dry_run=args.dry_run
            )
        except OperationError as exc:
            raise CliError(str(exc)) from exc
    if args.json:
        emit_json({**plan.as_json(), "dry_run": args.dry_run})
        return 0
    lines = plan.lines()
    if args.dry_run and not plan.already:
        lines.insert(0, "dry run: nothing is written")
    emit(lines)
    return 0


def _bulk_fork_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``decider fork`` without STREAM: which instances to fork."""
    parser.add_argument(
        "--workflow",
        metavar="NAME",
        help="without STREAM: fork this workflow's instances that --where and --since select, "
        "each at the input before the first difference replay-check finds",
    )
    parser.add_argument(
        "--where",
        action="append",
        choices=[*(m.value for m in Lifecycle if m is not Lifecycle.NOT_STARTED), "stuck"],
        help="with --workflow: only instances in this status, or stuck (repeatable; "
        "default: any status)",
    )
    parser.add_argument(
        "--since",
        metavar="TIME",
        help="with --workflow: only instances with an event after TIME (ISO 8601, or a "
        "duration ago: 15m, 2h, 1d)",
    )


def _fork_many(args: argparse.Namespace) -> int:
    if args.workflow is None:
        raise UsageError("give STREAM and --at, or --workflow NAME to fork instances in bulk")
    if args.at is not None:
        raise UsageError(
            "--at goes with STREAM: in bulk each instance is forked where it first differs"
        )
    now = datetime.now(UTC)
    where = set(args.where or ())
    query = InstanceQuery(
        workflow=args.workflow,
        statuses=frozenset(Lifecycle(s) for s in where - {"stuck"}),
        stuck="stuck" in where,
        updated_after=parse_time(args.since, now) if args.since is not None else None,
        limit=None,
    )
    with app_and_store(args) as (app, store):
        try:
            report = fork_many(store, app, query, reason=args.reason, dry_run=args.dry_run, now=now)
        except KeyError as exc:
            raise UsageError(exc.args[0]) from exc
        except OperationError as exc:
            raise UsageError(str(exc)) from exc
    if args.json:
        emit_json(report.as_json())
    else:
        emit(report.lines())
    if not report.forked:
        done = "would be forked" if args.dry_run else "was forked"
        raise CliError(f"nothing {done} ({len(report.instances)} instance(s) selected)")
    return 0


# -- completion ---------------------------------------------------------------------------


def _completion(args: argparse.Namespace) -> int:
    try:
        from argcomplete.shell_integration import shellcode
    except ImportError:
        raise CliError(
            "shell completion needs argcomplete: pip install 'decider-workflows[completion]'"
        ) from None
    sys.stdout.write(shellcode(["decider"], shell=args.shell))
    return 0
