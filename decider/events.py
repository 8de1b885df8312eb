"""Workflow events: the past-tense record of an instance, kept in its own stream.

The stream is the instance's memory (``evolve`` folds it into state), its record of inputs
(``InitiatedBy``, ``Received``, ``Ignored``) and its outbox (``Replied``, ``Sent``,
``Published``, ``Scheduled``, which processors carry out). ``Completed``, ``Failed`` and
``Cancelled`` are terminal: after one of them nothing is decided any more.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Generic, TypeAlias, TypeVar

import attrs

I = TypeVar("I")  # noqa: E741
O = TypeVar("O")  # noqa: E741


@attrs.frozen
class Began:
    """The instance began: always its first event."""


@attrs.frozen
class InitiatedBy(Generic[I]):
    """The first input, which began the instance."""

    message: I


@attrs.frozen
class Received(Generic[I]):
    """An input after the first one."""

    message: I


@attrs.frozen
class Replied(Generic[O]):
    """``decide`` chose to reply with ``message``; the command processor delivers it."""

    message: O


@attrs.frozen
class Sent(Generic[O]):
    """``decide`` chose to send ``message``; the command processor delivers it to its handler."""

    message: O


@attrs.frozen
class Published(Generic[O]):
    """``decide`` chose to publish ``message``; the command processor appends it to its topic."""

    message: O


@attrs.frozen
class Scheduled(Generic[O]):
    """``decide`` chose to receive ``message`` again ``after`` this long.

    The timer is due at the time this event was recorded plus ``after``.
    """

    after: timedelta
    message: O


@attrs.frozen
class Completed:
    """The instance completed. Nothing is decided after this."""


@attrs.frozen
class Failed:
    """The instance failed: ``decide`` chose ``Fail(reason)``, or raised under ``on_error="fail"``.

    Terminal: nothing is decided after this.
    """

    reason: str


@attrs.frozen
class Cancelled:
    """The instance was cancelled: ``decide`` chose ``Cancel(reason)``, or a cancel request
    reached a workflow that does not decide on cancel requests.

    Terminal: nothing is decided after this.
    """

    reason: str


@attrs.frozen
class Ignored(Generic[I]):
    """An input that arrived after the instance ended (completed, failed or cancelled):
    recorded, never decided upon."""

    message: I
    reason: str


WorkflowEvent: TypeAlias = (
    Began
    | InitiatedBy[I]
    | Received[I]
    | Replied[O]
    | Sent[O]
    | Published[O]
    | Scheduled[O]
    | Completed
    | Failed
    | Cancelled
    | Ignored[I]
)
"""Any event of a workflow instance's stream."""

OUTBOX_EVENTS: tuple[type, ...] = (Replied, Sent, Published, Scheduled)
"""The events that record a command a processor still has to carry out."""

TERMINAL_EVENTS: tuple[type, ...] = (Completed, Failed, Cancelled)
"""The events that end an instance: after one of them every input is recorded as ``Ignored``."""
