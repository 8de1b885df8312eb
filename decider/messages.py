"""Messages: frozen value classes with an explicit, stable type name, and their envelope.

A message class is an attrs class, a frozen dataclass or a frozen pydantic model
(:mod:`decider.models`).

A message's stored type name is given by the developer, never taken from the class's
``__name__``, so renaming or moving a class does not orphan the events already stored.
Metadata (ids, correlation, time) travels beside the message in an :class:`Envelope`,
never inside it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, Generic, TypeVar

import attrs

from decider.errors import MessageRegistrationError, UnknownMessageType
from decider.models import check_message_class

T = TypeVar("T")
M = TypeVar("M")

TYPE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")
"""What a type name may look like: no colon (it separates the parts of workflow event types)."""


class MessageRegistry:
    """Maps stable type names to message classes and back.

    Only registered classes can be encoded or decoded.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, type[Any]] = {}
        self._by_class: dict[type[Any], str] = {}

    def register(self, type_name: str, cls: type[Any]) -> None:
        """Register ``cls`` under ``type_name``.

        Raises :class:`MessageRegistrationError` for a malformed name, a class that cannot be a
        message (not an attrs class, a frozen dataclass or a frozen pydantic model), or a name
        or class already registered to something else.
        """
        if not TYPE_NAME.match(type_name):
            raise MessageRegistrationError(
                f"message type name {type_name!r} must start with a letter and hold only "
                "letters, digits, '_', '.' or '-'"
            )
        check_message_class(cls)
        known = self._by_name.get(type_name)
        if known is not None and known is not cls:
            raise MessageRegistrationError(
                f"message type name {type_name!r} is already registered to {known.__qualname__}"
            )
        other = self._by_class.get(cls)
        if other is not None and other != type_name:
            raise MessageRegistrationError(f"{cls.__qualname__} is already registered as {other!r}")
        self._by_name[type_name] = cls
        self._by_class[cls] = type_name

    def name_of(self, cls: type[Any]) -> str:
        """The type name of a registered class; :class:`UnknownMessageType` otherwise."""
        try:
            return self._by_class[cls]
        except KeyError:
            raise UnknownMessageType(cls.__qualname__) from None

    def class_of(self, type_name: str) -> type[Any]:
        """The class registered under ``type_name``; :class:`UnknownMessageType` otherwise."""
        try:
            return self._by_name[type_name]
        except KeyError:
            raise UnknownMessageType(type_name) from None

    def __contains__(self, type_name: object) -> bool:
        return type_name in self._by_name

    def __iter__(self) -> Iterator[tuple[str, type[Any]]]:
        return iter(list(self._by_name.items()))


REGISTRY = MessageRegistry()
"""The default registry, filled by :func:`message`."""


def message(
    type_name: str, *, registry: MessageRegistry = REGISTRY
) -> Callable[[type[T]], type[T]]:
    """Class decorator: register a message class under a stable ``type_name``.

    The class is an attrs class, a frozen dataclass or a frozen pydantic model; put the
    decorator above ``@attrs.frozen`` / ``@dataclass(frozen=True)``.

    >>> @message("doc.Pinged")
    ... @attrs.frozen(kw_only=True)
    ... class Pinged:
    ...     target: str
    >>> REGISTRY.name_of(Pinged)
    'doc.Pinged'
    """

    def register(cls: type[T]) -> type[T]:
        registry.register(type_name, cls)
        return cls

    return register


def type_name_of(msg: object, registry: MessageRegistry = REGISTRY) -> str:
    """The registered type name of a message instance."""
    return registry.name_of(type(msg))


@attrs.frozen(kw_only=True)
class Metadata:
    """What is known about a message besides its content.

    ``message_id`` identifies the message (inputs are deduplicated by it);
    ``correlation_id`` ties together everything one process does; ``causation_id`` names the
    message that caused this one; ``recorded_at`` is when the store recorded it (UTC), if known;
    ``workflow_version`` is the ``version`` of the workflow code that began an instance, on its
    ``Began`` event (see :func:`decider.began_version`); ``traceparent`` and ``tracestate``
    are the W3C trace context of the work that wrote the message (absent when nothing traced
    it), so what it causes joins the same trace.
    """

    message_id: str
    correlation_id: str | None = None
    causation_id: str | None = None
    recorded_at: datetime | None = None
    workflow_version: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None


@attrs.frozen
class Envelope(Generic[M]):
    """A message with its metadata beside it."""

    message: M
    metadata: Metadata
