"""The benchmarks' quick mode runs in-process and reports every figure (never checks speed)."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest

# `benchmarks` is not an installed package; `python -m pytest` finds it from the repo root,
# a bare `pytest` needs the root on the path.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from benchmarks import floor, pg  # noqa: E402
from benchmarks.__main__ import main, parse_args  # noqa: E402
from benchmarks.harness import (  # noqa: E402
    Figure,
    Pending,
    Target,
    format_legend,
    format_markdown,
    format_table,
)
from benchmarks.runner import run, to_json  # noqa: E402
from decider.stores.esdb._client import load  # noqa: E402
from decider.stores.postgres import PostgresEventStore  # noqa: E402

_APPEND_SESSION = load().new_events is not None
"""kurrentdbclient: the EventStoreDB runs include a 25.1 node's (``AppendSession``)."""

EXPECTED_KEYS = {
    "core_overhead",
    "codec",
    "append_single",
    "append_batch",
    "append_pg_single",
    "append_pg_batch",
    "append_pg_writers_1",
    "append_pg_writers_4",
    "append_pg_writers_16",
    "latency_warm",
    "latency_cold",
    "latency_warm_memory",
    "latency_cold_memory",
    "e2e_sqlite_100",
    "e2e_sqlite_300",
    "e2e_sqlite_growth",
    "e2e_memory_100",
    "e2e_esdb_100",
    "e2e_esdb_vs_sqlite_100",
    "e2e_esdb_v1_100",
    "e2e_esdb_v1_vs_sqlite_100",
    *(("e2e_esdb_25_100", "e2e_esdb_25_vs_sqlite_100") if _APPEND_SESSION else ()),
    "client_cpu_esdb_v1_100",
    *(("client_cpu_esdb_25_100",) if _APPEND_SESSION else ()),
    "client_cpu_esdb_100",
    "e2e_postgres_100",
    *(f"pool_{kind}_{size}" for kind in ("sync", "async") for size in (1, 4, 16, 64)),
    "pool_alone_16",
    "pool_alone_64",
    "pool_head_of_line",
    "pool_crash",
    "pool_instant",
    "snapshot_cold",
    "snapshot_cold_memory",
    "state_stored_sqlite",
    "scaleout_sqlite_1",
    "scaleout_sqlite_2",
    "scaleout_sqlite_cpu",
    "scaleout_sqlite_reads",
    "scaleout_sqlite_busiest",
    "scaleout_sqlite_failover",
    "scaleout_sqlite_growth",
    "scaleout_postgres_1",
    "scaleout_postgres_2",
    "scaleout_postgres_cpu",
    "scaleout_postgres_reads",
    "scaleout_postgres_busiest",
    "scaleout_postgres_failover",
    "scaleout_postgres_growth",
    "alone_memory_inproc",
    "alone_sqlite_inproc",
    "alone_sqlite_run",
    "alone_request_median_sqlite_run",
    "alone_request_p99_sqlite_run",
    "alone_postgres_inproc",
    "alone_postgres_run",
    "floor_sqlite",
    "floor_live_sqlite",
    "floor_memory",
    "floor_postgres",
    "floor_postgres_server",
}

_UNREACHABLE = "postgresql://bench:s3cret@127.0.0.1:1/nowhere"


def _check_figure(figure: dict[str, Any]) -> None:
    assert figure["rate"] > 0 and math.isfinite(figure["rate"]), figure
    assert figure["ratio_is"], figure
    if figure["baseline_rate"] is not None:
        assert figure["baseline_rate"] > 0, figure
    if figure["target"] is not None:
        assert figure["ratio"] is not None and figure["ratio"] > 0, figure
        assert isinstance(figure["met"], bool), figure


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory = tmp_path_factory.mktemp("bench")
    path, markdown = directory / "report.json", directory / "table.md"
    assert main(["--quick", "--json", str(path), "--markdown", str(markdown)]) == 0
    report: dict[str, Any] = json.loads(path.read_text())
    report["markdown"] = markdown.read_text()
    return report


def test_quick_mode_reports_every_figure(quick_report: dict[str, Any]) -> None:
    # Figure 6d needs the git history (the code before the pool); a tree without it says so.
    pending = [
        r
        for r in quick_report["results"]
        if "pending" in r and not (r["key"] == "pool_instant" and "git archive" in r["pending"])
    ]
    assert pending == []
    figures = {r["key"]: r for r in quick_report["results"]}
    assert set(figures) == EXPECTED_KEYS
    for figure in figures.values():
        if "pending" not in figure:
            _check_figure(figure)
    table_rows = quick_report["markdown"].split("\n\n")[0].strip().splitlines()[2:]
    assert [row.split(" | ")[0] for row in table_rows] == [
        f"| {r['title']}" for r in quick_report["results"]
    ]


