"""The errors the pure core raises.

::

    DeciderError
    ├── UnknownMessageType     a type name, or a class, that no registry knows
    ├── MessageRegistrationError  a message class registered wrongly (bad name, duplicate)
    └── DecodeError            stored bytes that cannot become a message or workflow event
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
