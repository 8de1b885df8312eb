"""Every public name of the diagram module and of the console says what it is."""

from __future__ import annotations

import inspect
from types import ModuleType

import pytest

import decider.diagram
import decider.processors.console
import decider.processors.console.data
import decider.processors.operate.progress

MODULES = [
    decider.diagram,
    decider.processors.console,
    decider.processors.console.data,
    decider.processors.operate.progress,
]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_public_name_and_method_has_a_docstring(module: ModuleType) -> None:
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    missing = []
    for name in names:
        obj = getattr(module, name)
        if getattr(obj, "__module__", module.__name__) != module.__name__ and not hasattr(
            module, "__all__"
        ):
            continue  # imported from elsewhere
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if inspect.isclass(obj):
            missing += [
                f"{name}.{attr}"
                for attr, member in vars(obj).items()
                if inspect.isfunction(member)
                and not attr.startswith("_")
                and not (member.__doc__ or "").strip()
            ]
    assert missing == []
