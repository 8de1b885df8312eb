"""Three ``decider run --partitions auto`` processes of one app on one EventStoreDB node (the
test server in a process of its own), sharing the partitions through lease streams, with their
commits fenced by KurrentDB's atomic ``AppendSession``.

The run of ``tests/service/test_svc_partitions.py`` on SQLite and PostgreSQL: reports published
while the processes run, one of them SIGKILLed at random moments and started again; at the end
every workflow completed with exactly its expected history (no event twice), every command has
one effect and one result per command id, and the app's lease history has one owner per epoch.
Here the lease streams themselves are checked too: read in full from ``$all`` (their
``$maxCount`` hides old renewals from stream reads only), each partition's epochs follow one
another, one owner each, and an epoch is claimed only once the one before it was released or
had expired: at most one process owned a partition at any time.
"""

from __future__ import annotations

import collections
import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from decider.processors import App
from decider.processors.group.partitions import lease_name
from decider.stores.esdb._batch import TransactionalEsdbEventStore, open_esdb_store
from decider.stores.esdb._leases import LEASE_EVENT_TYPE, lease_stream
from decider.stores.esdb.store import CLIENT
from decider.stores.leases import Lease
from decider.stores.protocol import EventStore, Filter
from tests.support.apps import fines_app
from tests.support.esdb_server import EsdbServerProcess, free_port
from tests.support.scaleout import three_processes_with_sigkills
from tests.support.service import ServiceProcess

TTL = 2.0
OPTIONS = ("--partitions", "auto", "--lease-ttl", str(TTL))
_ROUNDING = timedelta(milliseconds=1)  # expiries are stored as float Unix seconds


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[EventStore, str, list[ServiceProcess]]]:
    """A fresh test server process, a fenced store on it, the services (ended by pid)."""
    if CLIENT.package != "kurrentdbclient":
        pytest.skip(
            f"--partitions auto on EventStoreDB needs kurrentdbclient's atomic multi-stream "
            f"append ({CLIENT.package} is installed): run `make test-kurrentdb`"
        )
    server = EsdbServerProcess(free_port(), tmp_path / "esdb.log", tmp_path / "esdb.out")
    processes: list[ServiceProcess] = []
    try:
        server.start()
        store = open_esdb_store(server.uri)
        try:
            assert isinstance(store, TransactionalEsdbEventStore), "no AppendSession"
            yield store, server.uri, processes
        finally:
            store.close()
    finally:
        for process in processes:
            process.cleanup()
        server.stop()


@pytest.mark.slow
def test_esdb_three_processes_with_repeated_sigkills_and_restarts(
    node: tuple[EventStore, str, list[ServiceProcess]], tmp_path: Path
) -> None:
    store, uri, processes = node
    line = three_processes_with_sigkills(store, uri, tmp_path / "effects.db", processes, OPTIONS)
    written = lease_streams_ok(store, fines_app, TTL)
    print(f"{line}; {written} lease events")


def lease_streams_ok(store: EventStore, app: App, ttl: float) -> int:
    """Every lease stream of ``app``'s partitions, read from ``$all``, holds a history in which
    at most one process owned the partition at any time; how many lease events there are.

    Within an epoch every event names its one owner (a claim, renewals, fenced commits' copies)
    or no one (the release, the epoch's last event). The next epoch's claim was decided at its
    expiry less ``ttl`` (by the claimer's clock), which is no earlier than the expiry of the
    epoch before (or that epoch was released).
    """
    events = store.read_all(filter=Filter(event_types=(LEASE_EVENT_TYPE,), include_system=True))
    streams = {lease_stream(lease_name(app.name, p)) for p in range(app.partitions)}
    history: dict[str, list[Lease]] = collections.defaultdict(list)
    for event in events:
        if event.stream not in streams:
            continue
        assert event.revision == len(history[event.stream]), f"{event.stream}: an event missing"
        data = json.loads(event.data)
        expires = datetime.fromtimestamp(float(data["expires_at"]), UTC)
        history[event.stream].append(
            Lease(data["partition"], data["owner"], int(data["epoch"]), expires)
        )
    assert set(history) == streams, "a partition never claimed"
    for stream, leases in history.items():
        assert leases[0].epoch == 1 and leases[0].owner is not None, stream
        for before, lease in itertools.pairwise(leases):
            if lease.epoch == before.epoch:
                assert before.owner is not None, f"{stream}: written after its release"
                assert lease.owner in (before.owner, None), f"{stream}: two owners, one epoch"
                continue
            assert lease.epoch == before.epoch + 1, f"{stream}: epoch {before.epoch}, then {lease}"
            assert lease.owner is not None, stream
            claimed_at = lease.expires_at - timedelta(seconds=ttl)
            assert before.owner is None or before.expires_at <= claimed_at + _ROUNDING, (
                f"{stream}: {lease} claimed while {before} held it"
            )
    return sum(len(leases) for leases in history.values())
