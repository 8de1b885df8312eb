"""Every public name says what it is and what it guarantees.

The public packages are ``decider``, ``decider.testing``, ``decider.stores`` and
``decider.processors``; their public modules are every submodule without a leading underscore
in its path. Of each, the public names are its ``__all__`` (each must exist), or else the
classes and functions it defines without a leading underscore. Each needs a docstring: a class
or function its own (or the one of the method it overrides), each public method and property
of a class too, a constant or type alias the string literal under its assignment (found by
following the ``from ... import`` that re-exports it), a module its module docstring.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from functools import cache
from types import ModuleType

import pytest

PACKAGES = ["decider", "decider.testing", "decider.stores", "decider.processors"]


def public_modules() -> list[str]:
    """The public packages and their public submodules, each once."""
    names: dict[str, None] = {}
    for package in PACKAGES:
        names[package] = None
        for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
            owned_by_another = any(
                info.name.startswith(other + ".") for other in PACKAGES if len(other) > len(package)
            )
            private = any(part.startswith("_") for part in info.name.split("."))
            if not (owned_by_another or private):
                names[info.name] = None
    return list(names)


def public_names(module: ModuleType) -> list[str]:
    """``__all__``, or else the classes and functions the module defines publicly."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and value.__module__ == module.__name__
    ]


@cache
def _tree(module_name: str) -> ast.Module:
    module = importlib.import_module(module_name)
    return ast.parse(inspect.getsource(module))


def attribute_docstring(module_name: str, name: str) -> str | None:
    """The string literal under the module-level assignment of ``name`` in ``module_name``,
    following a ``from ... import name`` to the module that assigns it."""
    body = _tree(module_name).body
    for statement, following in zip(body, [*body[1:], None], strict=True):
        if isinstance(statement, ast.Assign):
            targets = [t.id for t in statement.targets if isinstance(t, ast.Name)]
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            targets = [statement.target.id]
        elif isinstance(statement, ast.ImportFrom) and statement.level == 0 and statement.module:
            if any((alias.asname or alias.name) == name for alias in statement.names):
                return attribute_docstring(statement.module, name)
            continue
        else:
            continue
        if name in targets:
            if (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                return following.value.value
            return None
    return None


def undocumented(module: ModuleType) -> list[str]:
    """The public names of ``module`` (and members of its classes) without a docstring."""
    missing = []
    if not (module.__doc__ or "").strip():
        missing.append("(the module)")
    for name in public_names(module):
        if not hasattr(module, name):
            missing.append(f"{name} (in __all__, but absent)")
            continue
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value) or inspect.ismodule(value):
            if not (inspect.getdoc(value) or "").strip():
                missing.append(name)
        elif not (attribute_docstring(module.__name__, name) or "").strip():
            missing.append(name)
        if inspect.isclass(value):
            for attr, member in vars(value).items():
                method = inspect.isfunction(member) or isinstance(
                    member, property | classmethod | staticmethod
                )
                documented = (inspect.getdoc(getattr(value, attr)) or "").strip()
                if method and not attr.startswith("_") and not documented:
                    missing.append(f"{name}.{attr}")
    return missing


def test_the_public_modules_are_found() -> None:
    modules = public_modules()
    for expected in [
        *PACKAGES,
        "decider.workflow",
        "decider.stores.sqlite.store",
        "decider.processors.app.definition",
    ]:
        assert expected in modules
    assert not [m for m in modules if "._" in m]


def test_the_check_finds_what_is_missing() -> None:
    module = ModuleType("example", "An example.")
    exec(  # a module whose public names miss their docstrings
        "class Thing:\n    def act(self): pass\n\ndef helper(): pass\n",
        module.__dict__,
    )
    module.__all__ = ["Thing", "helper", "gone"]  # type: ignore[attr-defined]
    assert undocumented(module) == ["Thing", "Thing.act", "helper", "gone (in __all__, but absent)"]


def test_a_constant_is_documented_by_the_string_under_it() -> None:
    assert (
        attribute_docstring("decider", "REGISTRY")
        == "The default registry, filled by :func:`message`."
    )
    assert attribute_docstring("decider.workflow", "no_such_name") is None


@pytest.mark.parametrize("name", public_modules())
def test_every_public_name_has_a_docstring(name: str) -> None:
    assert undocumented(importlib.import_module(name)) == []
