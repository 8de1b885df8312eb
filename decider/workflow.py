"""The workflow: a pure triple of initial state, ``evolve`` and ``decide``; and the translator.

A workflow makes decisions and performs none. ``decide(input, state)`` returns commands,
:func:`translate` turns the input and those commands into workflow events, and
``evolve(state, event)`` folds the events back into state. None of them may do I/O, read the
clock or draw random numbers, so the same history always gives the same state and the same
input against the same state always gives the same events.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, Literal, NamedTuple, Never, TypeAlias, TypeVar

import attrs

from decider.commands import Cancel, Command, Complete, Fail, Publish, Reply, Schedule, Send
from decider.errors import InvalidDecision, WorkflowDefinitionError
from decider.events import (
    Began,
    Cancelled,
    Completed,
    Failed,
    Ignored,
    InitiatedBy,
    Published,
    Received,
    Replied,
    Scheduled,
    Sent,
    WorkflowEvent,
)
from decider.streams import instance_stream
from decider.system import CancelRequested

I = TypeVar("I")  # noqa: E741
S = TypeVar("S")
O = TypeVar("O")  # noqa: E741

OnError: TypeAlias = Literal["skip", "fail"]
"""What happens to an input whose ``decide`` raises: see :class:`Workflow`."""

ON_ERROR_POLICIES: tuple[OnError, ...] = ("skip", "fail")
"""The values ``Workflow(on_error=...)`` accepts."""


def _a_policy(_: object, attribute: attrs.Attribute[OnError], value: object) -> None:
    if value not in ON_ERROR_POLICIES:
        raise WorkflowDefinitionError(
            f"Workflow {attribute.name}={value!r} is not a policy: use 'skip' (the input is "
            "skipped, the instance carries on) or 'fail' (the instance is recorded as Failed)"
        )


def _a_version(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise WorkflowDefinitionError(
            f"Workflow {attribute.name} must be a non-empty string or None, got {value!r}"
        )


def _an_interval(_: object, attribute: attrs.Attribute[int | None], value: object) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise WorkflowDefinitionError(
            f"Workflow {attribute.name} must be a whole number of events, at least 1 "
            f"(or None: no snapshots), got {value!r}"
        )


@attrs.frozen
class Workflow(Generic[I, S, O]):
    """A process manager written as three pure functions.

    ``name`` names the instances' streams (``<name>-<id>``) and must be stable.
    ``initial_state`` is the state before the first event; ``evolve(state, event)`` returns the
    state after a workflow event; ``decide(input, state)`` returns the commands an input leads
    to in that state.

    Options, all keyword-only:

    - ``on_error``: what happens when ``decide`` raises. ``"skip"`` (the default): the input
      is not recorded (a processor logs it in its skipped-inputs stream) and the instance
      carries on as if it never came. ``"fail"``: the input is recorded, then
      ``Failed("decide raised <ExceptionType>: <text>")``, and the instance is over
      (:func:`handle` does it).
    - ``version``: a name for this code of the workflow (``"2024-06-orders-v3"``), recorded in
      the metadata of each instance's ``Began`` event so that a replay check can tell which
      code began an instance. ``None`` (the default) records none.
    - ``snapshot_every``: take a snapshot of an instance's state every this many events
      (``None``, the default: never); ``state_version`` names the shape of the state (change it
      whenever the state's classes change, so that old snapshots are ignored and rebuilt);
      ``state_type`` is the state's type for decoding a snapshot (by default the return
      annotation of ``evolve``). See :mod:`decider.snapshots`.

    >>> Workflow("Fine", None, lambda s, e: s, lambda i, s: [], on_error="fail").on_error
    'fail'
    """

    name: str
    initial_state: S
    evolve: Callable[[S, WorkflowEvent[I, O]], S]
    decide: Callable[[I, S], Sequence[Command[O]]]
    on_error: OnError = attrs.field(default="skip", kw_only=True, validator=_a_policy)
    version: str | None = attrs.field(default=None, kw_only=True, validator=_a_version)
    snapshot_every: int | None = attrs.field(default=None, kw_only=True, validator=_an_interval)
    state_version: str = attrs.field(default="1", kw_only=True, validator=_a_version)
    state_type: Any = attrs.field(default=None, kw_only=True)

    def stream(self, instance_id: str) -> str:
        """The stream of the instance ``instance_id``.

        >>> Workflow("Fine", None, lambda s, e: s, lambda i, s: []).stream("wf_1")
        'Fine-wf_1'
        """
        return instance_stream(self.name, instance_id)


class Lifecycle(enum.Enum):
    """Where an instance is in its life, derived from its events alone."""

    NOT_STARTED = "not_started"
    """No event yet."""
    RUNNING = "running"
    """Began, not ended: inputs are decided upon."""
    COMPLETED = "completed"
    """Completed: a terminal state; later inputs are recorded as :class:`Ignored`."""
    FAILED = "failed"
    """Failed: a terminal state; later inputs are recorded as :class:`Ignored`."""
    CANCELLED = "cancelled"
    """Cancelled: a terminal state; later inputs are recorded as :class:`Ignored`."""

    @property
    def terminal(self) -> bool:
        """Whether the instance has ended: nothing is decided in this state any more.

        >>> Lifecycle.FAILED.terminal, Lifecycle.RUNNING.terminal
        (True, False)
        """
        # A tuple: its members are found by identity, without the enum's hash (a Python call).
        return self in _TERMINAL


def fold(workflow: Workflow[I, S, O], events: Iterable[WorkflowEvent[I, O]]) -> S:
    """The state after ``events``, starting from the workflow's initial state.

    >>> wf = Workflow("Count", 0, lambda s, e: s + 1, lambda i, s: [])
    >>> fold(wf, [Began(), InitiatedBy("x")])
    2
    """
    state = workflow.initial_state
    evolve = workflow.evolve
    for event in events:
        state = evolve(state, event)
    return state


def lifecycle(events: Iterable[WorkflowEvent[I, O]]) -> Lifecycle:
    """The lifecycle status an instance's events imply.

    ``Began`` starts it running; the first of ``Completed``, ``Failed`` or ``Cancelled`` ends
    it, for good.

    >>> lifecycle([Began(), InitiatedBy("x"), Completed()])
    <Lifecycle.COMPLETED: 'completed'>
    >>> lifecycle([Began(), InitiatedBy("x"), Failed("no stock"), Ignored("y", "ended")])
    <Lifecycle.FAILED: 'failed'>
    """
    status = Lifecycle.NOT_STARTED
    for event in events:
        status = _next_status(status, event)
    return status


def _next_status(status: Lifecycle, event: WorkflowEvent[I, O]) -> Lifecycle:
    if status.terminal:
        return status
    ended = _ENDED_BY.get(type(event))
    if ended is not None:
        return ended
    if status is Lifecycle.NOT_STARTED and isinstance(event, Began):
        return Lifecycle.RUNNING
    return status


def translate(begins: bool, input: I, commands: Sequence[Command[O]]) -> list[WorkflowEvent[I, O]]:
    """The workflow events that record ``input`` and the ``commands`` decided for it.

    The first input of an instance (``begins``) gives ``Began`` and ``InitiatedBy(input)``,
    a later one ``Received(input)``; then one event per command, in order.

    Raises :class:`~decider.InvalidDecision` for ``commands`` that are not a list (or tuple)
    of commands, naming what to write instead, and for a command after one that ends the
    instance (``Complete``, ``Fail``, ``Cancel`` come last).

    >>> translate(True, "report", [Send("number?")])
    [Began(), InitiatedBy(message='report'), Sent(message='number?')]
    >>> translate(False, "number", [Send("issue"), Complete()])
    [Received(message='number'), Sent(message='issue'), Completed()]
    >>> translate(False, "number", ["issue"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    decider.errors.InvalidDecision: decide returned 'issue' for 'number', which is not a command...
    """
    if type(commands) is not list and not isinstance(commands, list | tuple):
        raise InvalidDecision(
            f"decide returned {commands!r} for {input!r}: decide must return a list of "
            "commands, e.g. [Send(message)] (wrap a message in Send(...), Publish(...), "
            "Reply(...) or Schedule(after, ...); return [] to do nothing)"
        )
    events: list[WorkflowEvent[I, O]] = (
        [Began(), InitiatedBy(input)] if begins else [Received(input)]
    )
    ended: Command[O] | None = None
    for command in commands:
        if ended is not None:
            raise InvalidDecision(
                f"decide returned {command!r} after {ended!r} for {input!r}: a command that "
                "ends the instance (Complete, Fail, Cancel) must be the last one"
            )
        # The exact type's past tense by dict lookup first: cheaper than _recorded's
        # class-pattern match, which stays the exhaustive fallback.
        past = _PAST_TENSE.get(type(command))
        if past is not None:
            events.append(past(command.message))
        elif type(command) is Complete:
            events.append(Completed())
            ended = command
        else:
            events.append(_recorded(command, input))
            if type(command) in _ENDING:
                ended = command
    return events


_PAST_TENSE: dict[type, Callable[[Any], Any]] = {Send: Sent, Reply: Replied, Publish: Published}
_ENDING = (Complete, Fail, Cancel)


def _recorded(command: Command[O], input: object) -> WorkflowEvent[I, O]:  # noqa: RET503
    match command:
        case Reply(message):
            return Replied(message)
        case Send(message):
            return Sent(message)
        case Publish(message):
            return Published(message)
        case Schedule(after, message):
            return Scheduled(after, message)
        case Complete():
            return Completed()
        case Fail(reason):
            return Failed(reason)
        case Cancel(reason):
            return Cancelled(reason)
        case _:
            _not_a_command(command, input)


def _not_a_command(command: Never, input: object) -> Never:
    """``assert_never`` that says what to write: reached at run time by a non-command."""
    raise InvalidDecision(
        f"decide returned {command!r} for {input!r}, which is not a command: wrap a message "
        "in Send(...), Publish(...), Reply(...) or Schedule(after, ...)"
    )


class Instance(NamedTuple, Generic[S]):
    """A workflow instance as of some revision: its state and lifecycle status.

    ``version`` is the number of events folded into it, so ``version - 1`` is the stream
    revision it reflects (``-1``: no event yet). A named tuple, because one is made for every
    input a processor handles.
    """

    state: S
    status: Lifecycle
    version: int


# The hot paths (advance, handle) run for every input of every instance: module constants
# instead of enum attribute lookups, and the tuple built directly rather than through the
# named tuple's Python-level __new__.
_NOT_STARTED = Lifecycle.NOT_STARTED
_RUNNING = Lifecycle.RUNNING
_new_instance = tuple.__new__

_ENDED_BY: dict[type, Lifecycle] = {
    Completed: Lifecycle.COMPLETED,
    Failed: Lifecycle.FAILED,
    Cancelled: Lifecycle.CANCELLED,
}
"""The terminal events and the status each ends an instance in."""

_IGNORED_BECAUSE: dict[Lifecycle, str] = {
    Lifecycle.COMPLETED: "the workflow instance has completed",
    Lifecycle.FAILED: "the workflow instance has failed",
    Lifecycle.CANCELLED: "the workflow instance was cancelled",
}
"""The terminal statuses and the reason an input that reaches one is ignored for."""
_TERMINAL = tuple(_IGNORED_BECAUSE)


def start(workflow: Workflow[I, S, O]) -> Instance[S]:
    """An instance with no events yet."""
    return Instance(workflow.initial_state, Lifecycle.NOT_STARTED, 0)


def advance(
    workflow: Workflow[I, S, O], instance: Instance[S], events: Iterable[WorkflowEvent[I, O]]
) -> Instance[S]:
    """``instance`` after ``events`` more events.

    >>> wf = Workflow("Count", 0, lambda s, e: s + 1, lambda i, s: [])
    >>> advance(wf, start(wf), [Began(), InitiatedBy("x")])
    Instance(state=2, status=<Lifecycle.RUNNING: 'running'>, version=2)
    """
    state, status, version = instance
    evolve = workflow.evolve
    for event in events:
        state = evolve(state, event)
        version += 1
        # _next_status inlined: this loop runs for every event of every instance.
        kind = type(event)
        if kind is Began:
            if status is _NOT_STARTED:
                status = _RUNNING
        elif kind in _ENDED_BY and (status is _RUNNING or status is _NOT_STARTED):
            status = _ENDED_BY[kind]
    return _new_instance(Instance, (state, status, version))


def handle(
    workflow: Workflow[I, S, O], instance: Instance[S], input: I
) -> list[WorkflowEvent[I, O]]:
    """The events an input adds to an instance: decide, then translate.

    An instance that has ended (completed, failed or cancelled) decides nothing: the input is
    recorded as :class:`Ignored`, so it is neither lost nor acted upon. An exception raised by
    ``decide`` (or :class:`~decider.InvalidDecision` for what it returned) propagates under
    the workflow's ``on_error="skip"`` policy; under ``on_error="fail"`` the input is
    recorded and the instance fails (:func:`record_failure`).

    >>> wf = Workflow("Echo", None, lambda s, e: s, lambda i, s: [Reply(i), Complete()])
    >>> handle(wf, start(wf), "hi")
    [Began(), InitiatedBy(message='hi'), Replied(message='hi'), Completed()]
    >>> handle(wf, Instance(None, Lifecycle.COMPLETED, 4), "again")
    [Ignored(message='again', reason='the workflow instance has completed')]
    """
    state, status, _ = instance
    if status is not _RUNNING and status is not _NOT_STARTED:
        return [Ignored(input, _IGNORED_BECAUSE[status])]
    try:
        return translate(status is _NOT_STARTED, input, workflow.decide(input, state))
    except Exception as error:
        if workflow.on_error != "fail":
            raise
        return record_failure(instance, input, error)


def began_version(workflow: Workflow[I, S, O], event: WorkflowEvent[I, O]) -> str | None:
    """The workflow version to record in ``event``'s metadata (``Metadata.workflow_version``):
    the workflow's ``version`` on ``Began``, ``None`` on every other event.

    >>> wf = Workflow("Job", None, lambda s, e: s, lambda i, s: [], version="v2")
    >>> began_version(wf, Began()), began_version(wf, InitiatedBy("go"))
    ('v2', None)
    """
    return workflow.version if type(event) is Began else None


def record_failure(
    instance: Instance[S], input: I, error: BaseException
) -> list[WorkflowEvent[I, O]]:
    """The events the ``on_error="fail"`` policy records when ``decide`` raised ``error``:
    the input, as it would have been recorded, then ``Failed`` with the exception's text.

    >>> record_failure(Instance(None, Lifecycle.RUNNING, 2), "pay", ValueError("no card"))
    [Received(message='pay'), Failed(reason='decide raised ValueError: no card')]
    """
    events: list[WorkflowEvent[I, O]] = translate(instance.status is _NOT_STARTED, input, [])
    events.append(Failed(f"decide raised {type(error).__name__}: {error}"))
    return events


def handle_cancel(
    workflow: Workflow[Any, S, O],
    instance: Instance[S],
    request: CancelRequested,
    *,
    decides: bool,
) -> list[WorkflowEvent[Any, O]]:
    """The events a cancel request adds to an instance.

    ``decides`` says whether the workflow lists :class:`~decider.CancelRequested` among its
    inputs. If it does, the request is an input like any other (:func:`handle`): ``decide``
    compensates and ends with ``Cancel(reason)`` when it is done. If not, the instance is
    cancelled at once: ``Received(request)``, ``Cancelled(request.reason)``. An instance that
    has ended records the request as ``Ignored``; one that has not started records nothing
    (there is nothing to cancel, and a cancel request never begins an instance).

    >>> wf = Workflow("Job", None, lambda s, e: s, lambda i, s: [])
    >>> running = advance(wf, start(wf), [Began(), InitiatedBy("go")])
    >>> handle_cancel(wf, running, CancelRequested(reason="not needed"), decides=False)
    [Received(message=CancelRequested(reason='not needed')), Cancelled(reason='not needed')]
    >>> handle_cancel(wf, start(wf), CancelRequested(reason="not needed"), decides=False)
    []
    """
    status = instance.status
    if status is _NOT_STARTED:
        return []
    if decides or status is not _RUNNING:
        return handle(workflow, instance, request)
    return [Received(request), Cancelled(request.reason)]
