"""open_store: every scheme it knows, and a clear error for every URI it does not."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from stores import NO_STREAM, UnsupportedStoreURI
from stores.contract import new_events
from stores.memory import MemoryEventStore
from stores.sqlite import SqliteEventStore
from stores.uri import open_store


def test_memory() -> None:
    store = open_store("memory://")
    assert isinstance(store, MemoryEventStore)
    store.close()


def test_sqlite_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///data.db")
    try:
        assert isinstance(store, SqliteEventStore)
        store.append("s", new_events(1), NO_STREAM)
        assert store.path == "data.db"
        assert (tmp_path / "data.db").exists()
    finally:
        store.close()


def test_sqlite_absolute_path_with_parameters(tmp_path: Path) -> None:
    path = tmp_path / "with space.db"
    uri = f"sqlite:///{path.as_posix().replace(' ', '%20')}?synchronous=normal&busy_timeout=2"
    store = open_store(uri)
    try:
        assert isinstance(store, SqliteEventStore)
        assert (store.path, store.synchronous) == (str(path), "NORMAL")
        assert path.exists()
    finally:
        store.close()


def test_sqlite_in_memory() -> None:
    store = open_store("sqlite:///:memory:")
    try:
        assert isinstance(store, SqliteEventStore) and store.path == ":memory:"
        store.append("s", new_events(1), NO_STREAM)
        assert len(store.read_stream("s")) == 1
    finally:
        store.close()


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        ("events.db", "expected scheme://"),
        ("ftp://host/x", "unknown scheme 'ftp'"),
        ("memory://somewhere", "takes no host"),
        ("sqlite://", "missing database path"),
        ("sqlite:///", "missing database path"),
        ("sqlite://host/e.db", "has no host"),
        ("sqlite:///e.db?synchronous=SOMETIMES", "synchronous must be one of"),
        ("sqlite:///e.db?durability=FULL", "unknown parameter 'durability'"),
        ("sqlite:///e.db?busy_timeout=soon", "busy_timeout must be a number"),
        ("sqlite:///e.db?probe_interval=0", "probe_interval must be"),
        ("sqlite:///e.db?synchronous=FULL&synchronous=OFF", "given twice"),
        ("sqlite:///e.db?synchronous", "malformed query"),
        ("postgresql://user@localhost/events", "PostgreSQL adapter is not available yet"),
        ("postgres://localhost/events", "PostgreSQL adapter is not available yet"),
    ],
)
def test_bad_uris_name_the_uri_and_the_reason(
    uri: str, reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedStoreURI, match="unsupported store URI") as caught:
        open_store(uri)
    assert caught.value.uri == uri
    assert reason in caught.value.reason
    assert not (tmp_path / "e.db").exists()


def test_esdb_without_its_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "stores.esdb", raising=False)
    monkeypatch.setitem(sys.modules, "esdbclient", None)
    with pytest.raises(UnsupportedStoreURI) as caught:
        open_store("esdb://localhost:2113?Tls=false")
    if importlib.util.find_spec("stores.esdb") is None:
        assert "adapter cannot be loaded" in caught.value.reason
    else:
        assert "pip install 'decider[esdb]'" in caught.value.reason


def test_esdb_opens_the_adapter_lazily() -> None:
    if importlib.util.find_spec("stores.esdb") is None:
        pytest.skip("stores.esdb is not written yet")
    store = open_store("esdb://localhost:2113?Tls=false")
    try:
        assert type(store).__name__ == "EsdbEventStore"
    finally:
        store.close()