def test_report_names_the_machine_and_mode(quick_report: dict[str, Any]) -> None:
    assert quick_report["mode"] == "quick"
    assert quick_report["machine"]["cores"] >= 1
    assert quick_report["machine"]["python"].count(".") == 2
    assert quick_report["date"]


def test_end_to_end_figures_carry_their_context(quick_report: dict[str, Any]) -> None:
    figures = {r["key"]: r for r in quick_report["results"]}
    raw_rate = figures["append_single"]["baseline_rate"]
    pg_raw_rate = figures["append_pg_single"]["baseline_rate"]
    yardsticks = {
        "e2e_sqlite_100": raw_rate,
        "e2e_sqlite_300": raw_rate,
        "e2e_memory_100": raw_rate,
        "e2e_esdb_100": raw_rate,
        "e2e_postgres_100": pg_raw_rate,
    }
    for key, yardstick in yardsticks.items():
        run = figures[key]["extra"]
        assert run["completed"] == run["issued"] == run["stored_issued"] == run["n"]
        assert run["errors"] == []
        assert run["peak_rss_mb"] >= run["peak_rss_before_service_mb"] > 0
        assert figures[key]["baseline_rate"] == yardstick
        assert figures[key]["ratio"] == figures[key]["rate"] / yardstick
    assert "R_pg" in figures["e2e_postgres_100"]["ratio_is"]
    growth = figures["e2e_sqlite_growth"]
    assert growth["target"] == {"op": "<=", "value": 3.3}
    assert growth["extra"]["big"]["n"] == 300


def test_latency_figures_cover_every_length(quick_report: dict[str, Any]) -> None:
    figures = {r["key"]: r for r in quick_report["results"]}
    for key in ("latency_warm", "latency_cold", "latency_warm_memory", "latency_cold_memory"):
        extra = figures[key]["extra"]
        assert extra["lengths"] == [10, 1_000, 10_000]
        assert all(extra["warm_ms"][str(n)] > 0 for n in extra["lengths"])
        assert all(extra["cold_ms"][str(n)] > 0 for n in extra["lengths"])


def test_one_at_a_time_figures_carry_latencies_and_their_yardstick(
    quick_report: dict[str, Any],
) -> None:
    figures = {r["key"]: r for r in quick_report["results"]}
    raw = figures["append_single"]["baseline_rate"]
    raw_pg = figures["append_pg_single"]["baseline_rate"]
    for key, figure in figures.items():
        if not key.startswith("alone_"):
            continue
        extra = figure["extra"]
        for name in ("workflow_median_ms", "workflow_p99_ms", "request_median_ms"):
            assert math.isfinite(extra[name]) and extra[name] > 0, (key, name)
        assert extra["workflow_median_ms"] <= extra["workflow_p99_ms"], key
        assert extra["request_median_ms"] <= extra["request_p99_ms"], key
        if key.startswith("alone_sqlite"):
            assert figure["baseline"] == "R" and figure["baseline_rate"] == raw
        if key.startswith("alone_postgres"):
            assert figure["baseline"] == "R_pg" and figure["baseline_rate"] == raw_pg
    request = figures["alone_request_median_sqlite_run"]
    assert request["rate"] == request["extra"]["request_median_ms"]


def test_floor_figures_carry_the_split_and_the_calls(quick_report: dict[str, Any]) -> None:
    figures = {r["key"]: r for r in quick_report["results"]}
    for kind in ("sqlite", "memory", "postgres"):
        figure = figures[f"floor_{kind}"]
        extra = figure["extra"]
        assert figure["ratio"] == figure["rate"] / figure["baseline_rate"]
        assert figure["target"] == {"op": "<=", "value": floor.TARGETS[kind]}
        # The split: the service's threads by name, the observer's left out.
        split = extra["threads_us_per_workflow"]
        assert "decider:traffic-fines.workflow.IssueTrafficFineForSpeedingViolation" in split
        assert "decider:traffic-fines.commands" in split
        assert "floor-observer" not in split
        assert all(us >= 0 for us in split.values())
        # The note lists the threads, busiest first (which one is busiest varies by run).
        assert "per thread (us/workflow): " in figure["note"]
        assert "workflow.IssueTrafficFineForSpeedingViolation " in figure["note"]
        assert extra["calls_per_workflow"]["service"] > 0
        assert extra["calls_per_workflow"]["loop"] > 0
        # The loop wrote what the service wrote.
        assert extra["same_rows"] and extra["events_per_workflow"] == floor.EVENTS_PER_WORKFLOW
        assert extra["streams"]["IssueTrafficFineForSpeedingViolation"] == 8 * extra["n"]
    server = figures["floor_postgres_server"]
    assert server["rate"] > 0 and server["baseline_rate"] > 0
    assert server["target"] == {"op": "<=", "value": floor.SERVER_TARGET}


