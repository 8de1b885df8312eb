"""Filtered ``$all`` reads answer what a scan of the whole log would, from any position: the
server finds them through its per-type and per-stream indexes."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from esdbclient import EventStoreDBClient, NewEvent, StreamState

from decider.stores.esdb.testserver import EsdbTestServer


def _fill(client: EventStoreDBClient) -> None:
    for i in range(60):
        client.append_to_stream(
            f"{'order' if i % 3 else 'ship'}-{i % 7}",
            current_version=StreamState.ANY,
            events=[NewEvent(type=("Placed", "Paid", "Sent")[i % 3], data=b"{}")],
        )
    client.tombstone_stream("ship-0", current_version=StreamState.ANY)


def test_filtered_reads_match_a_scan(
    fresh_server: EsdbTestServer, fresh_client: EventStoreDBClient
) -> None:
    _fill(fresh_client)
    everything = list(fresh_client.read_all(filter_exclude=()))
    start = everything[len(everything) // 2].commit_position
    cases: list[tuple[dict[str, Any], Callable[[Any], object]]] = [
        ({"filter_include": ["Pa.*"]}, lambda e: re.fullmatch("Pa.*", e.type)),
        (
            {"filter_include": ["ship-.*"], "filter_by_stream_name": True},
            lambda e: re.fullmatch("ship-.*", e.stream_name),
        ),
        ({"filter_exclude": [r"\$.*"]}, lambda e: not e.type.startswith("$")),
    ]
    for arguments, wanted in cases:
        for position in (None, start):
            scanned = [
                e.id
                for e in everything
                if wanted(e) and (position is None or (e.commit_position or 0) >= position)
            ]
            read = fresh_client.read_all(commit_position=position, **arguments)
            assert [e.id for e in read] == scanned, arguments
            limited = fresh_client.read_all(commit_position=position, limit=3, **arguments)
            assert [e.id for e in limited] == scanned[:3]
    tombstones = [e for e in everything if e.type == "$streamDeleted"]
    by_stream = fresh_client.read_all(filter_include=["ship-0"], filter_by_stream_name=True)
    assert [e.id for e in by_stream][-1] == tombstones[0].id
