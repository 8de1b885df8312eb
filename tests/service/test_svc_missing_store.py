"""A read-only command never creates a store: a mistyped PostgreSQL ``?schema=`` (or SQLite
path) is refused with one line naming it (no password), exit 2, and nothing is created;
``publish`` and ``run`` still create a new store."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from decider.processors.cli import main
from decider.stores import StoreNotFound, open_store
from tests.support.postgres import PG_URI, fresh_schema

APP = "samples.traffic_fine:app"
SECRET_URI = PG_URI.replace("postgres@", "postgres:s3cret@", 1)


def schema_exists(schema: str) -> bool:
    with psycopg.connect(PG_URI, autocommit=True, connect_timeout=10) as connection:
        row = connection.execute(
            "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = %s)", (schema,)
        ).fetchone()
    return bool(row and row[0])


@pytest.mark.parametrize(
    "command",
    [["status"], ["list"], ["parked"], ["show", "IssueTrafficFineForSpeedingViolation-PR-1"]],
    ids=lambda c: c[0],
)
def test_a_read_only_command_refuses_a_schema_that_does_not_exist(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert "s3cret" in SECRET_URI
    with fresh_schema() as schema:
        uri = f"{SECRET_URI}?schema={schema}"
        assert main([*command, "--app", APP, "--store", uri]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        shown = PG_URI.removeprefix("postgresql://")
        assert err == (
            f"decider: error: no PostgreSQL event store at postgresql://{shown}?schema={schema}: "
            f"schema '{schema}' does not exist (nothing was created)\n"
        )
        assert not schema_exists(schema)


def test_a_schema_without_the_store_is_refused_and_publish_creates_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with fresh_schema() as schema:
        uri = f"{PG_URI}?schema={schema}"
        with psycopg.connect(PG_URI, autocommit=True, connect_timeout=10) as connection:
            connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        assert main(["status", "--app", APP, "--store", uri]) == 2
        assert f"schema '{schema}' holds no event store" in capsys.readouterr().err
        with pytest.raises(StoreNotFound, match="holds no event store"):
            open_store(uri, create=False)
        report = {"police_report_id": "PR-1", "offense": {"location": "Meir"}}
        published = ["publish", "fines.PoliceReportPublished", json.dumps(report)]
        assert main([*published, "--app", APP, "--store", uri]) == 0
        capsys.readouterr()
        assert main(["status", "--app", APP, "--store", uri]) == 0
        assert capsys.readouterr().out.startswith("app traffic-fines: 0 instances")
        open_store(uri, create=False).close()


def test_open_store_without_create_refuses_a_missing_sqlite_file(tmp_path: Path) -> None:
    db = tmp_path / "events.db"
    with pytest.raises(StoreNotFound, match=r"no SQLite database at .* \(nothing was created\)"):
        open_store(f"sqlite:///{db}", create=False)
    assert not db.exists()
