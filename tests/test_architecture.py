"""The layers and the folders, read from the source with ``ast``: nothing imports upwards,
sideways or in a circle.

Between packages:

- The pure core (``decider/*.py``, ``decider/testing``) imports no store and no processor.
- ``decider.processors`` depends on the store protocol, never on one backend: of
  ``decider.stores`` it imports only the neutral modules in :data:`NEUTRAL_STORE_MODULES`,
  and opens a store by URI (``decider.stores.uri``) only where :data:`URI_OPENERS` says why.
- ``decider.stores`` imports nothing from ``decider.processors``.
- No module imports the top-level ``stores`` or ``processors`` (the installed names are
  ``decider.stores`` and ``decider.processors``; a user's own ``stores`` must win).

Inside ``processors/`` and ``stores/``:

- No circle among their modules (:func:`test_no_circle_among_the_modules`).
- The sub-packages import only downwards, in the order of :data:`PROCESSOR_LAYERS` and
  :data:`STORE_LAYERS` (:func:`test_the_sub_packages_import_only_downwards`); packages of one
  layer do not import each other.
- The EventStoreDB test server is a tool: no module outside ``stores/esdb/`` imports it, and
  the adapter (the rest of ``stores/esdb/``) imports nothing from it; the generated protocol
  code (``stores/esdb/_proto``) is the adapter's, and imports neither.

Every import counts: at the top, under ``TYPE_CHECKING``, inside functions, relative ones, and
``importlib.import_module("...")`` with a literal name. ``from package import name`` counts as
an import of the module that defines ``name``, read from the package's ``__init__.py``
(``from decider.stores import LeaseLost`` is an import of ``decider.stores.leases``); a name
that is a submodule counts as that submodule. Nothing is imported to find out.

:data:`KNOWN` lists the imports that still break the order, each with the change that removes
it; an entry that no longer matches an import fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from functools import cache
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

PROCESSOR_LAYERS: list[set[str]] = [
    {"app"},  # the definition (AppDefinition), stream names, messages, retry, errors, decoding
    {"group"},  # partitions and membership
    {"engine"},  # the loop, committing, failures, shares of a group, clock, telemetry
    {"workflows", "commands", "timers"},  # the three processors
    {"client"},  # App: the definition with publish, request, cancel from outside a service
    {"operate"},  # the operator's reads and writes
    {"service"},  # every processor of an app in one process
    {"console"},  # the web console
    {"cli"},  # the command line
]
"""The sub-packages of ``decider.processors``, bottom first: each imports only from layers
below it and from itself. The package's own ``__init__`` (the public names) is above all."""

STORE_LAYERS: list[set[str]] = [
    {"protocol"},  # the modules beside the backends: protocol, errors, names, leases, ...
    {"memory", "sqlite", "postgres", "esdb"},  # the backends; none imports another
    {"esdb.testserver", "contract"},  # tools: a server for the adapter's tests, the suite
    {"uri"},  # opens any backend by URI
]
"""The parts of ``decider.stores``, bottom first (``protocol`` stands for the modules at the
folder's top that no other part names; ``esdb._proto`` belongs to ``esdb``)."""

STORE_PARTS = {"memory", "sqlite", "postgres", "esdb", "esdb.testserver", "contract", "uri"}

TEST_SERVER = "decider.stores.esdb.testserver"
ADAPTER = "decider.stores.esdb"

KNOWN: dict[tuple[str, str], str] = {}
"""Imports that still break the order or close a circle, and the change that removes each."""


# -- reading imports ------------------------------------------------------------------------


def module_name(relative: Path) -> str:
    """The installed module name of a source file (``processors/app/definition.py`` ->
    ``decider.processors.app.definition``); the repository's folders map onto one root."""
    parts = list(relative.with_suffix("").parts)
    if parts[0] in ("stores", "processors"):
        parts.insert(0, "decider")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources(*patterns: str) -> list[Path]:
    """The repository's Python files matching ``patterns`` (relative to the root), never
    through the links ``decider/stores`` and ``decider/processors``, never generated code."""
    found = {path for pattern in patterns for path in ROOT.glob(pattern)}
    links = [ROOT / "decider" / "stores", ROOT / "decider" / "processors"]
    return sorted(
        p
        for p in found
        if not any(p.is_relative_to(link) for link in links) and "_pb2" not in p.name
    )


