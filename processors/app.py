"""The App: what a service runs. Workflows with their inputs and routes, handlers, target streams.

::

    app = App("traffic-fines")
    app.workflow(workflow, inputs={PoliceReportPublished: lambda m, md: m.police_report_id,
                                   TrafficFineSystemNumberGenerated: by_correlation})
    @app.handler(GenerateTrafficFineSystemNumber, retry=RetryPolicy(max_attempts=5))
    def generate_number(command, command_id): ...
    app.route(IssueTrafficFine, stream="fines-issued")

Stream names the processors use (all derived, so a second run finds what the first wrote):

- instance ``<WorkflowName>-<instance id>``;
- handler results ``<handler name>-<command id>``;
- published messages ``topic-<message type>-<command id>``;
- replies ``reply-<message id of the input that caused the reply>``;
- fired timers ``timer-<Scheduled event id>``;
- parked-command ledger ``decider-parked-<app name>``; command failures fed back
  ``decider-failed-<WorkflowName>-<command id>``; skipped inputs
  ``decider-skipped-<processor name>``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeAlias

import attrs
from returns.result import Result

from decider import Codec, Envelope, Metadata, UnknownMessageType, Workflow, event_id, new_id
from decider.processors.errors import AppDefinitionError
from decider.processors.retry import HandlerFailure, RetryPolicy
from decider.stores.protocol import ANY, EventStore, NewEvent

Route: TypeAlias = Callable[[Any, Metadata], "str | None"]
"""Maps an input and its metadata to the id of the instance it is for (``None``: none)."""

HandlerResult: TypeAlias = Sequence[Any] | Result[Sequence[Any], HandlerFailure]
"""What a handler returns: its result messages, or a ``returns`` Result of them."""

Handler: TypeAlias = Callable[[Any, str], HandlerResult]
"""A command handler: ``handler(command, command_id)``; the id is its idempotency key."""

_UUID_LENGTH = 36


def by_correlation(message: object, metadata: Metadata) -> str | None:
    """The default route: the input's correlation id, which the processors set to the instance id
    on everything an instance causes (handler results, timers, failures)."""
    return metadata.correlation_id


def parked_stream(app_name: str) -> str:
    """The stream of an app's parked-command ledger."""
    return f"decider-parked-{app_name}"


def skipped_stream(processor_name: str) -> str:
    """The stream where a processor records the inputs it skipped."""
    return f"decider-skipped-{processor_name}"


def results_stream(handler_name: str, command_id: str) -> str:
    """The stream of one command's handler results: written once, with ``NO_STREAM``."""
    return f"{handler_name}-{command_id}"


def failed_stream(workflow_name: str, command_id: str) -> str:
    """The stream a parked command's ``CommandFailed`` goes to (one per command)."""
    return f"decider-failed-{workflow_name}-{command_id}"


def failed_stream_workflow(stream: str) -> str | None:
    """The workflow name a :func:`failed_stream` is addressed to (``None``: not such a stream).

    Command ids are UUID strings of fixed length, so the name is exact even if it holds dashes.

    >>> failed_stream_workflow(failed_stream("Order-v2", "6f1f3b0e-4c1a-5d8e-9b7a-2f0c1d9e8a47"))
    'Order-v2'
    """
    prefix = "decider-failed-"
    if not stream.startswith(prefix) or len(stream) < len(prefix) + _UUID_LENGTH + 2:
        return None
    return stream[len(prefix) : -(_UUID_LENGTH + 1)]


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

    @property
    def stream_prefix(self) -> str:
        """The prefix every instance stream of the workflow starts with."""
        return f"{self.workflow.name}-"


@attrs.frozen
class HandlerRegistration:
    """A command handler: the type it handles, its name (which names its result streams)."""

    type_name: str
    name: str
    func: Handler
    retry: RetryPolicy


