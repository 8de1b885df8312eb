"""Every hot statement of the PostgreSQL store uses an index, on a tiny table and on 1M events.

A statement psycopg has run five times is prepared on the server, and PostgreSQL may then keep
a *generic* plan, chosen without the parameters' values, for as long as the connection lives:
a plan chosen while the table was tiny can be a full scan that is still used at a million rows
(an end-to-end run showed 725 such scans on a 32k-row table: the old ``find_many`` join). So
each statement is explained with generic and custom plans, under the store's session settings,
right after the schema is created and again on 1M events (built with ``generate_series``,
indexes rebuilt after the load, then ``ANALYZE``), and no plan may scan the events table
sequentially. A partitioned read walks the primary key from its position like any other
filter, unless it holds a minority of the partitions: then it merges one range per partition of
the partition index (checked below). And on a table never analyzed, no log read may gather its
rows in a bitmap and sort them.
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg import ClientCursor, sql

from decider.stores import ANY, Filter, Partitions
from decider.stores.contract import new_events
from decider.stores.postgres import PostgresEventStore
from tests.support.postgres import PG_URI, fresh_store

pytestmark = pytest.mark.slow

EVENTS = 1_000_000
STREAMS = 20_000
Case = tuple[str, tuple[object, ...]]

_QUARTER = Partitions(count=16, held=frozenset({0, 5, 10, 15}))

# The processors' filters (workflow inputs, commands, timers, the parked ledger) and none.
FILTERS = {
    "all": Filter(),
    "inputs": Filter(event_types=("Input",)),
    "commands": Filter(
        stream_prefixes=("wf-", "$parked-app"),
        event_types=("Retried",),
        event_type_prefixes=("Sent:", "Published:"),
    ),
    "timers": Filter(stream_prefixes=("wf-",), event_type_prefixes=("Scheduled:",)),
    "parked": Filter(stream_prefixes=("$parked-app",), event_types=("Parked",)),
    # A process of a group of four reads only its partitions' work (and events of no key).
    "inputs of 4 of 16 partitions": Filter(event_types=("Input",), partitions=_QUARTER),
    "timers of 4 of 16 partitions": Filter(
        stream_prefixes=("wf-",), event_type_prefixes=("Scheduled:",), partitions=_QUARTER
    ),
    # A workflow router reads the inputs of unknown key alone.
    "inputs of no partitions": Filter(
        event_types=("Input",), partitions=Partitions(count=16, held=frozenset())
    ),
}


def _cases(store: PostgresEventStore, head: int) -> dict[str, Case]:
    s = store._sql
    ids = [uuid.uuid4() for _ in range(3)]
    now = datetime.now(UTC)
    cases: dict[str, Case] = {
        "last_revision": (s.last_revision, ("wf-7",)),
        "last_revisions": (s.last_revisions, (["wf-7", "wf-8"],)),
        "range": (s.range, ("wf-7", 3, 10)),
        "find_ids": (s.find_ids, ("wf-7", ids)),
        "find_many": (s.find_many, (["wf-7", "wf-8", "wf-9"], ids)),
        "read_stream": (s.read_stream, ("wf-7", 0, None)),
        "read_stream_page": (s.read_stream, ("wf-7", 10, 100)),
        "append_one_if": (
            s.append_one_if,
            ("wf-7", 4, ids[0], "Input", b"{}", b"", now, None, "wf-7", 3),
        ),
        "append_if": (
            s.append_if,
            (
                "wf-7",
                now,
                [4, 5],
                ids[:2],
                ["Input"] * 2,
                [b"{}"] * 2,
                [b""] * 2,
                [None, 7],
                "wf-7",
                3,
            ),
        ),
        # Binary parameters (%b) are explained as text ones.
        "insert_after": (
            s.insert_after.replace("%b", "%s"),
            (0, "wf-7", "wf-7", 3, ids[0], "Input", b"{}", b"", now, 7),
        ),
        "head": (s.head, ()),
        "wait_older_head": (s.wait_older_head, (head,)),
        "held_back": (s.held_back, ()),
    }
    for name, flt in FILTERS.items():
        # As the store reads (from the partition indexes, created on its first such read).
        read = store._read_sql(flt)
        # A processor's page after its checkpoint, and the idle check (one event after it).
        cases[f"read_all[{name}] page"] = (read.statement, read.args(head - 5_000, 500))
        cases[f"read_all[{name}] idle"] = (read.statement, read.args(head - 10, 1))
        if name in ("all", "inputs"):  # dense: the first page from the start of the log
            cases[f"read_all[{name}] first"] = (read.statement, read.args(0, 500))
    return cases


def _nodes(plan: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


def _plans(connection: psycopg.Connection[Any], case: Case) -> Iterator[tuple[str, Any]]:
    """The statement's custom plan (with the values) and its generic plan (without)."""
    statement, params = case
    literal = ClientCursor(connection).mogrify
    connection.execute("SET plan_cache_mode = force_custom_plan")
    [(plan,)] = connection.execute("EXPLAIN (FORMAT JSON) " + literal(statement, params))
    yield "custom", plan[0]["Plan"]
    numbers = itertools.count(1)
    prepared = re.sub("%s", lambda _: f"${next(numbers)}", statement).replace("%%", "%")
    connection.execute("SET plan_cache_mode = force_generic_plan")
    connection.execute("PREPARE hot AS " + prepared)
    arguments = f"({literal(', '.join(['%s'] * len(params)), params)})" if params else ""
    [(plan,)] = connection.execute("EXPLAIN (FORMAT JSON) EXECUTE hot" + arguments)
    connection.execute("DEALLOCATE hot")
    yield "generic", plan[0]["Plan"]


