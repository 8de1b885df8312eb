"""Strict structuring of JSON into messages, and its errors in plain words.

:mod:`decider.codec` owns the wire format and builds its converter here: every place JSON
becomes a message (the CLI's ``publish``, stored events wherever they are read) decodes with
the same rules. An unknown key, a float for an integer, a string for a number or a missing
field is an error naming the field, never a silent change of the data; an upcaster is the way
to accept an old shape. The rules are hooks registered once on the converter, so a decode costs
a type check per field, not a second pass.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

from cattrs import Converter
from cattrs.errors import (
    AttributeValidationNote,
    BaseValidationError,
    ForbiddenExtraKeysError,
    IterableValidationNote,
)
from cattrs.preconf.json import make_converter

from decider._describe import describe
from decider.models import configure_converter

__all__ = ["FieldTypeError", "field_errors", "strict_converter"]

# json.dumps with options builds an encoder per call; the pydantic hook writes with this one.
_JSON_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


class FieldTypeError(TypeError):
    """A JSON value of the wrong type for a field, worded for the user: ``expected an integer,
    got 2.7``."""


def _got(value: Any) -> str:
    """A JSON value as the user wrote it, or what it is where that would be long."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):  # not a JSON value: an upcaster put a Python object there
        return f"a {type(value).__name__}"
    if len(text) <= 60:
        return text
    return f"a string of {len(value)} characters" if isinstance(value, str) else text[:59] + "…"


# Each hook also serves the type's subclasses (an IntEnum, a StrEnum): it checks the JSON
# value's type, then builds ``cls`` from it, as cattrs' own hooks do.


def _int(value: Any, cls: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value if cls is int else cls(value)
    raise FieldTypeError(f"expected an integer, got {_got(value)}")


def _float(value: Any, cls: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) if cls is float else cls(value)
    raise FieldTypeError(f"expected a number, got {_got(value)}")


def _str(value: Any, cls: Any) -> str:
    if isinstance(value, str):
        return value if cls is str else cls(value)
    raise FieldTypeError(f"expected a string, got {_got(value)}")


def _bool(value: Any, _: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise FieldTypeError(f"expected true or false, got {_got(value)}")


def _is_pydantic(cls: object) -> bool:
    pydantic = sys.modules.get("pydantic")
    return (
        pydantic is not None
        and isinstance(cls, type)
        and issubclass(cls, pydantic.BaseModel)
        and cls is not pydantic.BaseModel
    )


def _validate_model(doc: Any, cls: Any) -> Any:
    """A pydantic model from a JSON object, in pydantic's strict JSON mode (no string for a
    number, no float for an integer), an unknown key refused unless the model allows extras."""
    if not isinstance(doc, dict):
        raise FieldTypeError(f"expected a JSON object, got {_got(doc)}")
    if cls.model_config.get("extra") != "allow":
        known: set[str] = set()
        for name, info in cls.model_fields.items():
            known.add(name)
            for alias in (info.alias, info.validation_alias):
                if isinstance(alias, str):
                    known.add(alias)
        extra = set(doc) - known
        if extra:
            raise ForbiddenExtraKeysError("", cls, extra)
    return cls.model_validate_json(_JSON_ENCODER.encode(doc), strict=True)


def strict_converter() -> Converter:
    """A JSON converter that structures strictly: unknown keys, a float for an integer, a
    string for a number or a boolean, a number for a string are errors.

    An integer is accepted for a float field (JSON writes ``2.0`` as ``2`` in many languages).

    >>> import attrs
    >>> @attrs.frozen
    ... class Stay:
    ...     nights: int
    >>> strict_converter().structure({"nights": 2}, Stay)
    Stay(nights=2)
    """
    converter = make_converter(forbid_extra_keys=True)
    configure_converter(converter)  # unstructuring pydantic models, besides attrs/dataclasses
    converter.register_structure_hook_func(_is_pydantic, _validate_model)
    converter.register_structure_hook(int, _int)
    converter.register_structure_hook(float, _float)
    converter.register_structure_hook(str, _str)
    converter.register_structure_hook(bool, _bool)
    return converter


def field_errors(exc: BaseException) -> list[str]:
    """Each failure in ``exc`` (a cattrs validation error, which may group several, or a
    pydantic one) as a line that names the field by its path: ``missing field: hotel``,
    ``nights: expected an integer, got 2.7``, ``unknown field: confirm_withn``."""
    return list(_walk(exc, ""))


def _walk(exc: BaseException, path: str) -> Iterator[str]:
    if isinstance(exc, BaseValidationError):
        for sub in exc.exceptions:
            yield from _walk(sub, _note_path(sub, path))
        return
    if isinstance(exc, ForbiddenExtraKeysError):
        for key in sorted(exc.extra_fields):
            yield f"unknown field: {_join(path, key)}"
        return
    if isinstance(exc, KeyError):
        # cattrs notes the missing attribute on the KeyError: the path already ends in its name
        yield f"missing field: {path or (exc.args[0] if exc.args else '?')}"
        return
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(exc, pydantic.ValidationError):
        yield from _pydantic_errors(exc, path)
        return
    where = f"{path}: " if path else ""
    if isinstance(exc, FieldTypeError):
        yield f"{where}{exc}"
        return
    yield f"{where}{describe(exc)}"


def _note_path(exc: BaseException, path: str) -> str:
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, AttributeValidationNote):
            return _join(path, note.name)
        if isinstance(note, IterableValidationNote):
            return f"{path}[{note.index}]"
    return path


def _join(path: str, name: object) -> str:
    return f"{path}.{name}" if path else str(name)


_PYDANTIC_TYPES = {
    "int_type": "an integer",
    "int_from_float": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
}


def _pydantic_errors(exc: Any, path: str) -> Iterator[str]:
    for error in exc.errors():
        where = path
        for part in error.get("loc", ()):
            where = f"{where}[{part}]" if isinstance(part, int) else _join(where, part)
        kind = error.get("type", "")
        if kind == "missing":
            yield f"missing field: {where}"
        elif kind == "extra_forbidden":
            yield f"unknown field: {where}"
        elif kind in _PYDANTIC_TYPES:
            yield f"{where}: expected {_PYDANTIC_TYPES[kind]}, got {_got(error.get('input'))}"
        else:
            yield f"{where}: {error.get('msg', kind)}" if where else str(error.get("msg", kind))