class App:
    """Everything a :class:`~decider.processors.service.Service` runs, registered up front.

    Registration checks what it can at once (message types registered with the codec, one
    handler or target stream per command type, unique names) and raises
    :class:`~decider.processors.errors.AppDefinitionError` naming the problem.
    """

    def __init__(
        self, name: str, *, codec: Codec | None = None, retry: RetryPolicy | None = None
    ) -> None:
        if not name or any(c in name for c in " \t\n/"):
            raise AppDefinitionError(f"app name {name!r} must be non-empty with no spaces or '/'")
        self.name = name
        self.codec = codec or Codec()
        self.default_retry = retry or RetryPolicy()
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
    ) -> Workflow[Any, Any, Any]:
        """Run ``workflow`` on ``inputs``: message classes, each with its route (or a plain list
        of classes, all routed :func:`by_correlation`).

        ``progress_within``: a running instance with no new event for longer than that is
        stuck (``decider list --stuck``).
        """
        if progress_within is not None and progress_within <= timedelta(0):
            raise AppDefinitionError(f"progress_within must be positive, got {progress_within}")
        if workflow.name in self.workflows:
            raise AppDefinitionError(f"workflow {workflow.name!r} is already registered")
        if not workflow.name or "-" in workflow.name[:1]:
            raise AppDefinitionError(f"workflow name {workflow.name!r} is not a valid name")
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
            routes[name] = InputRoute(cls, name, route)
        if not routes:
            raise AppDefinitionError(f"workflow {workflow.name!r} needs at least one input type")
        self.workflows[workflow.name] = WorkflowRegistration(workflow, routes, progress_within)
        return workflow

    def handler(
        self, message_type: type[Any], *, name: str | None = None, retry: RetryPolicy | None = None
    ) -> Callable[[Handler], Handler]:
        """Decorator: the handler of every ``Send`` of ``message_type``."""

        def register(func: Handler) -> Handler:
            self.add_handler(message_type, func, name=name, retry=retry)
            return func

        return register

    def add_handler(
        self,
        message_type: type[Any],
        func: Handler,
        *,
        name: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        """Register ``func`` as the handler of ``message_type`` (see :meth:`handler`)."""
        type_name = self._type_name(message_type, "handled command")
        self._check_free(type_name)
        handler_name = name or getattr(func, "__name__", "")
        if not handler_name or handler_name == "<lambda>":
            raise AppDefinitionError(f"the handler of {type_name!r} needs a name (name=...)")
        if any(h.name == handler_name for h in self.handlers.values()):
            raise AppDefinitionError(f"handler name {handler_name!r} is already used")
        self.handlers[type_name] = HandlerRegistration(
            type_name, handler_name, func, retry or self.default_retry
        )

    def route(self, message_type: type[Any], *, stream: str) -> None:
        """Append every ``Send`` of ``message_type`` to ``stream`` (for another system to read)."""
        type_name = self._type_name(message_type, "routed command")
        self._check_free(type_name)
        if not stream:
            raise AppDefinitionError(f"the target stream of {type_name!r} must not be empty")
        self.routes[type_name] = stream

    # -- the outside ----------------------------------------------------------------------

    def publish(
        self,
        store: EventStore,
        message: object,
        stream: str,
        message_id: str | None = None,
        *,
        correlation_id: str | None = None,
    ) -> str:
        """Append ``message`` to ``stream`` as an input for the workflows; returns its message id.

        With the same ``message_id`` a second publish is recognised: by the store if it goes to
        the same stream (the event id derives from the message id), else by the workflow
        processor, which handles a message id once per instance.
        """
        message_id = message_id or new_id("msg")
        type_name, data, metadata = self.codec.encode_envelope(
            Envelope(message, Metadata(message_id=message_id, correlation_id=correlation_id))
        )
        event = NewEvent(event_id(stream, message_id, 0), type_name, data, metadata)
        store.append(stream, [event], ANY)
        return message_id

    def publish_many(
        self,
        store: EventStore,
        messages: Sequence[object],
        stream: str,
        message_ids: Sequence[str] | None = None,
    ) -> list[str]:
        """Append several inputs to ``stream`` in one append; returns their message ids.

        The same as :meth:`publish` for each message, in one write (one fsync on SQLite).
        """
        if message_ids is not None and len(message_ids) != len(messages):
            raise ValueError(
                f"{len(messages)} messages but {len(message_ids)} message ids were given"
            )
        ids = list(message_ids) if message_ids is not None else [new_id("msg") for _ in messages]
        events = []
        for message, message_id in zip(messages, ids, strict=True):
            type_name, data, metadata = self.codec.encode_envelope(
                Envelope(message, Metadata(message_id=message_id))
            )
            events.append(NewEvent(event_id(stream, message_id, 0), type_name, data, metadata))
        if events:
            store.append(stream, events, ANY)
        return ids

    # -- lookups --------------------------------------------------------------------------

    def workflow_of_stream(self, stream: str) -> WorkflowRegistration | None:
        """The workflow whose instance streams ``stream`` belongs to (longest name wins)."""
        best: WorkflowRegistration | None = None
        for registration in self.workflows.values():
            if stream.startswith(registration.stream_prefix) and (
                best is None or len(registration.workflow.name) > len(best.workflow.name)
            ):
                best = registration
        return best

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
