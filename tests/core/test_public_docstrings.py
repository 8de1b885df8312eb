"""Every public name of the pure core says what it is and what it guarantees."""

from __future__ import annotations

import inspect
from types import ModuleType

import pytest

import decider
import decider.testing

MODULES = [decider, decider.testing]


def _public(module: ModuleType) -> list[tuple[str, object]]:
    return [(name, getattr(module, name)) for name in module.__all__]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_public_name_and_method_has_a_docstring(module: ModuleType) -> None:
    missing = []
    for name, obj in _public(module):
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                public_method = inspect.isfunction(member) and not attr.startswith("_")
                if public_method and not (member.__doc__ or "").strip():
                    missing.append(f"{name}.{attr}")
    assert missing == []
