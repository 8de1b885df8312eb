"""One owner per concept: the codec parses the wire format, one vocabulary spells the kinds,
one grammar builds stream names.

AST scans of the source:

- no engine module (``processors/`` but the CLI and the console, which speak to people) loads
  JSON or splits a stored type name: the codec does;
- no module of the processors (the CLI and the console included), the core or the stores
  spells a workflow event's kind as a bare string (``"Sent"``, ``"Completed"``): they use
  :class:`decider.kinds.Kind`;
- no module of the processors or the core but the two stream-name modules
  (:mod:`decider.streams`, the grammar, and ``processors/app/streams.py``, the processors' names
  built on it) builds a stream name, and the stores take their own streams' prefixes from the
  core's grammar;
- ``stores/`` imports nothing of the pure core but that grammar (it deals in bytes).
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
from decider import streams as grammar
from decider.codec import EVENT_KINDS, Kind
from decider.processors.app import streams

ROOT = Path(__file__).resolve().parents[2]
PROCESSORS = sorted((ROOT / "processors").rglob("*.py"))
ENGINE = [p for p in PROCESSORS if not {"cli", "console"} & set(p.relative_to(ROOT).parts)]
"""The processors' modules but the CLI's and the console's."""
CORE = sorted([*(ROOT / "decider").glob("*.py"), *(ROOT / "decider" / "testing").glob("*.py")])
STORES = sorted((ROOT / "stores").rglob("*.py"))
KINDS = ROOT / "decider" / "kinds.py"
"""The one module that spells the kinds."""
STREAM_NAMES = {ROOT / "decider" / "streams.py", ROOT / "processors" / "app" / "streams.py"}
"""The modules that build stream names: the core's grammar and the processors' names."""
JSON_ALLOWED = {
    "processors/engine/logs.py": "writes log lines and reads a log config file as JSON: not the "
    "stored wire format",
}
"""Modules that may import json, each with the reason (no stored type name is exempted)."""
STREAM_WORDS = (
    *(grammar.system_prefix(word) for word in ("parked", "failed", "skipped", "cancel")),
    *(grammar.system_prefix(word) for word in ("partitions", "leases", "checkpoint")),
    grammar.system_stream("lease"),
    *(grammar.stream_prefix(first) for first in (*grammar.RESERVED[1:], grammar.INPUTS)),
    "-parked",
    "-failed",
    "-skipped",
)
"""The beginnings of the literal stream names built outside the stream-name modules (as they
stand, so a copy of one is found)."""
STREAM_WORDS_ALLOWED = {
    "stores/esdb/_persistent.py": "EventStoreDB's own stream of a persistent subscription's "
    "parked events ($persistentsubscription-<...>-parked), not one of ours",
    "stores/esdb/testserver/reads.py": "the test server names that stream as EventStoreDB does",
}
"""Modules that may hold one of :data:`STREAM_WORDS`, each with the reason."""


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


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


