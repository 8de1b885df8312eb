"""Given-when-then specifications of a workflow, for plain pytest tests.

``given`` builds a state the workflow can reach, ``when`` handles one input exactly as a
processor would (:func:`decider.handle`, :func:`decider.handle_cancel` for a cancel request),
and each ``then_*`` checks one aspect of the result, failing with an :class:`AssertionError`
that shows the difference element by element.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Generic, Self, TypeVar, assert_never, cast

import attrs

from decider.commands import Cancel, Command, Complete, Fail, Publish, Reply, Schedule, Send
from decider.errors import UnknownMessageType
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
from decider.messages import REGISTRY, MessageRegistry
from decider.models import model_kind
from decider.system import CancelRequested
from decider.testing.diff import sequence_diff, value_diff
from decider.workflow import Instance, Lifecycle, Workflow, advance, handle, handle_cancel, start

I = TypeVar("I")  # noqa: E741
S = TypeVar("S")
O = TypeVar("O")  # noqa: E741
E = TypeVar("E", bound=BaseException)

WORKFLOW_EVENT_TYPES: tuple[type, ...] = (
    Began,
    InitiatedBy,
    Received,
    Replied,
    Sent,
    Published,
    Scheduled,
    Completed,
    Failed,
    Cancelled,
    Ignored,
)
"""The classes of workflow events: a given item of one of them is folded, not handled."""


def is_workflow_event(item: object) -> bool:
    """Whether ``item`` is a workflow event rather than an input message.

    >>> is_workflow_event(Completed()), is_workflow_event("an input")
    (True, False)
    """
    return isinstance(item, WORKFLOW_EVENT_TYPES)


def command_of(event: WorkflowEvent[Any, O]) -> Command[O] | None:
    """The command an outbox event records, or ``None`` for an event that records an input.

    The inverse of the translator for commands: ``Sent(m)`` came from ``Send(m)``, and so on.

    >>> command_of(Sent("issue")), command_of(Received("number"))
    (Send(message='issue'), None)
    """
    match event:
        case Replied(message):
            return Reply(message)
        case Sent(message):
            return Send(message)
        case Published(message):
            return Publish(message)
        case Scheduled(after, message):
            return Schedule(after, message)
        case Completed():
            return Complete()
        case Failed(reason):
            return Fail(reason)
        case Cancelled(reason):
            return Cancel(reason)
        case Began() | InitiatedBy() | Received() | Ignored():
            return None
        case _:
            assert_never(event)


@attrs.frozen
class _Shown:
    """A placeholder in a failure message, shown as its text and equal to nothing else."""

    text: str

    def __repr__(self) -> str:
        return self.text


def unregistered(events: Sequence[WorkflowEvent[I, O]], registry: MessageRegistry) -> str | None:
    """Why ``events`` could not be stored: the first message of a message class (attrs,
    dataclass, pydantic) that ``registry`` does not know; ``None`` if there is none.

    Values of other types (``str``, ``int``: handy in small tests) are not checked.
    """
    for event in events:
        message = getattr(event, "message", None)
        if message is None or model_kind(type(message)) is None:
            continue
        try:
            registry.name_of(type(message))
        except UnknownMessageType:
            command = command_of(event)
            return (
                f"{command if command is not None else event!r}: {type(message).__qualname__} "
                "is not a registered message, so a service could not store it and would skip "
                'the input; decorate the class with @decider.message("<stable type name>")'
            )
    return None


@attrs.frozen
class WorkflowSpec(Generic[I, S, O]):
    """Given-when-then tests of one workflow.

    ``spec.given(*history).when(input).then_commands(...)``: see :meth:`given`.

    Every message of a message class that an input or a decision carries must be registered
    in ``registry`` (a service could not store it otherwise): the test fails at once, naming
    it. ``registry=None`` turns the check off. ``decides_cancel`` says whether the workflow
    lists :class:`~decider.CancelRequested` among its inputs, as the App it runs in would: if
    not, a cancel request cancels the instance at once instead of reaching ``decide``.
    """

    workflow: Workflow[I, S, O]
    registry: MessageRegistry | None = attrs.field(default=REGISTRY, kw_only=True)
    decides_cancel: bool = attrs.field(default=True, kw_only=True)

    def given(self, *history: I | CancelRequested | WorkflowEvent[I, O]) -> Given[I, S, O]:
        """The instance after ``history``: past inputs and workflow events, in order.

        An input is handled through ``decide`` and the translator, exactly as a processor
        would, so the given state is one the workflow can reach; a workflow event is folded
        as it is. Raises :class:`AssertionError` if ``decide`` rejects a given input.
        """
        instance = start(self.workflow)
        events: list[WorkflowEvent[I, O]] = []
        for index, item in enumerate(history):
            if is_workflow_event(item):
                added: list[WorkflowEvent[I, O]] = [cast("WorkflowEvent[I, O]", item)]
            else:
                try:
                    added = deliver(self.workflow, instance, cast(I, item), self.decides_cancel)
                except Exception as exc:
                    raise AssertionError(
                        f"given #{index} {item!r} cannot happen: decide raised {exc!r}; a given "
                        "history must be one the workflow can reach"
                    ) from exc
                _check_registered(added, self.registry, f"given #{index} {item!r}")
            instance = advance(self.workflow, instance, added)
            events.extend(added)
        return Given(
            self.workflow,
            instance,
            tuple(events),
            registry=self.registry,
            decides_cancel=self.decides_cancel,
        )

    def when(self, input: I | CancelRequested) -> Outcome[I, S, O]:
        """The outcome of ``input`` as the first input of a new instance."""
        return self.given().when(input)


@attrs.frozen
class Given(Generic[I, S, O]):
    """An instance built from a given history, ready for :meth:`when`."""

    workflow: Workflow[I, S, O]
    instance: Instance[S]
    history: tuple[WorkflowEvent[I, O], ...]
    """Every event of the instance's stream so far."""
    registry: MessageRegistry | None = attrs.field(default=REGISTRY, kw_only=True)
    decides_cancel: bool = attrs.field(default=True, kw_only=True)

    def when(self, input: I | CancelRequested) -> Outcome[I, S, O]:
        """Handle ``input`` as a processor would; an exception ``decide`` raises is kept.

        Fails at once if the input or a decision carries a message that is not registered.
        """
        try:
            events = deliver(self.workflow, self.instance, input, self.decides_cancel)
        except Exception as exc:
            return Outcome(self, input, None, exc)
        _check_registered(events, self.registry, f"when {input!r}")
        return Outcome(self, input, tuple(events), None)


