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
from typing import Any, Generic, NamedTuple, TypeVar, assert_never

import attrs

from decider.commands import Command, Complete, Publish, Reply, Schedule, Send
from decider.events import (
    Began,
    Completed,
    Ignored,
    InitiatedBy,
    Published,
    Received,
    Replied,
    Scheduled,
    Sent,
    WorkflowEvent,
)

I = TypeVar("I")  # noqa: E741
S = TypeVar("S")
O = TypeVar("O")  # noqa: E741


@attrs.frozen
class Workflow(Generic[I, S, O]):
    """A process manager written as three pure functions.

    ``name`` names the instances' streams (``<name>-<id>``) and must be stable.
    ``initial_state`` is the state before the first event; ``evolve(state, event)`` returns the
    state after a workflow event; ``decide(input, state)`` returns the commands an input leads
    to in that state.
    """

    name: str
    initial_state: S
    evolve: Callable[[S, WorkflowEvent[I, O]], S]
    decide: Callable[[I, S], Sequence[Command[O]]]

    def stream(self, instance_id: str) -> str:
        """The stream of the instance ``instance_id``.

        >>> Workflow("Fine", None, lambda s, e: s, lambda i, s: []).stream("wf_1")
        'Fine-wf_1'
        """
        return f"{self.name}-{instance_id}"


class Lifecycle(enum.Enum):
    """Where an instance is in its life, derived from its events alone."""

    NOT_STARTED = "not_started"
    """No event yet."""
    RUNNING = "running"
    """Began, not completed: inputs are decided upon."""
    COMPLETED = "completed"
    """Completed: a terminal state; later inputs are recorded as :class:`Ignored`."""


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

    >>> lifecycle([Began(), InitiatedBy("x"), Completed()])
    <Lifecycle.COMPLETED: 'completed'>
    """
    status = Lifecycle.NOT_STARTED
    for event in events:
        status = _next_status(status, event)
    return status


def _next_status(status: Lifecycle, event: WorkflowEvent[I, O]) -> Lifecycle:
    if isinstance(event, Completed):
        return Lifecycle.COMPLETED
    if status is Lifecycle.NOT_STARTED and isinstance(event, Began):
        return Lifecycle.RUNNING
    return status


def translate(begins: bool, input: I, commands: Sequence[Command[O]]) -> list[WorkflowEvent[I, O]]:
    """The workflow events that record ``input`` and the ``commands`` decided for it.

    The first input of an instance (``begins``) gives ``Began`` and ``InitiatedBy(input)``,
    a later one ``Received(input)``; then one event per command, in order.

    >>> translate(True, "report", [Send("number?")])
    [Began(), InitiatedBy(message='report'), Sent(message='number?')]
    >>> translate(False, "number", [Send("issue"), Complete()])
    [Received(message='number'), Sent(message='issue'), Completed()]
    """
    events: list[WorkflowEvent[I, O]] = (
        [Began(), InitiatedBy(input)] if begins else [Received(input)]
    )
    for command in commands:
        # The exact type's past tense by dict lookup first: cheaper than _recorded's
        # class-pattern match, which stays the exhaustive fallback.
        past = _PAST_TENSE.get(type(command))
        if past is not None:
            events.append(past(command.message))  # type: ignore[union-attr]
        elif type(command) is Complete:
            events.append(Completed())
        else:
            events.append(_recorded(command))
    return events


_PAST_TENSE: dict[type, Callable[[Any], Any]] = {Send: Sent, Reply: Replied, Publish: Published}


def _recorded(command: Command[O]) -> WorkflowEvent[I, O]:
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
        case _:
            assert_never(command)


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
_COMPLETED = Lifecycle.COMPLETED
_new_instance = tuple.__new__


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
        if type(event) is Completed:
            status = _COMPLETED
        elif status is _NOT_STARTED and type(event) is Began:
            status = _RUNNING
    return _new_instance(Instance, (state, status, version))


def handle(
    workflow: Workflow[I, S, O], instance: Instance[S], input: I
) -> list[WorkflowEvent[I, O]]:
    """The events an input adds to an instance: decide, then translate.

    A completed instance decides nothing: the input is recorded as :class:`Ignored`, so it
    is neither lost nor acted upon. An exception raised by ``decide`` propagates.

    >>> wf = Workflow("Echo", None, lambda s, e: s, lambda i, s: [Reply(i), Complete()])
    >>> handle(wf, start(wf), "hi")
    [Began(), InitiatedBy(message='hi'), Replied(message='hi'), Completed()]
    >>> handle(wf, Instance(None, Lifecycle.COMPLETED, 4), "again")
    [Ignored(message='again', reason='the workflow instance has completed')]
    """
    state, status, _ = instance
    if status is _COMPLETED:
        return [Ignored(input, "the workflow instance has completed")]
    return translate(status is _NOT_STARTED, input, workflow.decide(input, state))
