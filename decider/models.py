"""Message classes: attrs classes, frozen dataclasses and frozen pydantic models.

All three register the same way (``@message("orders.OrderPlaced")`` above the class) and are
stored the same way: the registered type name, and the fields as a JSON object. attrs classes
and dataclasses go through cattrs; a pydantic model through its own ``model_dump(mode="json")``
and ``model_validate``, so its validators run when a stored message is read back.

pydantic is optional (the ``pydantic`` extra) and never imported here: a class can only be a
pydantic model if pydantic was imported to define it, so it is looked up in ``sys.modules``.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from typing import Any, Literal

import attrs
from cattrs import Converter

from decider.errors import MessageRegistrationError

ModelKind = Literal["attrs", "dataclass", "pydantic"]
"""The kinds of class that can be a message."""


def model_kind(cls: object) -> ModelKind | None:
    """The kind of message class ``cls`` is, or ``None`` if it cannot be a message.

    >>> @dataclasses.dataclass(frozen=True)
    ... class Point:
    ...     x: int
    >>> model_kind(Point), model_kind(str)
    ('dataclass', None)
    """
    if not isinstance(cls, type):
        return None
    if attrs.has(cls):
        return "attrs"
    if _is_pydantic(cls):
        return "pydantic"
    if dataclasses.is_dataclass(cls):
        return "dataclass"
    return None


def check_message_class(cls: type[Any]) -> None:
    """Raise :class:`~decider.MessageRegistrationError` if ``cls`` cannot be a message.

    A message is an attrs class, a frozen dataclass or a frozen pydantic model: a message is a
    value, stored once and read many times, so a mutable dataclass or model is refused with
    the line to write instead.
    """
    name = getattr(cls, "__qualname__", repr(cls))
    kind = model_kind(cls)
    if kind is None:
        raise MessageRegistrationError(
            f"{name} must be an attrs class (@attrs.frozen), a frozen dataclass "
            "(@dataclass(frozen=True)) or a frozen pydantic model to be a message"
        )
    if kind == "dataclass" and not cls.__dataclass_params__.frozen:
        raise MessageRegistrationError(
            f"{name} is a mutable dataclass: write @dataclass(frozen=True) to make it a message"
        )
    if kind == "pydantic" and not cls.model_config.get("frozen"):
        raise MessageRegistrationError(
            f"{name} is a mutable pydantic model: add model_config = ConfigDict(frozen=True) "
            "to make it a message"
        )


def field_types(cls: type[Any]) -> dict[str, Any]:
    """The fields a message class is built from (its ``__init__`` arguments), with their
    resolved types, in order; empty for a class that is not a message class.

    >>> @attrs.frozen
    ... class Moved:
    ...     x: int
    ...     y: "float"
    >>> field_types(Moved)
    {'x': <class 'int'>, 'y': <class 'float'>}
    """
    kind = model_kind(cls)
    if kind == "attrs":
        attrs.resolve_types(cls)
        return {f.name: f.type for f in attrs.fields(cls) if f.init}
    if kind == "dataclass":
        hints = typing.get_type_hints(cls)
        return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}
    if kind == "pydantic":
        fields = cls.model_fields
        return {name: info.annotation for name, info in fields.items()}
    return {}


def field_values(value: object) -> dict[str, Any] | None:
    """A message's field values by name, or ``None`` for a value of no message class.

    >>> @dataclasses.dataclass(frozen=True)
    ... class Point:
    ...     x: int
    >>> field_values(Point(1)), field_values("text")
    ({'x': 1}, None)
    """
    if model_kind(type(value)) is None:
        return None
    return {name: getattr(value, name) for name in field_types(type(value))}


def configure_converter(converter: Converter) -> None:
    """Teach a cattrs converter pydantic models (attrs classes and dataclasses it knows).

    A model is unstructured with ``model_dump(mode="json")`` and structured with
    ``model_validate``, so its own validators and JSON types apply.
    """
    converter.register_unstructure_hook_func(_is_pydantic, _dump_model)
    converter.register_structure_hook_func(_is_pydantic, _validate_model)


def _is_pydantic(cls: object) -> bool:
    pydantic = sys.modules.get("pydantic")
    return (
        pydantic is not None
        and isinstance(cls, type)
        and issubclass(cls, pydantic.BaseModel)
        and cls is not pydantic.BaseModel
    )


def _dump_model(model: Any) -> Any:
    return model.model_dump(mode="json")


def _validate_model(doc: Any, cls: Any) -> Any:
    return cls.model_validate(doc)