def test_the_live_shape_is_measured_against_the_catch_up_run(
    quick_report: dict[str, Any],
) -> None:
    figures = {r["key"]: r for r in quick_report["results"]}
    live, catch_up = figures["floor_live_sqlite"], figures["floor_sqlite"]
    assert live["baseline_rate"] == catch_up["rate"]  # the same run's catch-up median
    assert live["ratio"] == live["rate"] / live["baseline_rate"]
    assert live["target"] == {"op": "<=", "value": floor.LIVE_TARGET}
    extra = live["extra"]
    assert extra["live_workflows_per_second"] > 0 and extra["publish_reports_per_second"] > 0
    assert "decider-sqlite-watch" in extra["threads_us_per_workflow"]
    assert "the same rows as the catch-up run" in live["note"]


def test_the_floor_compares_rows_but_not_the_order_of_the_fines() -> None:
    def row(stream: str, revision: int, data: bytes, key: int | None = 7) -> floor._Row:
        return (stream, revision, b"id-" + data, "t", data, b"{}", key)

    one = [row("fines-issued", 0, b"a"), row("fines-issued", 1, b"b"), row("W-1", 0, b"c")]
    other = [row("fines-issued", 0, b"b"), row("fines-issued", 1, b"a"), row("W-1", 0, b"c")]
    inputs = [row("police-reports", 0, b"x")]
    assert floor._digest(one) == floor._digest(other + inputs)
    assert floor._digest(one)["events"] == 3
    assert floor._digest(one)["streams"] == {"fines": 2, "W": 1}
    assert floor._digest(one) != floor._digest([*one[:2], row("W-1", 1, b"c")])
    assert floor._digest(one) != floor._digest([*one[:2], row("W-1", 0, b"d")])
    # The partition key is compared too (the service writes each instance's).
    assert floor._digest(one) != floor._digest([*one[:2], row("W-1", 0, b"c", key=8)])
    assert floor._digest(one) != floor._digest([*one[:2], row("W-1", 0, b"c", key=None)])


def test_one_group_runs_alone_and_serialises() -> None:
    report = to_json(run(quick=True, only=["core"]))
    assert [r["key"] for r in report["results"]] == ["core_overhead"]
    json.dumps(report)


def test_bad_arguments_are_rejected_with_the_choices() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--only", "core,nonsense"])
    with pytest.raises(ValueError, match="nonsense"):
        run(quick=True, only=["nonsense"])


def test_targets_and_table() -> None:
    assert Target("<=", 1.3).met_by(1.2) and not Target("<=", 1.3).met_by(1.4)
    assert Target(">=", 0.7).met_by(0.7) and not Target(">=", 0.7).met_by(0.5)
    with pytest.raises(ValueError):
        Target("<", 1.0)
    figure = Figure(
        key="k",
        title="a figure",
        unit="ops/s",
        rate=1234.5,
        baseline="b",
        baseline_rate=2000.0,
        ratio=0.61725,
        ratio_is="subject / baseline",
        target=Target(">=", 0.7),
    )
    assert figure.met is False
    table = format_table([figure])
    assert "1,234" in table or "1,235" in table
    assert "0.62x" in table and "NO" in table
    assert "subject / baseline" in format_legend([figure])
    pending = Pending("p", "a pending figure", "not built yet")
    assert "PENDING (not built yet)" in format_table([figure, pending])
    markdown = format_markdown([figure, pending]).splitlines()
    assert markdown[2].startswith("| a figure | 1,23") and "**no**" in markdown[2]
    assert "pending: not built yet" in markdown[3]


def test_postgres_figures_name_their_server_and_leave_no_schema(
    quick_report: dict[str, Any],
) -> None:
    figures = {r["key"]: r for r in quick_report["results"]}
    assert quick_report["postgres"] == pg.redact(pg.uri())
    for key in ("append_pg_single", "append_pg_batch"):
        extra = figures[key]["extra"]
        assert extra["synchronous_commit"] == "on"
        assert extra["server"] == quick_report["postgres"]
    assert figures["append_pg_batch"]["extra"]["events_per_call"] == 100
    # Every schema the run made (named after this process) was dropped.
    import psycopg

    with psycopg.connect(pg.uri()) as connection:
        left = connection.execute(
            "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE %s",
            (f"bench\\_{os.getpid()}\\_%",),
        ).fetchall()
    assert left == []