def _prose(tree: ast.Module) -> set[int]:
    """The ids of the string constants that are docstrings (of a module, class, function or
    attribute: any string standing as a statement) or names in ``__all__``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            found.add(id(node.value))
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                found.update(id(n) for n in ast.walk(node) if isinstance(n, ast.Constant))
    return found


def _bare_kinds(path: Path) -> list[str]:
    """The workflow event kinds ``path`` spells as bare strings (``"Sent"``, ``"Sent:x"``)."""
    tree = _tree(path)
    prose = _prose(tree)
    kinds = {kind.value for kind in Kind}
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in prose
            and (node.value in kinds or node.value.partition(":")[0] in kinds)
        ):
            found.append(f"line {node.lineno}: the kind {node.value!r}")
    return found


def _stream_literals(path: Path) -> list[str]:
    """The literal beginnings of stream names in ``path`` (see :data:`STREAM_WORDS`)."""
    found = []
    for node in ast.walk(_tree(path)):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and any(
                node.value.startswith(w) or node.value == w.strip("-") + "-" for w in STREAM_WORDS
            )
        ):
            found.append(f"line {node.lineno}: the stream prefix {node.value!r}")
    return found


def _stream_building(path: Path) -> list[str]:
    """What in ``path`` builds a stream name: an f-string that joins a value with ``-`` into a
    name (no whitespace in its text: a sentence such as ``"partitions (0-{n})"`` is not a
    name, nor is a command-line option ``"--{name}"``), or a literal stream prefix."""
    found = _stream_literals(path)
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.JoinedStr):
            texts = [
                p.value
                for p in node.values
                if isinstance(p, ast.Constant) and isinstance(p.value, str)
            ]
            if any(c.isspace() for t in texts for c in t) or (texts and texts[0][:2] == "--"):
                continue
            for left, right in itertools.pairwise(node.values):
                joined = any(
                    p.value.endswith("-") or p.value.startswith("-")
                    for p in (left, right)
                    if isinstance(p, ast.Constant) and isinstance(p.value, str)
                )
                if joined and any(isinstance(p, ast.FormattedValue) for p in (left, right)):
                    found.append(f"line {node.lineno}: an f-string joins a value with '-'")
    return found


@pytest.mark.parametrize("path", ENGINE, ids=_relative)
def test_no_engine_module_parses_the_wire_format(path: Path) -> None:
    assert _wire_parsing(path, json_allowed=_relative(path) in JSON_ALLOWED) == []


@pytest.mark.parametrize("path", [*PROCESSORS, *CORE, *STORES], ids=_relative)
def test_no_module_but_the_vocabulary_spells_a_kind(path: Path) -> None:
    if path == KINDS:
        assert _bare_kinds(path)  # the one place, found by the scan
    else:
        assert _bare_kinds(path) == []


@pytest.mark.parametrize(
    "path", [p for p in (*PROCESSORS, *CORE) if p not in STREAM_NAMES], ids=_relative
)
def test_no_module_but_the_stream_names_builds_a_stream_name(path: Path) -> None:
    assert _stream_building(path) == []


@pytest.mark.parametrize(
    "path", [p for p in STORES if _relative(p) not in STREAM_WORDS_ALLOWED], ids=_relative
)
def test_the_stores_take_their_stream_names_from_the_core(path: Path) -> None:
    assert _stream_literals(path) == []


def test_the_scope_covers_the_cli_the_console_and_the_core() -> None:
    scanned = {_relative(p) for p in (*PROCESSORS, *CORE)}
    assert {"processors/cli/operate.py", "processors/console/pages.py"} <= scanned
    assert {"processors/commands/processor.py", "decider/codec.py"} <= scanned
    assert "processors/commands/processor.py" in {_relative(p) for p in ENGINE}
    assert "decider/testing/spec.py" in scanned
    assert set(JSON_ALLOWED) | set(STREAM_WORDS_ALLOWED) <= {
        _relative(p) for p in (*PROCESSORS, *STORES)
    }


def test_the_scans_find_what_they_look_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import json\n"
        "kind, _, name = t.partition(':')\n"
        "a = f'Sent:{name}'\n"
        "b = f'{workflow}-{instance_id}'\n"
        "c = 'decider-skipped-' + name\n"
        "if kind == 'Completed': pass\n"
        "d = 'decider-lease-' + partition\n"
    )
    assert {f.split(":")[0] for f in _wire_parsing(sample)} == {"line 1", "line 2", "line 3"}
    assert {f.split(":")[0] for f in _stream_building(sample)} == {"line 4", "line 5", "line 7"}
    assert {f.split(":")[0] for f in _stream_literals(sample)} == {"line 5", "line 7"}
    assert {f.split(":")[0] for f in _bare_kinds(sample)} == {"line 3", "line 6"}
    # The exemption covers the json import alone, not a stored type name.
    assert {f.split(":")[0] for f in _wire_parsing(sample, json_allowed=True)} == {
        "line 2",
        "line 3",
    }


def test_the_scans_pass_over_prose(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Completed: a docstring may name a kind."""\n'
        "__all__ = ['Published', 'Sent']\n"
        "a = f'ran in {count} partitions (0-{count - 1})'\n"
        "b = f'--{which}-{side}'\n"
        "c = 'decider-console-stop'\n"
        "d = Kind.SENT\n"
    )
    assert _bare_kinds(sample) == []
    assert _stream_building(sample) == []


@pytest.mark.parametrize("path", STORES, ids=_relative)
def test_the_stores_import_nothing_of_the_pure_core_but_the_stream_names(path: Path) -> None:
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            assert (
                node.module == "decider.stores"
                or node.module.startswith(
                    ("decider.stores.", "stores", "esdbclient", "kurrentdbclient", "psycopg")
                )
                or not node.module.startswith("decider")
                or node.module == "decider.streams"
                or (node.module == "decider" and names == ["decider.streams"])
            ), f"{path}: imports {node.module}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert (
                    alias.name == "decider.stores"
                    or not alias.name.startswith("decider")
                    or (alias.name.startswith("decider.stores."))
                    or alias.name == "decider.streams"
                ), f"{path}: imports {alias.name}"


# Text a store can hold (no NUL, no lone surrogate): every generated id must build a stream,
# so no example passes by the name being refused.
_IDS = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1, max_size=40
)


@given(instance_id=_IDS)
def test_instance_streams_are_named_as_the_core_names_them(instance_id: str) -> None:
    workflow: Workflow[Any, int, Any] = Workflow("Order", 0, lambda s, e: s, lambda i, s: [])
    built = streams.instance_stream("Order", instance_id)
    assert built == workflow.stream(instance_id)
    assert streams.workflow_of(built) == "Order"
