"""open_store: every scheme it knows, and a clear error for every URI it does not."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from decider.stores import NO_STREAM, StoreUnavailable, UnsupportedStoreURI
from decider.stores.contract import new_events
from decider.stores.memory import MemoryEventStore
from decider.stores.postgres import PostgresEventStore
from decider.stores.sqlite import SqliteEventStore
from decider.stores.uri import open_store
from tests.support.postgres import PG_URI, fresh_schema


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
        ("postgresql://localhost/db?schema=", "schema must be"),
        ("postgresql://localhost/db?schema=a&schema=b", "given twice"),
        ("postgresql://localhost/db?synchronous_commit=maybe", "synchronous_commit must be"),
        ("postgres://localhost/db?durability=full", "invalid URI query parameter"),
        ("postgresql://localhost/db?schema", "malformed query"),
        ("postgresql://localhost:notaport/db", "port must be a number"),
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


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_postgresql_with_store_and_libpq_parameters(scheme: str) -> None:
    base = PG_URI.split("://", 1)[1]
    with fresh_schema() as schema:
        uri = (
            f"{scheme}://{base}?schema={schema}&synchronous_commit=OFF"
            "&connect_timeout=5&application_name=decider-uri-test"
        )
        store = open_store(uri)
        try:
            assert isinstance(store, PostgresEventStore)
            assert (store.schema, store.synchronous_commit) == (schema, "off")
            store.append("s", new_events(1), NO_STREAM)
            connection, _ = store._connection()
            assert connection.info.get_parameters()["connect_timeout"] == "5"
            [(name,)] = connection.execute("SHOW application_name").fetchall()
            assert name == "decider-uri-test"
            assert schema in store.name
        finally:
            store.close()


def test_postgresql_defaults_to_the_public_schema_and_full_durability(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened: list[dict[str, object]] = []

    def record(conninfo: str, **options: object) -> MemoryEventStore:
        opened.append({"conninfo": conninfo, **options})
        return MemoryEventStore()

    monkeypatch.setattr("decider.stores.postgres.store.PostgresEventStore", record)
    open_store("postgresql://app@db.example:5432/events?sslmode=disable")
    assert opened == [
        {
            "conninfo": "postgresql://app@db.example:5432/events?sslmode=disable",
            "schema": "public",
            "synchronous_commit": "on",
            "create": True,
        }
    ]


def test_postgresql_errors_hide_the_password() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(StoreUnavailable) as unavailable:
        open_store(f"postgresql://app:s3cret@127.0.0.1:{port}/events?connect_timeout=5")
    assert f"app@127.0.0.1:{port}/events" in str(unavailable.value)
    assert "s3cret" not in str(unavailable.value)
    uri = "postgresql://app:s3cret@127.0.0.1/events?schema=a&schema=b"
    with pytest.raises(UnsupportedStoreURI) as unsupported:
        open_store(uri)
    assert unsupported.value.uri == "postgresql://app:***@127.0.0.1/events?schema=a&schema=b"
    assert "s3cret" not in str(unsupported.value)


@pytest.mark.parametrize(
    ("uri", "adapter", "driver", "extra"),
    [
        ("esdb://localhost:2113?Tls=false", "decider.stores.esdb.store", "esdbclient", "esdb"),
        (
            "postgresql://app@127.0.0.1/events",
            "decider.stores.postgres.store",
            "psycopg",
            "postgres",
        ),
    ],
)
def test_an_adapter_without_its_driver_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, uri: str, adapter: str, driver: str, extra: str
) -> None:
    # the adapter chooses its client package in ``_client``, beside it: forget both
    for module in (adapter, adapter.rpartition(".")[0] + "._client"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, driver, None)
    with pytest.raises(UnsupportedStoreURI) as caught:
        open_store(uri)
    # The distribution's name: ``decider`` on PyPI is another project.
    assert caught.value.reason == (
        f"the {driver} package is missing: pip install 'decider-workflows[{extra}]'"
    )


def test_esdb_opens_the_adapter_lazily() -> None:
    store = open_store("esdb://localhost:2113?Tls=false")
    try:
        assert type(store).__name__ == "EsdbEventStore"
    finally:
        store.close()