def _full_scans(store: PostgresEventStore, head: int) -> list[str]:
    found = []
    with psycopg.connect(PG_URI, autocommit=True, prepare_threshold=None) as connection:
        connection.execute(store._session)  # planned as the store's own sessions plan them
        for name, case in _cases(store, head).items():
            for mode, plan in _plans(connection, case):
                scans = [
                    n
                    for n in _nodes(plan)
                    if n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "events"
                ]
                if scans:
                    found.append(f"{name} ({mode} plan)")
    return found


def _load(store: PostgresEventStore, count: int) -> None:
    """``count`` events in ``STREAMS`` streams, of five types, written in one statement with
    the indexes rebuilt afterwards (the same definitions: read from the catalogue)."""
    events = sql.Identifier(store.schema).as_string(None) + ".events"
    with psycopg.connect(PG_URI, autocommit=True) as connection:
        indexes = [
            row[0]
            for row in connection.execute(
                "SELECT pg_get_indexdef(indexrelid) FROM pg_index"
                " WHERE indrelid = %s::regclass AND NOT indisprimary AND NOT indisunique",
                (events,),
            )
        ]
        constraints = connection.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = %s::regclass",
            (events,),
        ).fetchall()
        with connection.transaction():
            connection.execute("SET LOCAL maintenance_work_mem = '256MB'")
            for name, _ in constraints:
                connection.execute(f"ALTER TABLE {events} DROP CONSTRAINT {name}")
            for definition in indexes:
                index = re.search(r"INDEX (\S+) ON", definition)
                assert index is not None
                connection.execute(f"DROP INDEX {store.schema}.{index[1]}")
            _insert(connection, events, count)
            for name, definition in constraints:
                connection.execute(f"ALTER TABLE {events} ADD CONSTRAINT {name} {definition}")
            for definition in indexes:
                connection.execute(definition)
        connection.execute(f"ANALYZE {events}")


