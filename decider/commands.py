"""Commands: what ``decide`` returns, in the imperative.

``decide`` never performs them: the translator records them as workflow events and the
processors carry them out.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Generic, TypeAlias, TypeVar

import attrs

O = TypeVar("O")  # noqa: E741


@attrs.frozen
class Reply(Generic[O]):
    """Answer whoever sent the input message with ``message``."""

    message: O


@attrs.frozen
class Send(Generic[O]):
    """Send ``message`` (usually a command) to the one handler of its type."""

    message: O


@attrs.frozen
class Publish(Generic[O]):
    """Publish ``message`` (usually an event) to its topic, for any number of subscribers."""

    message: O


def _a_delay(schedule: object, attribute: attrs.Attribute[timedelta], value: object) -> None:
    if not isinstance(value, timedelta):
        message = getattr(schedule, "message", None)
        hint = (
            "the delay comes first: Schedule(after, message)"
            if isinstance(message, timedelta)
            else f"write Schedule(timedelta(seconds={value!r}), message)"
            if isinstance(value, int | float) and not isinstance(value, bool)
            else "write Schedule(timedelta(...), message)"
        )
        raise TypeError(
            f"Schedule.{attribute.name} must be a datetime.timedelta, got "
            f"{type(value).__name__} {value!r}: {hint}"
        )
    if value < timedelta(0):
        raise ValueError(f"Schedule.{attribute.name} must not be negative, got {value}")


@attrs.frozen
class Schedule(Generic[O]):
    """Deliver ``message`` back to this workflow instance as an input ``after`` this long.

    The delay counts from the time the resulting ``Scheduled`` event is recorded; it is a
    durable timer that survives restarts. ``after`` must be a :class:`~datetime.timedelta`:
    a bare number fails at once (is ``5`` seconds, minutes or days?).

    >>> Schedule(timedelta(minutes=15), "remind").after
    datetime.timedelta(seconds=900)
    >>> Schedule(5, "remind")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    TypeError: Schedule.after must be a datetime.timedelta, got int 5: write Schedule(timedelta(...
    """

    after: timedelta = attrs.field(validator=_a_delay)
    message: O


@attrs.frozen
class Complete:
    """End the workflow instance. Inputs arriving afterwards are recorded as ignored."""


@attrs.frozen
class Fail:
    """End the workflow instance as failed, for ``reason``: recorded as ``Failed(reason)``.

    For an outcome the business calls a failure (as opposed to ``Complete``); inputs arriving
    afterwards are recorded as ignored.
    """

    reason: str


@attrs.frozen
class Cancel:
    """End the workflow instance as cancelled, for ``reason``: recorded as ``Cancelled(reason)``.

    What ``decide`` returns once it has compensated for a ``decider.CancelRequested``
    (at once, or after the compensations' answers came back); inputs arriving afterwards are
    recorded as ignored.
    """

    reason: str


Command: TypeAlias = Reply[O] | Send[O] | Publish[O] | Schedule[O] | Complete | Fail | Cancel
"""Any command ``decide`` may return."""

COMMAND_TYPES: tuple[type, ...] = (Reply, Send, Publish, Schedule, Complete, Fail, Cancel)
"""The classes of :data:`Command`."""

TERMINAL_COMMANDS: tuple[type, ...] = (Complete, Fail, Cancel)
"""The commands that end an instance; one of them, if any, is the last command decided."""