@cache
def _files() -> dict[str, Path]:
    """Every module of the three packages by name (the core, the stores, the processors)."""
    return {
        module_name(p.relative_to(ROOT)): p
        for p in sources("decider/**/*.py", "stores/**/*.py", "processors/**/*.py")
    }


@cache
def _reexports(package: str) -> dict[str, str]:
    """``name -> module`` for what ``package``'s ``__init__.py`` imports by name (at the top
    or under ``TYPE_CHECKING``: a lazy ``__getattr__`` hands on the same names)."""
    path = _files().get(package)
    if path is None or path.name != "__init__.py":
        return {}
    found = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                found[alias.asname or alias.name] = node.module
    return found


def origin(base: str, name: str) -> str:
    """The module that ``from base import name`` depends on: a submodule, or the module that
    defines a name ``base``'s ``__init__`` re-exports (followed to its end), or ``base``."""
    if f"{base}.{name}" in _files():
        return f"{base}.{name}"
    seen = set()
    while name in _reexports(base) and (base, name) not in seen:
        seen.add((base, name))
        base = _reexports(base)[name]
        if f"{base}.{name}" in _files():
            return f"{base}.{name}"
    return base


def imports(source: str, module: str, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for every module that ``source`` (the text of ``module``) imports,
    wherever the import stands."""
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
                if base.startswith("decider"):
                    yield node.lineno, origin(base, alias.name)
                else:
                    yield node.lineno, f"{base}.{alias.name}"
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


def known_module(name: str) -> str | None:
    """The longest module of the repository that ``name`` names or lies in."""
    files = _files()
    while name and name not in files:
        name = name.rpartition(".")[0]
    return name or None


@cache
def graph() -> dict[str, dict[str, list[int]]]:
    """``module -> {imported module: [lines]}`` among the modules of ``processors/`` and
    ``stores/``."""
    edges: dict[str, dict[str, list[int]]] = {}
    for name, path in _files().items():
        if not name.startswith(("decider.processors", "decider.stores")):
            continue
        found = edges.setdefault(name, {})
        for line, imported in imports(path.read_text(), name, path.name == "__init__.py"):
            target = known_module(imported)
            if target is None or target == name:
                continue
            if target.startswith(("decider.processors", "decider.stores")):
                found.setdefault(target, []).append(line)
    return edges


def circles(edges: dict[str, dict[str, list[int]]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def part_of(module: str) -> tuple[str, str] | None:
    """``("processors" | "stores", part)`` for a module of a sub-package; ``None`` for a
    package's own ``__init__`` (its public face)."""
    parts = module.split(".")
    if parts[1] == "processors":
        return ("processors", parts[2]) if len(parts) > 2 else None
    if len(parts) == 2:
        return None
    if ".".join(parts[2:4]) in STORE_PARTS:
        return "stores", ".".join(parts[2:4])
    if parts[2] in STORE_PARTS:
        return "stores", parts[2]
    return "stores", "protocol"


def layer(kind: str, part: str) -> int:
    layers = PROCESSOR_LAYERS if kind == "processors" else STORE_LAYERS
    return next(i for i, names in enumerate(layers) if part in names)


def order_breaks() -> dict[tuple[str, str], list[int]]:
    """``(importer, imported) -> lines`` for each import that is not downwards."""
    found = {}
    for module, targets in graph().items():
        here = part_of(module)
        if here is None:
            continue
        for target, lines in targets.items():
            there = part_of(target)
            if there is None or there == here or there[0] != here[0]:
                continue
            if layer(*here) <= layer(*there):
                found[module, target] = lines
    return found


def violations(
    files: Iterable[Path], forbidden: str, allowed: dict[str, set[str]] | None = None
) -> list[str]:
    """``path:line imports module`` for each import of ``forbidden`` or a module below it,
    except the modules ``allowed[path]`` names for that file."""
    found = []
    for path in files:
        relative = path.relative_to(ROOT)
        module = module_name(relative)
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


# -- between packages -----------------------------------------------------------------------


def test_the_source_sets_are_found() -> None:
    assert ROOT / "decider" / "workflow.py" in CORE
    assert ROOT / "decider" / "testing" / "spec.py" in CORE
    assert not [p for p in CORE if "stores" in p.parts or "processors" in p.parts]
    assert ROOT / "processors" / "cli" / "loading.py" in PROCESSORS
    assert ROOT / "stores" / "esdb" / "testserver" / "server.py" in STORES
    assert {part_of(m) for m in graph()} >= {
        *(("processors", p) for names in PROCESSOR_LAYERS for p in names),
        *(("stores", p) for names in STORE_LAYERS for p in names),
    }


@pytest.mark.parametrize("layer_name", ["decider.stores", "decider.processors"])
def test_the_pure_core_imports_no_store_and_no_processor(layer_name: str) -> None:
    assert violations(CORE, layer_name) == []


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


# -- inside processors/ and stores/ ---------------------------------------------------------


def _described(pairs: Iterable[tuple[str, str]]) -> list[str]:
    return [
        f"{a} -> {b} (line {', '.join(map(str, sorted(set(graph()[a][b]))))})"
        for a, b in sorted(pairs)
    ]


def test_no_circle_among_the_modules() -> None:
    edges = {
        module: {t: lines for t, lines in targets.items() if (module, t) not in KNOWN}
        for module, targets in graph().items()
    }
    found = circles(edges)
    assert found == [], "\n".join(
        " <-> ".join(part)
        + ":\n  "
        + "\n  ".join(_described((a, b) for a in part for b in graph()[a] if b in part))
        for part in found
    )


def test_the_sub_packages_import_only_downwards() -> None:
    breaks = {pair for pair in order_breaks() if pair not in KNOWN}
    assert _described(breaks) == []


def test_every_known_exception_is_still_there() -> None:
    gone = [f"{a} -> {b}" for a, b in KNOWN if b not in graph().get(a, {})]
    assert gone == []  # fixed: take it off KNOWN


def test_the_test_server_is_a_tool_of_the_adapter() -> None:
    outside = [
        f"{m} imports {t}"
        for m, targets in graph().items()
        for t in targets
        if t.startswith(TEST_SERVER) and not m.startswith(ADAPTER + ".")
    ]
    adapter = [
        f"{m} imports {t}"
        for m, targets in graph().items()
        for t in targets
        if m.startswith(ADAPTER) and not m.startswith(TEST_SERVER) and t.startswith(TEST_SERVER)
    ]
    assert outside == []
    assert adapter == []


def test_the_checker_sees_every_kind_of_import() -> None:
    source = """
import stores.sqlite
from decider.stores import open_store, EventStore, LeaseLost
from . import sqlite
from ..processors import app
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from decider.stores.esdb import EsdbEventStore
def later():
    from decider.stores.postgres import PostgresEventStore
importlib.import_module("processors.cli")
"""
    found = sorted(imports(source, "decider.stores.memory"))
    assert found == [
        (2, "stores.sqlite"),
        (3, "decider.stores.leases"),
        (3, "decider.stores.protocol"),
        (3, "decider.stores.uri"),
        (4, "decider.stores.sqlite"),
        (5, "decider.processors.app"),
        (6, "typing.TYPE_CHECKING"),
        (8, "decider.stores.esdb.store"),
        (10, "decider.stores.postgres.store"),
        (11, "processors.cli"),
    ]


def test_the_circle_finder_finds_circles() -> None:
    edges = {"a": {"b": [1]}, "b": {"c": [1]}, "c": {"a": [1]}, "d": {"a": [1]}}
    assert circles(edges) == [["a", "b", "c"]]