def _insert(connection: psycopg.Connection[Any], events: str, count: int) -> None:
    """``count`` events at positions 1 to ``count`` in ``STREAMS`` streams, of five types."""
    connection.execute(
        f"INSERT INTO {events}"
        " (position, stream, revision, event_id, type, data, metadata, recorded_at,"
        " partition_key)"
        " SELECT n, 'wf-' || (n %% %s), n / %s, gen_random_uuid(),"
        " (ARRAY['Input', 'Sent:Pay', 'Scheduled:Due', 'Decided', 'Published:Out'])"
        "[1 + n %% 5], '\\x7b7d', '', now(), nullif(n %% %s, 0)"
        " FROM generate_series(1, %s) AS n",
        (STREAMS, STREAMS, STREAMS, count),
    )


def _merged(store: PostgresEventStore, head: int) -> list[str]:
    """The partitioned reads' plans that do not merge one index range per partition held
    (and one of the rows of unknown key)."""
    wrong = []
    with psycopg.connect(PG_URI, autocommit=True, prepare_threshold=None) as connection:
        connection.execute(store._session)
        for name, case in _cases(store, head).items():
            if "partitions" not in name:
                continue
            for mode, plan in _plans(connection, case):
                nodes = list(_nodes(plan))
                indexes = sorted(n.get("Index Name", "") for n in nodes if "Index Name" in n)
                held = 0 if "no partitions" in name else len(_QUARTER.held)
                expected = [*["events_by_partition_16"] * held, "events_unkeyed"]
                merged = held == 0 or any(n["Node Type"] == "Merge Append" for n in nodes)
                if not merged or indexes != expected:
                    wrong.append(f"{name} ({mode} plan): {indexes}")
    return wrong


def test_no_hot_statement_scans_the_events_table() -> None:
    with fresh_store() as store:
        store.append("first", new_events(1), ANY)
        assert _full_scans(store, head=10_000) == [], "on a tiny table"
        assert _merged(store, head=10_000) == [], "on a tiny table"
        _load(store, EVENTS)
        assert _full_scans(store, head=EVENTS) == [], f"on {EVENTS} events"
        assert _merged(store, head=EVENTS) == [], f"on {EVENTS} events"
        # The store still works on the loaded table (its positions are all above the load's).
        result = store.append("wf-7", new_events(1), ANY)
        assert store.read_all(EVENTS, 10)[-1].position == result.position


def _sorted_reads(store: PostgresEventStore, head: int) -> list[str]:
    """The log reads whose plans, under the store's session settings, collect rows and sort
    them rather than walk an index in position order and stop at the limit."""
    found = []
    with psycopg.connect(PG_URI, autocommit=True, prepare_threshold=None) as connection:
        connection.execute(store._session)
        for name, case in _cases(store, head).items():
            if not name.startswith("read_all"):
                continue
            for mode, plan in _plans(connection, case):
                kinds = {n["Node Type"] for n in _nodes(plan)}
                if kinds & {"Sort", "Incremental Sort", "Bitmap Heap Scan"}:
                    found.append(f"{name} ({mode} plan): {sorted(kinds)}")
    return found


def test_log_reads_walk_in_order_on_a_table_never_analyzed() -> None:
    """A new schema's first burst: the table grows before autovacuum first analyzes it, so the
    planner thinks few rows pass a read's filter and would collect all the rows after the
    position in a bitmap and sort them; each page would cost the reader's whole backlog."""
    rows = 100_000
    with fresh_store() as store:
        events = sql.Identifier(store.schema).as_string(None) + ".events"
        with psycopg.connect(PG_URI, autocommit=True) as connection:
            connection.execute(f"ALTER TABLE {events} SET (autovacuum_enabled = false)")
            _insert(connection, events, rows)
            [(analyzed,)] = connection.execute(
                "SELECT last_analyze IS NULL AND last_autoanalyze IS NULL"
                " FROM pg_stat_user_tables WHERE relid = %s::regclass",
                (events,),
            )
            assert analyzed, "the table was analyzed: the test would not show the plan"
        assert _sorted_reads(store, head=rows) == []
        store.append("wf-7", new_events(1), ANY)
        assert store.read_all(rows - 10, 20)[-1].stream == "wf-7"
