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


def _non_negative(_: object, attribute: attrs.Attribute[timedelta], value: timedelta) -> None:
    if value < timedelta(0):
        raise ValueError(f"Schedule.{attribute.name} must not be negative, got {value}")


@attrs.frozen
class Schedule(Generic[O]):
    """Deliver ``message`` back to this workflow instance as an input ``after`` this long.

    The delay counts from the time the resulting ``Scheduled`` event is recorded; it is a
    durable timer that survives restarts.
    """

    after: timedelta = attrs.field(validator=_non_negative)
    message: O


@attrs.frozen
class Complete:
    """End the workflow instance. Inputs arriving afterwards are recorded as ignored."""


Command: TypeAlias = Reply[O] | Send[O] | Publish[O] | Schedule[O] | Complete
"""Any command ``decide`` may return."""
