"""The app's definition: what a service runs. Workflows with their inputs and routes, handlers,
target streams (:class:`AppDefinition`; users build it as
:class:`~decider.processors.client.app.App`, which adds the client's methods).

::

    app = App("traffic-fines")
    app.workflow(workflow, inputs={PoliceReportPublished: lambda m, md: m.police_report_id,
                                   TrafficFineSystemNumberGenerated: by_correlation})
    @app.handler(GenerateTrafficFineSystemNumber, retry=RetryPolicy(max_attempts=5))
    def generate_number(command, command_id): ...
    app.route(IssueTrafficFine, stream="fines-issued")

Registration checks each name and signature at once and raises
:class:`~decider.processors.app.errors.AppDefinitionError` naming the culprit: a workflow or handler
name that holds the stream-name separator (see :mod:`decider.processors.app.streams`), a route that
cannot take ``(message, metadata)``, a handler that cannot take ``(command, command_id)``, a
message type that is not registered with the app's codec.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeAlias

import attrs
from returns.result import Result

from decider import (
    Codec,
    Metadata,
    UnknownMessageType,
    Workflow,
    WorkflowDefinitionError,
)
from decider.processors.app import streams
from decider.processors.app.errors import AppDefinitionError
from decider.processors.app.retry import HandlerFailure, RetryPolicy
from decider.snapshots import state_type_of

Route: TypeAlias = Callable[[Any, Metadata], "str | None"]
"""Maps an input and its metadata to the id of the instance it is for (``None``: none)."""

HandlerResult: TypeAlias = Sequence[Any] | Result[Sequence[Any], HandlerFailure]
"""What a handler returns: its result messages, or a ``returns`` Result of them."""

Handler: TypeAlias = Callable[[Any, str], Any]
"""A command handler: ``handler(command, command_id)`` returning a :data:`HandlerResult`, or an
``async def`` handler whose coroutine does; the id is its idempotency key."""

DEFAULT_POOL_SIZE = 16
"""How many commands an app's service carries out at once unless ``App(pool_size=...)`` says
otherwise (see docs/processors.md for the measurement behind it)."""

DEFAULT_TIMEOUT = 60.0
"""Seconds a handler call may take unless ``timeout=`` says otherwise; past it the call is a
failed attempt (retried, then parked)."""


def by_correlation(message: object, metadata: Metadata) -> str | None:
    """The default route: the input's correlation id, which the processors set to the instance id
    on everything an instance causes (handler results, timers, failures)."""
    return metadata.correlation_id


@attrs.frozen
class InputRoute:
    """One input type of a workflow: its class, its stored type name and its route."""

    cls: type[Any]
    type_name: str
    route: Route


@attrs.frozen
class WorkflowRegistration:
    """A workflow as an App runs it: the workflow and its inputs by stored type name."""

    workflow: Workflow[Any, Any, Any]
    inputs: Mapping[str, InputRoute]
    progress_within: timedelta | None = None
    """How long a running instance may go without a new event before it counts as stuck
    (``None``: never)."""
    stored: str = "events"
    """``"events"`` (event-sourced) or ``"state"`` (a state row and an outbox:
    :mod:`decider.processors.workflows.state_stored`)."""

    @property
    def stream_prefix(self) -> str:
        """The prefix every instance stream of the workflow starts with."""
        return streams.instance_prefix(self.workflow.name)


@attrs.frozen
class HandlerRegistration:
    """A command handler: the type it handles, its name (which names its result streams)."""

    type_name: str
    name: str
    func: Handler
    retry: RetryPolicy
    timeout: float | None = DEFAULT_TIMEOUT
    """Seconds one call may take (``None``: no limit)."""
    concurrency: int | None = None
    """At most this many calls at once (``None``: up to the pool's size)."""
    rate: float | None = None
    """At most this many calls per second (``None``: no limit)."""
    is_async: bool = False
    """Whether ``func`` is an ``async def`` (awaited on the service's event loop)."""
    inline: bool = False
    """Whether its calls may run on the command processor's own thread while they are quick
    (no thread hand-off); see :meth:`AppDefinition.add_handler`."""


class AppDefinition:
    """Everything a :class:`~decider.processors.service.service.Service` runs, registered up front.

    The definition alone: the processors, the service, the operator's tools and the console read
    it. The :class:`~decider.processors.client.app.App` users build extends it with what a
    program outside the service asks of the app (publish, request, cancel).

    Registration checks what it can at once (message types registered with the codec, one
    handler or target stream per command type, unique names) and raises
    :class:`~decider.processors.app.errors.AppDefinitionError` naming the problem.
    """

    def __init__(
        self,
        name: str,
        *,
        codec: Codec | None = None,
        retry: RetryPolicy | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
        partitions: int = 16,
    ) -> None:
        self.name = streams.check_app_name(name)
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise AppDefinitionError(f"partitions must be a positive int, got {partitions!r}")
        self.partitions = partitions
        """How many partitions the workflow work splits into when several processes share it
        (``decider run --partitions auto``; see docs/scaling.md). Fixed per app."""
        self.codec = codec or Codec()
        self.default_retry = retry or RetryPolicy()
        self.pool_size = _check_count(pool_size, "pool_size")
        """How many commands the service carries out at once (sync calls and async ones)."""
        self.workflows: dict[str, WorkflowRegistration] = {}
        self.handlers: dict[str, HandlerRegistration] = {}
        self.routes: dict[str, str] = {}

    # -- registration ---------------------------------------------------------------------

    def workflow(
        self,
        workflow: Workflow[Any, Any, Any],
        inputs: Mapping[type[Any], Route] | Iterable[type[Any]],
        *,
        progress_within: timedelta | None = None,
        stored: str = "events",
    ) -> Workflow[Any, Any, Any]:
        """Run ``workflow`` on ``inputs``: message classes, each with its route (or a plain list
        of classes, all routed :func:`by_correlation`).

        ``progress_within``: a running instance with no new event for longer than that is
        stuck (``decider list --stuck``). ``stored="state"``: keep each instance's state in a
        row and its commands in an outbox instead of its events (SQLite and PostgreSQL; see
        :mod:`decider.processors.workflows.state_stored`); the state's type must be known
        (``evolve``'s return annotation or ``Workflow(state_type=...)``).
        """
        if stored not in ("events", "state"):
            raise AppDefinitionError(f"stored must be 'events' or 'state', got {stored!r}")
        if stored == "state":
            try:
                state_type_of(workflow)
            except WorkflowDefinitionError as exc:
                raise AppDefinitionError(f"state-stored: {exc}") from exc
        if progress_within is not None and progress_within <= timedelta(0):
            raise AppDefinitionError(f"progress_within must be positive, got {progress_within}")
        if workflow.name in self.workflows:
            raise AppDefinitionError(f"workflow {workflow.name!r} is already registered")
        streams.check_part_name(workflow.name, "workflow")
        if any(h.name == workflow.name for h in self.handlers.values()):
            raise AppDefinitionError(
                f"workflow name {workflow.name!r} is already a handler's name (their streams "
                "would mix)"
            )
        pairs: Iterable[tuple[type[Any], Route]] = (
            inputs.items()
            if isinstance(inputs, Mapping)
            else ((cls, by_correlation) for cls in inputs)
        )
        routes: dict[str, InputRoute] = {}
        for cls, route in pairs:
            name = self._type_name(cls, f"input of workflow {workflow.name!r}")
            if not callable(route):
                raise AppDefinitionError(f"the route for {name!r} is not callable: {route!r}")
            _check_signature(route, ("message", "metadata"), f"the route for {name!r}")
            routes[name] = InputRoute(cls, name, route)
        if not routes:
            raise AppDefinitionError(f"workflow {workflow.name!r} needs at least one input type")
        self.workflows[workflow.name] = WorkflowRegistration(
            workflow, routes, progress_within, stored
        )
        return workflow

    def handler(
        self,
        message_type: type[Any],
        *,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        concurrency: int | None = None,
        rate: float | None = None,
        inline: bool = False,
    ) -> Callable[[Handler], Handler]:
        """Decorator: the handler of every ``Send`` of ``message_type`` (see
        :meth:`add_handler` for the options)."""

        def register(func: Handler) -> Handler:
            self.add_handler(
                message_type,
                func,
                name=name,
                retry=retry,
                timeout=timeout,
                concurrency=concurrency,
                rate=rate,
                inline=inline,
            )
            return func

        return register

    def add_handler(
        self,
        message_type: type[Any],
        func: Handler,
        *,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        concurrency: int | None = None,
        rate: float | None = None,
        inline: bool = False,
    ) -> None:
        """Register ``func`` (a function or an ``async def``) as the handler of
        ``message_type``.

        ``timeout``: seconds one call may take before it counts as a failed attempt
        (``None``: no limit); ``concurrency``: at most that many calls at once; ``rate``: at
        most that many calls per second; ``inline``: a synchronous handler that never blocks
        (no network, no lock held by others) may run on the command processor's own thread
        while its recent calls are quick, saving the hand-off to a worker and back (it goes
        back to the workers as soon as its calls are slow). Commands of one workflow instance
        are carried out in the order they were sent, whatever the options.

        WARNING: an ``inline`` handler that hangs holds the command processor's thread until
        it returns (its timeout retries the command on a worker, but cannot stop the call):
        leave ``inline`` off for any handler that waits on something outside the process.
        """
        if timeout is not None and not timeout > 0:
            raise AppDefinitionError(f"timeout must be a positive number of seconds, got {timeout}")
        if concurrency is not None:
            _check_count(concurrency, "concurrency")
        if rate is not None and not rate > 0:
            raise AppDefinitionError(f"rate must be a positive number of calls/s, got {rate}")
        type_name = self._type_name(message_type, "handled command")
        self._check_free(type_name)
        handler_name = name or getattr(func, "__name__", "")
        if not handler_name or handler_name == "<lambda>":
            raise AppDefinitionError(f"the handler of {type_name!r} needs a name (name=...)")
        streams.check_part_name(handler_name, "handler")
        if any(h.name == handler_name for h in self.handlers.values()):
            raise AppDefinitionError(f"handler name {handler_name!r} is already used")
        if handler_name in self.workflows:
            raise AppDefinitionError(
                f"handler name {handler_name!r} is already a workflow's name (their streams "
                "would mix)"
            )
        if not callable(func):
            raise AppDefinitionError(f"the handler of {type_name!r} is not callable: {func!r}")
        _check_signature(func, ("command", "command_id"), f"the handler {handler_name!r}")
        self.handlers[type_name] = HandlerRegistration(
            type_name,
            handler_name,
            func,
            retry or self.default_retry,
            timeout=timeout,
            concurrency=concurrency,
            rate=rate,
            is_async=inspect.iscoroutinefunction(func),
            inline=inline,
        )

    def route(self, message_type: type[Any], *, stream: str) -> None:
        """Append every ``Send`` of ``message_type`` to ``stream`` (for another system to read)."""
        type_name = self._type_name(message_type, "routed command")
        self._check_free(type_name)
        try:
            self.routes[type_name] = streams.check_stream(stream)
        except ValueError as exc:
            raise AppDefinitionError(f"the target stream of {type_name!r}: {exc}") from None

    # -- lookups --------------------------------------------------------------------------

    def workflow_of_stream(self, stream: str) -> WorkflowRegistration | None:
        """The workflow whose instance streams ``stream`` belongs to, if any."""
        if streams.SEPARATOR not in stream:
            return None
        return self.workflows.get(streams.workflow_of(stream))

    def _type_name(self, cls: type[Any], role: str) -> str:
        try:
            return self.codec.registry.name_of(cls)
        except UnknownMessageType:
            raise AppDefinitionError(
                f"{getattr(cls, '__qualname__', cls)!r} ({role}) is not a registered message: "
                "decorate it with @decider.message(...)"
            ) from None

    def _check_free(self, type_name: str) -> None:
        if type_name in self.handlers:
            raise AppDefinitionError(f"{type_name!r} already has a handler")
        if type_name in self.routes:
            raise AppDefinitionError(f"{type_name!r} is already routed to a stream")


def _check_count(value: int, what: str) -> int:
    """``value`` if it is a whole number of at least 1; else :class:`AppDefinitionError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AppDefinitionError(f"{what} must be a whole number of at least 1, got {value!r}")
    return value


def _check_signature(func: Callable[..., Any], params: tuple[str, str], what: str) -> None:
    """Raise :class:`AppDefinitionError` if ``func`` cannot be called with two arguments."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return  # a builtin or extension callable without a signature: it is tried at run time
    try:
        signature.bind(None, None)
    except TypeError as exc:
        name = getattr(func, "__qualname__", repr(func))
        raise AppDefinitionError(
            f"{what} ({name}{signature}) must take ({', '.join(params)}): {exc}"
        ) from None
