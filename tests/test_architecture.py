"""The layers, read from the source with ``ast``: nothing imports upwards or sideways.

- The pure core (``decider/*.py``, ``decider/testing``) imports no store and no processor.
- ``decider.processors`` depends on the store protocol, never on one backend: of
  ``decider.stores`` it imports only the neutral modules in :data:`NEUTRAL_STORE_MODULES`,
  and opens a store by URI (``decider.stores.uri``, which imports the backend the URI names)
  only where :data:`URI_OPENERS` says why.
- ``decider.stores`` imports nothing from ``decider.processors``.
- No module imports the top-level ``stores`` or ``processors`` (the installed names are
  ``decider.stores`` and ``decider.processors``; a user's own ``stores`` must win).

Every import counts: at the top, inside functions, under ``TYPE_CHECKING``, relative ones, and
``importlib.import_module("...")`` with a literal name.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

NEUTRAL_STORE_MODULES = {
    "decider.stores",  # the package: protocol and errors re-exported (its open_store is uri's)
    "decider.stores.protocol",
    "decider.stores.errors",
    "decider.stores.redact",  # redact_uri: a pure function on URI text
    "decider.stores.subscription",
    "decider.stores.leases",  # the LeaseStore protocol, Lease and LeaseLost (partitioned runs)
    "decider.stores.consumer_groups",  # the ConsumerGroupStore protocol and its values
}
"""The modules of ``decider.stores`` a processor may import: none of them imports a backend."""

URI_OPENERS = {
    # The CLI opens the store named by ``--store URI`` / ``$DECIDER_STORE``: that is the one
    # place where a process chooses its backend, and ``decider.stores.uri`` imports only the
    # adapter the URI names (its driver is an optional extra).
    "processors/cli/loading.py": "opens the store named on the command line",
}
"""The processor modules that may open a store by URI, and why."""


def _package(relative: Path) -> str:
    """The installed module name of a source file (``processors/app.py`` ->
    ``decider.processors.app``); the repository's folders map onto one import root."""
    parts = list(relative.with_suffix("").parts)
    if parts[0] in ("stores", "processors"):
        parts.insert(0, "decider")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(source: str, module: str, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for every module that ``source`` (the text of ``module``) imports;
    ``from m import name`` yields ``m.name`` where ``name`` is a submodule, else where
    ``name`` was defined (a re-exported function counts as its own module's)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield node.lineno, _origin(base, alias.name)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def _origin(base: str, name: str) -> str:
    """The module that ``from base import name`` really depends on."""
    if not base.startswith("decider"):
        return f"{base}.{name}"
    spec = importlib.util.find_spec(base)
    if spec is None or spec.submodule_search_locations is None:
        return base  # a plain module: the name is its own (a backend is not imported to see)
    parent = importlib.import_module(base)
    value = getattr(parent, name, None)
    if value is None:
        return f"{base}.{name}"  # a submodule not imported yet
    if isinstance(value, type(parent)):
        return value.__name__
    defined_in = getattr(value, "__module__", None)
    return defined_in if isinstance(defined_in, str) else base


def sources(*patterns: str) -> list[Path]:
    """The repository's Python files matching ``patterns`` (relative to the root), never
    through the links ``decider/stores`` and ``decider/processors``."""
    found = {path for pattern in patterns for path in ROOT.glob(pattern)}
    links = [ROOT / "decider" / "stores", ROOT / "decider" / "processors"]
    return sorted(p for p in found if not any(p.is_relative_to(link) for link in links))


def violations(
    files: Iterable[Path], forbidden: str, allowed: dict[str, set[str]] | None = None
) -> list[str]:
    """``path:line imports module`` for each import of ``forbidden`` or a module below it,
    except the modules ``allowed[path]`` names for that file."""
    found = []
    for path in files:
        relative = path.relative_to(ROOT)
        module = _package(relative)
        exempt = (allowed or {}).get(relative.as_posix(), set())
        for line, imported in imports(path.read_text(), module, path.name == "__init__.py"):
            hit = imported == forbidden or imported.startswith(forbidden + ".")
            if hit and not any(imported.startswith(e) for e in exempt):
                found.append(f"{relative}:{line} imports {imported}")
    return found


CORE = sources("decider/*.py", "decider/testing/**/*.py")
PROCESSORS = sources("processors/**/*.py")
STORES = sources("stores/**/*.py")
EVERYTHING = sources("decider/**/*.py", "stores/**/*.py", "processors/**/*.py") + sources(
    "samples/**/*.py", "benchmarks/**/*.py", "tests/**/*.py"
)


def test_the_source_sets_are_found() -> None:
    assert ROOT / "decider" / "workflow.py" in CORE
    assert ROOT / "decider" / "testing" / "spec.py" in CORE
    assert not [p for p in CORE if "stores" in p.parts or "processors" in p.parts]
    assert ROOT / "processors" / "cli" / "loading.py" in PROCESSORS
    assert ROOT / "stores" / "esdb_testserver" / "server.py" in STORES


@pytest.mark.parametrize("layer", ["decider.stores", "decider.processors"])
def test_the_pure_core_imports_no_store_and_no_processor(layer: str) -> None:
    assert violations(CORE, layer) == []


def test_the_processors_import_no_store_backend() -> None:
    found = [
        v
        for v in violations(PROCESSORS, "decider.stores")
        if v.rpartition(" imports ")[2] not in NEUTRAL_STORE_MODULES
        and not v.endswith(" imports decider.stores.uri")
    ]
    assert found == []


def test_only_the_listed_processor_modules_open_a_store_by_uri() -> None:
    allowed = {path: {"decider.stores.uri"} for path in URI_OPENERS}
    assert violations(PROCESSORS, "decider.stores.uri", allowed) == []
    for path in URI_OPENERS:  # an exception that is no longer used goes from the list
        assert violations([ROOT / path], "decider.stores.uri"), path


def test_the_stores_import_no_processor() -> None:
    assert violations(STORES, "decider.processors") == []


@pytest.mark.parametrize("name", ["stores", "processors"])
def test_no_module_imports_the_top_level_name(name: str) -> None:
    assert violations(EVERYTHING, name) == []


def test_the_checker_sees_every_kind_of_import() -> None:
    source = """
import stores.sqlite
from decider.stores import open_store, EventStore
from . import sqlite
from ..processors import app
def later():
    from decider.stores.postgres import PostgresEventStore
importlib.import_module("processors.cli")
"""
    found = sorted(imports(source, "decider.stores.memory"))
    assert found == [
        (2, "stores.sqlite"),
        (3, "decider.stores.protocol"),
        (3, "decider.stores.uri"),
        (4, "decider.stores.sqlite"),
        (5, "decider.processors.app"),
        (7, "decider.stores.postgres"),
        (8, "processors.cli"),
    ]
