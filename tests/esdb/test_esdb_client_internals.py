"""What the EventStoreDB adapter takes from the client's internals is read in one module,
:mod:`decider.stores.esdb._client`: no other module of the adapter reads a private attribute
of the installed client (``esdbclient`` or ``kurrentdbclient``), found from its own source."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from decider.stores.esdb._client import CLIENT

ADAPTER = Path(__file__).resolve().parents[2] / "stores" / "esdb"
_ASSIGNED = re.compile(r"\bself\.(_[a-z]\w*)\s*[:=]")


def client_private_names() -> set[str]:
    """The private attributes of the installed client: its class's private methods and what
    the package's modules assign to ``self._...``."""
    package = importlib.import_module(CLIENT.package)
    names = {n for n in dir(CLIENT.client_class) if n.startswith("_") and not n.startswith("__")}
    for source in Path(package.__file__ or "").parent.glob("*.py"):
        names.update(_ASSIGNED.findall(source.read_text()))
    return names - {"_abc_impl"}


def private_reads(path: Path, names: set[str]) -> list[str]:
    """``line: expression`` for each read of one of ``names`` on something that is not
    ``self`` (an object's own attributes may share a name with the client's)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in names
            and not (isinstance(node.value, ast.Name) and node.value.id == "self")
        ):
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_client_has_the_private_attributes_the_adapter_reads() -> None:
    names = client_private_names()
    assert {"_connection", "_call_metadata", "_call_credentials"} <= names
    assert "_construct_grpc_channel" in names
    assert private_reads(ADAPTER / "_client.py", names)  # the one reader reads them


def test_only_the_client_module_reads_the_clients_private_attributes() -> None:
    names = client_private_names()
    modules = [p for p in sorted(ADAPTER.glob("*.py")) if p.name != "_client.py"]
    found = [read for path in modules for read in private_reads(path, names)]
    assert found == []
