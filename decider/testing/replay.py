"""Replay checks: would the current code record what a recorded history recorded?

Before deploying a new ``decide`` or ``evolve``, replay the histories of instances recorded by
the old code: every recorded input is handled again, on the state folded from the recorded
events before it, exactly as a processor would handle it now; the events it produces must be
the events recorded for it. The first event that differs is reported, with the input that led
to it: an instance that would decide differently mid-flight (a command dropped, a different
message sent, a timer not scheduled) would carry on along a path its history does not show.

>>> from decider import Began, InitiatedBy, Send, Sent, Workflow
>>> old = [Began(), InitiatedBy("o"), Sent("pay")]
>>> new = Workflow("Shop", None, lambda s, e: s, lambda i, s: [Send("ship")])
>>> print(replay_check(new, old))
Shop: differs at #2 (input 'o' at #1): recorded Sent(message='pay'), now Sent(message='ship')
  field message: expected 'pay', actual 'ship'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import attrs

from decider.events import Began, Ignored, InitiatedBy, Received, WorkflowEvent
from decider.testing.diff import describe, field_diff
from decider.testing.spec import deliver
from decider.workflow import Workflow, advance, start

I = TypeVar("I")  # noqa: E741
S = TypeVar("S")
O = TypeVar("O")  # noqa: E741

_INPUTS = (InitiatedBy, Received, Ignored)


@attrs.frozen
class ReplayDifference:
    """Where a replay first parted from the recorded history.

    ``revision`` is the index of the event in the history (its stream revision),
    ``input_revision`` the index of the event that recorded the input being replayed,
    ``recorded`` the event the history holds there and ``replayed`` the one the current code
    produces (``None`` on the side that has no event there); ``error`` is set instead of
    ``replayed`` when ``decide`` or ``evolve`` now raises.
    """

    revision: int
    input_revision: int
    input: Any
    recorded: WorkflowEvent[Any, Any] | None
    replayed: WorkflowEvent[Any, Any] | None
    error: str | None = None

    def __str__(self) -> str:
        where = f"differs at #{self.revision} (input {self.input!r} at #{self.input_revision})"
        if self.error is not None:
            return f"{where}: {self.error}"
        lines = [f"{where}: recorded {_shown(self.recorded)}, now {_shown(self.replayed)}"]
        lines.extend(f"  field {line}" for line in field_diff(self.recorded, self.replayed))
        return "\n".join(lines)


@attrs.frozen
class ReplayReport:
    """The outcome of replaying one recorded history: ``difference`` is ``None`` when the
    current code records exactly what the history holds."""

    workflow: str
    events: int
    """How many recorded events were replayed (all of them when there is no difference)."""
    inputs: int
    """How many recorded inputs were handled again."""
    difference: ReplayDifference | None

    @property
    def ok(self) -> bool:
        """Whether the current code reproduces the whole history."""
        return self.difference is None

    def __str__(self) -> str:
        if self.difference is None:
            return f"{self.workflow}: {self.inputs} inputs, {self.events} events replay the same"
        return f"{self.workflow}: {self.difference}"


def replay_check(
    workflow: Workflow[I, S, O],
    history: Sequence[WorkflowEvent[I, O]],
    *,
    decides_cancel: bool = True,
) -> ReplayReport:
    """Replay ``history`` (an instance's events, in order) through the current ``workflow``.

    Each recorded input (``InitiatedBy``, ``Received``, ``Ignored``) is handled again on the
    state folded from the recorded events before it, the way a processor handles it now
    (:func:`decider.handle`, or :func:`decider.handle_cancel` for a cancel request, where
    ``decides_cancel`` says whether the workflow lists it among its inputs); the events produced
    must equal the events recorded for it. Stops at the first difference. Pure: it neither
    reads nor writes a store.
    """
    instance = start(workflow)
    index, inputs = 0, 0
    while index < len(history):
        start_index, input_index = index, index
        if isinstance(history[index], Began):
            input_index += 1
        first = history[input_index] if input_index < len(history) else None
        if not isinstance(first, _INPUTS):
            return _report(
                workflow,
                index,
                inputs,
                ReplayDifference(
                    input_index, input_index, None, first, None, "an event records no input here"
                ),
            )
        input = first.message
        end = input_index + 1
        while end < len(history) and not _starts_input(history[end]):
            end += 1
        recorded = list(history[start_index:end])
        inputs += 1
        try:
            replayed = deliver(workflow, instance, input, decides_cancel)
        except Exception as exc:
            error = f"decide now raises {exc!r}"
            return _report(
                workflow,
                start_index,
                inputs,
                ReplayDifference(input_index, input_index, input, first, None, error),
            )
        for offset in range(max(len(recorded), len(replayed))):
            left = recorded[offset] if offset < len(recorded) else None
            right = replayed[offset] if offset < len(replayed) else None
            if left != right:
                revision = start_index + offset
                difference = ReplayDifference(revision, input_index, input, left, right)
                return _report(workflow, revision, inputs, difference)
        try:
            instance = advance(workflow, instance, recorded)
        except Exception as exc:
            error = f"evolve now raises {exc!r} on the recorded events #{start_index}-#{end - 1}"
            return _report(
                workflow,
                start_index,
                inputs,
                ReplayDifference(start_index, input_index, input, recorded[0], None, error),
            )
        index = end
    return _report(workflow, index, inputs, None)


def assert_replays(
    workflow: Workflow[I, S, O],
    *histories: Sequence[WorkflowEvent[I, O]],
    decides_cancel: bool = True,
) -> list[ReplayReport]:
    """pytest helper: every history replays the same through the current ``workflow``.

    Raises :class:`AssertionError` naming each history that differs, where and how, with the
    history itself; returns the reports otherwise.
    """
    reports = [replay_check(workflow, h, decides_cancel=decides_cancel) for h in histories]
    failures = [
        f"history #{number}: {report}\n{describe(histories[number])}"
        for number, report in enumerate(reports)
        if not report.ok
    ]
    if failures:
        raise AssertionError(
            f"{len(failures)} of {len(histories)} recorded histories of {workflow.name} would "
            "not be recorded the same by the current code:\n" + "\n".join(failures)
        )
    return reports


def _starts_input(event: WorkflowEvent[Any, Any]) -> bool:
    return isinstance(event, Began | InitiatedBy | Received | Ignored)


def _report(
    workflow: Workflow[Any, Any, Any],
    events: int,
    inputs: int,
    difference: ReplayDifference | None,
) -> ReplayReport:
    return ReplayReport(workflow.name, events, inputs, difference)


def _shown(event: WorkflowEvent[Any, Any] | None) -> str:
    return "nothing" if event is None else repr(event)
