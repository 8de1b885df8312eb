"""The kinds of workflow event: the one vocabulary for the first part of a stored type name.

A workflow event is stored under its kind (``Began``, ``Completed``, ``Failed``,
``Cancelled``) or its kind and its message's type name joined by ``:``
(``Sent:fines.IssueTrafficFine``). :class:`Kind` names each kind once; every module that
compares, filters or builds by kind uses it rather than a bare string, and the grammar that
joins and splits stored type names (:func:`decider.codec.stored_type`,
:func:`decider.codec.parse_type`) is the codec's, which re-exports :class:`Kind`.

A :class:`Kind` is a ``str`` equal to its stored text, so a stored type name built from one is
byte for byte the same as before it existed.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Kind"]


class Kind(StrEnum):
    """A workflow event's kind, equal to (and formatted as) the text stored for it.

    >>> Kind.SENT == "Sent", f"{Kind.SENT}:fines.Pay", Kind("Completed") is Kind.COMPLETED
    (True, 'Sent:fines.Pay', True)
    """

    BEGAN = "Began"
    """The instance began (stored alone: ``Began``)."""
    INITIATED_BY = "InitiatedBy"
    """The input that began the instance."""
    RECEIVED = "Received"
    """An input the instance received after it began."""
    REPLIED = "Replied"
    """A reply to a request (a command for the command processor)."""
    SENT = "Sent"
    """A command sent to a handler (a command for the command processor)."""
    PUBLISHED = "Published"
    """A message published to a topic (a command for the command processor)."""
    SCHEDULED = "Scheduled"
    """A message due after a delay (a timer for the timer processor)."""
    COMPLETED = "Completed"
    """The instance completed (stored alone: ``Completed``)."""
    IGNORED = "Ignored"
    """An input the instance did not decide upon, with the reason."""
    FAILED = "Failed"
    """The instance failed (stored as ``Failed`` with the reason)."""
    CANCELLED = "Cancelled"
    """The instance was cancelled (stored as ``Cancelled`` with the reason)."""