def test_an_unreachable_server_fails_in_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PG_URI", _UNREACHABLE)
    said: list[str] = []
    with pytest.raises(pg.PostgresUnavailable):
        run(quick=True, only=["e2e"], progress=said.append)
    assert said == []  # failed before running anything
    assert main(["--quick", "--only", "append"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "postgresql://bench:***@127.0.0.1:1/nowhere" in err and "s3cret" not in err
    assert "--no-postgres" in err


def test_no_postgres_leaves_the_server_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PG_URI", _UNREACHABLE)
    report = run(quick=True, only=["append"], postgres=False)
    assert [r.key for r in report["results"]] == ["append_single", "append_batch"]
    assert report["postgres"] is None
    assert parse_args(["--no-postgres"]).no_postgres


def test_a_fresh_schema_is_dropped_also_on_failure() -> None:
    import psycopg

    def exists(schema: str) -> bool:
        with psycopg.connect(pg.uri()) as connection:
            query = "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s"
            return connection.execute(query, (schema,)).fetchone() == (1,)

    with pytest.raises(RuntimeError, match="boom"), pg.fresh_schema(pg.uri()) as schema:
        PostgresEventStore(pg.uri(), schema=schema).close()
        assert exists(schema)
        raise RuntimeError("boom")
    assert schema.startswith(f"bench_{os.getpid()}_") and not exists(schema)


def test_redact_hides_passwords_in_both_conninfo_forms() -> None:
    assert pg.redact("postgresql://u:pw@h:5/db?sslmode=require") == (
        "postgresql://u:***@h:5/db?sslmode=require"
    )
    assert pg.redact("postgresql://h/db?password=pw&user=u") == (
        "postgresql://h/db?password=***&user=u"
    )
    assert pg.redact("host=h password=pw dbname=db") == "host=h password=*** dbname=db"
    assert pg.redact(pg.DEFAULT_URI) == pg.DEFAULT_URI


def test_scaleout_says_why_the_events_read_are_not_known() -> None:
    """A failed scrape is reported as that failure, not as a missing extra or a number."""
    from benchmarks import scaleout

    assert scaleout._reads([10.0, 20.0], [30.0, 40.0], 20)["events_read_per_written"] == 2.0
    failed = "service 1's metrics scrape failed: TimeoutError('timed out')"
    for before, after in (([10.0, 20.0], failed), (failed, [30.0, 40.0])):
        found = scaleout._reads(before, after, 20)
        assert math.isnan(found["events_read_per_written"])
        assert found["reads_unknown"] == failed
    missing = scaleout._reads([10.0, 20.0], [30.0], 20)
    assert missing["reads_unknown"] == "a service's metrics went missing during the run"
    assert scaleout._reads([1.0], [1.0], 0)["reads_unknown"] == "the run wrote no events"


def test_scaleout_rounds_take_the_median_of_each_rounds_ratio() -> None:
    """With several rounds, the cost figures are the medians of the ratios taken within each
    round; a round whose baseline failed counts for nothing."""
    from benchmarks import scaleout

    def run(cpu: float, read: float, share: float) -> dict[str, Any]:
        return {
            "store": "sqlite",
            "cpu_ms_per_workflow": cpu,
            "events_read_per_written": read,
            "busiest_share": share,
            "process_cpu_seconds": [1.0, 1.0],
        }

    rounds = [
        {1: run(1.0, 0.5, 1.0), 4: run(1.3, 0.5, 0.30)},
        {4: run(1.2, 0.6, 0.26)},  # k = 1 failed in this round
        {1: run(1.0, 0.5, 1.0), 4: run(1.1, 0.55, 0.27)},
        {1: run(2.0, 0.5, 1.0), 4: run(2.0, 0.5, 0.25)},
    ]
    said: list[str] = []
    cpu, reads, busiest = scaleout.cost_figures("sqlite", (1, 4), rounds, 100, said.append)
    assert isinstance(cpu, Figure) and isinstance(reads, Figure) and isinstance(busiest, Figure)
    assert cpu.ratio == pytest.approx(1.1)  # of 1.3, 1.1, 1.0
    assert cpu.extra["ratios"] == pytest.approx([1.3, 1.1, 1.0])
    assert "1.30, 1.10, 1.00" in cpu.ratio_is
    assert reads.ratio == pytest.approx(1.0)  # of 1.0, 1.1, 1.0
    assert busiest.ratio == pytest.approx(0.27)  # of 0.30, 0.27, 0.25
    assert len(said) == 4  # every round's costs are printed, the unpaired one too
    single = scaleout.cost_figures("sqlite", (1, 4), rounds[:1], 100, said.append)[0]
    assert isinstance(single, Figure) and single.ratio == pytest.approx(1.3)
    assert "median" not in single.ratio_is
