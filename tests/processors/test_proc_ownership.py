"""One owner per concept: the codec parses the wire format, streams.py builds stream names.

An AST scan of the engine's modules (``processors/`` but the CLI, which others own): no
module but the codec loads JSON or splits a stored type name, no module but
``processors/app/streams.py`` builds a stream name, and ``stores/`` imports nothing of the pure
core (it deals in bytes).
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from decider import Workflow
from decider.codec import EVENT_KINDS
from decider.processors.app import streams

ROOT = Path(__file__).resolve().parents[2]
ENGINE = sorted(p for p in (ROOT / "processors").glob("*.py"))
STORES = sorted((ROOT / "stores").rglob("*.py"))
JSON_ALLOWED = {
    "logs.py": "writes log lines and reads a log config file as JSON: not the stored wire format",
}
"""Modules that may import json, each with the reason (no stored type name is exempted)."""
STREAM_WORDS = ("decider-", "timer-", "topic-", "reply-", "-parked", "-failed", "-skipped")


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _wire_parsing(path: Path, json_allowed: bool = False) -> list[str]:
    """What in ``path`` parses stored type names or JSON itself (``json_allowed``: importing
    json is not counted)."""
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            if "json" in names and not json_allowed:
                found.append(f"line {node.lineno}: imports json")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if any(node.value.startswith(f"{kind}:") for kind in EVENT_KINDS) or node.value == ":":
                found.append(f"line {node.lineno}: the literal {node.value!r}")
        elif isinstance(node, ast.JoinedStr):
            literal = "".join(
                v.value
                for v in node.values
                if isinstance(v, ast.Constant) and isinstance(v.value, str)
            )
            if any(literal.startswith(kind) for kind in EVENT_KINDS) and ":" in literal:
                found.append(f"line {node.lineno}: builds a stored type name")
    return found


def _stream_building(path: Path) -> list[str]:
    """What in ``path`` builds a stream name: an f-string joining a value with ``-``, or a
    literal stream prefix of the processors."""
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.JoinedStr):
            parts = node.values
            for left, right in itertools.pairwise(parts):
                texts = [
                    p.value
                    for p in (left, right)
                    if isinstance(p, ast.Constant) and isinstance(p.value, str)
                ]
                joined = any(t.endswith("-") or t.startswith("-") for t in texts)
                if joined and any(isinstance(p, ast.FormattedValue) for p in (left, right)):
                    found.append(f"line {node.lineno}: an f-string joins a value with '-'")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and any(
                node.value.startswith(w) or node.value == w.strip("-") + "-" for w in STREAM_WORDS
            )
        ):
            found.append(f"line {node.lineno}: the stream prefix {node.value!r}")
    return found


@pytest.mark.parametrize("path", ENGINE, ids=lambda p: p.name)
def test_no_engine_module_parses_the_wire_format(path: Path) -> None:
    assert _wire_parsing(path, json_allowed=path.name in JSON_ALLOWED) == []


@pytest.mark.parametrize(
    "path", [p for p in ENGINE if p.name != "streams.py"], ids=lambda p: p.name
)
def test_no_engine_module_but_streams_builds_a_stream_name(path: Path) -> None:
    assert _stream_building(path) == []


def test_the_scans_find_what_they_look_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import json\n"
        "kind, _, name = t.partition(':')\n"
        "a = f'Sent:{name}'\n"
        "b = f'{workflow}-{instance_id}'\n"
        "c = 'decider-skipped-' + name\n"
    )
    assert {f.split(":")[0] for f in _wire_parsing(sample)} == {"line 1", "line 2", "line 3"}
    assert {f.split(":")[0] for f in _stream_building(sample)} == {"line 4", "line 5"}
    # The exemption covers the json import alone, not a stored type name.
    assert {f.split(":")[0] for f in _wire_parsing(sample, json_allowed=True)} == {
        "line 2",
        "line 3",
    }


@pytest.mark.parametrize("path", STORES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_stores_import_nothing_of_the_pure_core(path: Path) -> None:
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module:
            assert (
                node.module == "decider.stores"
                or node.module.startswith(
                    ("decider.stores.", "stores", "esdbclient", "kurrentdbclient", "psycopg")
                )
                or not node.module.startswith("decider")
            ), f"{path}: imports {node.module}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert (
                    alias.name == "decider.stores"
                    or not alias.name.startswith("decider")
                    or (alias.name.startswith("decider.stores."))
                ), f"{path}: imports {alias.name}"


@given(instance_id=st.text(min_size=1, max_size=40).filter(lambda s: "\x00" not in s))
def test_instance_streams_are_named_as_the_core_names_them(instance_id: str) -> None:
    workflow: Workflow[Any, int, Any] = Workflow("Order", 0, lambda s, e: s, lambda i, s: [])
    try:
        built = streams.instance_stream("Order", instance_id)
    except ValueError:
        return  # a lone surrogate: no store could hold it
    assert built == workflow.stream(instance_id)
    assert streams.workflow_of(built) == "Order"