def deliver(
    workflow: Workflow[I, S, O],
    instance: Instance[S],
    input: I | CancelRequested,
    decides_cancel: bool,
) -> list[WorkflowEvent[I, O]]:
    """The events ``input`` adds to ``instance``, as a processor records them: a cancel
    request through :func:`decider.handle_cancel`, any other input through
    :func:`decider.handle`."""
    if isinstance(input, CancelRequested):
        return handle_cancel(workflow, instance, input, decides=decides_cancel)
    return handle(workflow, instance, input)


def _check_registered(
    events: list[WorkflowEvent[I, O]], registry: MessageRegistry | None, where: str
) -> None:
    if registry is None:
        return
    problem = unregistered(events, registry)
    if problem is not None:
        raise AssertionError(f"{where}: {problem}")


@attrs.frozen
class Outcome(Generic[I, S, O]):
    """What handling one input did; each ``then_*`` asserts one aspect and returns ``self``.

    ``events`` is ``None`` exactly when ``decide`` raised ``error``.
    """

    given: Given[I, S, O]
    input: I | CancelRequested
    events: tuple[WorkflowEvent[I, O], ...] | None
    error: Exception | None

    @property
    def recorded(self) -> tuple[WorkflowEvent[I, O], ...]:
        """The events the input added; :class:`AssertionError` if ``decide`` raised."""
        if self.events is None:
            raise AssertionError(
                f"decide raised {self.error!r} for {self.input!r} in state "
                f"{self.given.instance.state!r}"
            ) from self.error
        return self.events

    @property
    def commands(self) -> tuple[Command[O], ...]:
        """The commands decided for the input, in order (none if it was ignored)."""
        return tuple(c for c in map(command_of, self.recorded) if c is not None)

    @property
    def instance(self) -> Instance[S]:
        """The instance after the input's events."""
        return advance(self.given.workflow, self.given.instance, self.recorded)

    @property
    def state(self) -> S:
        """The state after the input's events."""
        return self.instance.state

    @property
    def history(self) -> tuple[WorkflowEvent[I, O], ...]:
        """The whole stream: the given history, then the input's events."""
        return self.given.history + self.recorded

    def then_commands(self, *expected: Command[O]) -> Self:
        """Assert that ``decide`` returned exactly ``expected``, in order."""
        return self._check(sequence_diff("commands", expected, self.commands))

    def then_nothing(self) -> Self:
        """Assert that the input was handled without raising and led to no command."""
        return self._check(sequence_diff("commands", (), self.commands))

    def then_events(self, *expected: WorkflowEvent[I, O]) -> Self:
        """Assert that the input added exactly ``expected`` to the stream, in order."""
        return self._check(sequence_diff("events", expected, self.recorded))

    def then_history(self, *expected: WorkflowEvent[I, O]) -> Self:
        """Assert the whole stream (given history, then the input's events) is ``expected``."""
        return self._check(sequence_diff("history events", expected, self.history))

    def then_state(self, expected: S) -> Self:
        """Assert the state after the input's events equals ``expected``."""
        return self._check(value_diff("state", expected, self.state))

    def then_completed(self) -> Self:
        """Assert the instance has completed after the input."""
        return self._ended(Lifecycle.COMPLETED, None)

    def then_failed(self, match: str | None = None) -> Self:
        """Assert the instance has failed after the input, with ``match`` (a regular
        expression) found in the reason if given."""
        return self._ended(Lifecycle.FAILED, match)

    def then_cancelled(self, match: str | None = None) -> Self:
        """Assert the instance was cancelled after the input, with ``match`` (a regular
        expression) found in the reason if given."""
        return self._ended(Lifecycle.CANCELLED, match)

    def _ended(self, expected: Lifecycle, match: str | None) -> Self:
        status = self.instance.status
        if status is not expected:
            return self._check(f"expected {expected.value}, the instance is {status}")
        if match is None:
            return self
        reason = next((e.reason for e in self.history if isinstance(e, Failed | Cancelled)), "")
        return self._check(
            None
            if re.search(match, reason)
            else f"the instance is {status.value}, but {match!r} is not in its reason {reason!r}"
        )

    def then_ignored(self) -> Self:
        """Assert the input was recorded as :class:`~decider.Ignored` (it reached an instance
        that had ended) and nothing else."""
        match self.recorded:
            case (Ignored(message=message),) if message == self.input:
                return self
        expected = _Shown(f"Ignored(message={self.input!r}, reason=...)")
        return self._check(sequence_diff("events", [expected], self.recorded))

    def then_raises(self, expected: type[E], match: str | None = None) -> E:
        """Assert ``decide`` raised ``expected`` (with ``match`` found in its message); return it.

        ``match`` is a regular expression searched for in ``str(error)``, as in
        ``pytest.raises``.
        """
        error = self.error
        if error is None:
            raise AssertionError(
                f"expected {expected.__name__} to be raised; the input was handled: "
                f"{list(self.recorded)!r}"
            )
        if not isinstance(error, expected):
            raise AssertionError(
                f"expected {expected.__name__} to be raised, got {error!r}"
            ) from error
        if match is not None and not re.search(match, str(error)):
            raise AssertionError(
                f"{expected.__name__} was raised, but {match!r} is not in its message "
                f"{str(error)!r}"
            ) from error
        return error

    def _check(self, failure: str | None) -> Self:
        if failure is not None:
            raise AssertionError(f"{failure}\nwhen: {self.input!r}")
        return self
