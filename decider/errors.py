"""The errors the pure core raises.

::

    DeciderError
    ├── UnknownMessageType     a type name, or a class, that no registry knows
    ├── MessageRegistrationError  a message class registered wrongly (bad name, duplicate)
    ├── DecodeError            stored bytes that cannot become a message or workflow event
    ├── InvalidDecision        decide returned something that is not a list of commands
    └── WorkflowDefinitionError  a Workflow built with an option that cannot work
"""

from __future__ import annotations


class DeciderError(Exception):
    """Base class of every error the pure core raises."""


class MessageRegistrationError(DeciderError, TypeError):
    """A message class or type name that cannot be registered."""


class UnknownMessageType(DeciderError, KeyError):
    """A type name (or a class) that is not registered.

    A type name found in stored data never imports anything: only registered types decode.
    """

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name
        super().__init__(type_name)

    def __str__(self) -> str:
        return f"unknown message type {self.type_name!r}: it is not registered"


class DecodeError(DeciderError, ValueError):
    """Stored bytes that cannot be decoded; names the type and the reason."""

    def __init__(self, type_name: str, reason: str) -> None:
        self.type_name = type_name
        self.reason = reason
        super().__init__(f"cannot decode {type_name!r}: {reason}")


class InvalidDecision(DeciderError, TypeError):
    """``decide`` returned something other than a list of commands (a bare message, one
    command not in a list, ``None``), or a command after one that ends the instance.

    The message names what was returned and what to write instead.
    """


class WorkflowDefinitionError(DeciderError, ValueError):
    """A :class:`~decider.Workflow` built with an option that cannot work (an unknown
    ``on_error`` policy, a snapshot interval below 1, a state it cannot snapshot)."""
