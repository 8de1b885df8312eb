"""The grammar of stored type names: a workflow event's kind and its message's type name.

A stored type name is the message's registered name, and for a workflow event the event's kind
and the message's name joined by :data:`KIND_SEPARATOR` (``Sent:fines.IssueTrafficFine``);
``Began`` and ``Completed`` stand alone; the kinds are :class:`~decider.kinds.Kind`'s.
:mod:`decider.codec` owns this grammar and re-exports every name here (and :class:`Kind`):
import them from there.
"""

from __future__ import annotations

from decider.kinds import Kind
from decider.workflow import Lifecycle

EVENT_KINDS: tuple[str, ...] = tuple(kind.value for kind in Kind)
"""The kinds of workflow event, the first part of their stored type names."""


KIND_SEPARATOR = ":"
"""Joins a workflow event's kind and its message's type name; message type names cannot hold it."""

COMMAND_KINDS: tuple[str, ...] = (Kind.SENT.value, Kind.PUBLISHED.value, Kind.REPLIED.value)
"""The kinds of workflow event that carry a command for the command processor."""

TIMER_KINDS: tuple[str, ...] = (Kind.SCHEDULED.value,)
"""The kinds of workflow event that carry a timer for the timer processor."""

BEGAN = Kind.BEGAN.value
"""The stored type name of :class:`~decider.events.Began`."""

COMPLETED = Kind.COMPLETED.value
"""The stored type name of :class:`~decider.events.Completed`."""

LIFECYCLE_TYPES: tuple[str, ...] = (BEGAN, COMPLETED, Kind.FAILED.value, Kind.CANCELLED.value)
"""The stored type names of the events that start or end an instance's life."""

_LIFECYCLE_OF: dict[str, Lifecycle] = {
    BEGAN: Lifecycle.RUNNING,
    COMPLETED: Lifecycle.COMPLETED,
    Kind.FAILED.value: Lifecycle.FAILED,
    Kind.CANCELLED.value: Lifecycle.CANCELLED,
}


def event_kind(type_name: str) -> str | None:
    """The workflow event kind of a stored type name, or ``None`` for a plain message.

    >>> event_kind("Sent:fines.IssueTrafficFine"), event_kind("fines.IssueTrafficFine")
    ('Sent', None)
    """
    kind = type_name.partition(KIND_SEPARATOR)[0]
    return kind if kind in EVENT_KINDS else None


def stored_type(kind: str, message_type: str) -> str:
    """The stored type name of a workflow event of ``kind`` over a message of ``message_type``.

    >>> stored_type("Received", "fines.PoliceReportPublished")
    'Received:fines.PoliceReportPublished'
    """
    return f"{kind}{KIND_SEPARATOR}{message_type}"


def parse_type(type_name: str) -> tuple[str | None, str]:
    """A stored type name as (workflow event kind or ``None``, message type name).

    The message type name is empty for ``Began`` and ``Completed``; a plain message has no
    kind.

    >>> parse_type("Sent:fines.IssueTrafficFine"), parse_type("fines.IssueTrafficFine")
    (('Sent', 'fines.IssueTrafficFine'), (None, 'fines.IssueTrafficFine'))
    >>> parse_type("Began")
    ('Began', '')
    """
    if type_name in (BEGAN, COMPLETED):
        return type_name, ""
    kind, separator, name = type_name.partition(KIND_SEPARATOR)
    if separator and kind in EVENT_KINDS:
        return kind, name
    return None, type_name


def lifecycle_of_type(type_name: str) -> Lifecycle | None:
    """The status a lifecycle event's stored type starts (``None``: not a lifecycle event).

    ``Began`` starts running; a terminal event (``Completed``, ``Failed``, ``Cancelled``)
    its terminal status. Nothing is decoded: the type name says it.

    >>> lifecycle_of_type("Completed"), lifecycle_of_type("Sent:fines.Pay")
    (<Lifecycle.COMPLETED: 'completed'>, None)
    >>> lifecycle_of_type("Cancelled")
    <Lifecycle.CANCELLED: 'cancelled'>
    """
    return _LIFECYCLE_OF.get(type_name)


def kind_prefixes(kinds: tuple[str, ...]) -> tuple[str, ...]:
    """The stored type name prefixes of the workflow events of ``kinds``: a reader's filter.

    >>> kind_prefixes(COMMAND_KINDS)
    ('Sent:', 'Published:', 'Replied:')
    """
    return tuple(f"{kind}{KIND_SEPARATOR}" for kind in kinds)
