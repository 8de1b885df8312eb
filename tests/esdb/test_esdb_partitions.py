"""Two members of one app sharing its partitions through lease streams on EventStoreDB: each
with its own connection (as two processes would be), on a fresh in-process test server, with
KurrentDB's atomic ``AppendRecords`` so that commits are fenced."""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator

import pytest

from decider.processors import Service
from decider.processors.group.membership import PartitionGroup
from decider.processors.group.partitions import claims, lease_name
from decider.processors.operate.partition_status import join_group, partition_rows
from decider.stores.esdb._batch import TransactionalEsdbEventStore, open_esdb_store
from decider.stores.esdb.store import CLIENT, EsdbEventStore
from decider.stores.esdb.testserver import EsdbTestServer
from samples.traffic_fine.app import REPORTS_STREAM, make_app
from samples.traffic_fine.workflow import workflow
from tests.processors.test_proc_traffic_fine import all_completed, check_exactly_once, report
from tests.support.partitions import fences_of, member, pause_unnoticed
from tests.support.stores import instance_streams
from tests.support.waiting import wait_until


@pytest.fixture
def uri() -> Iterator[str]:
    with EsdbTestServer() as server:
        yield server.uri


@contextlib.contextmanager
def transactional(uri: str) -> Iterator[TransactionalEsdbEventStore]:
    store = open_esdb_store(uri)
    try:
        if not isinstance(store, TransactionalEsdbEventStore):
            pytest.skip(f"no atomic multi-stream append with {CLIENT.package} on this server")
        yield store
    finally:
        store.close()


def test_two_members_share_the_partitions_and_do_the_work_once(uri: str) -> None:
    app = make_app("esdbpair")
    n = 40
    with transactional(uri) as one_store, transactional(uri) as two_store:
        first = PartitionGroup(one_store, app, owner="first", ttl=2)
        second = PartitionGroup(two_store, app, owner="second", ttl=2)
        with member(Service(app, one_store, group=first)) as one:
            app.publish_many(one_store, [report(i) for i in range(n // 2)], REPORTS_STREAM)
            with member(Service(app, two_store, group=second)) as two:
                wait_until(lambda: len(first.partitions()) == len(second.partitions()) == 8, 20)
                assert not set(first.partitions()) & set(second.partitions())
                app.publish_many(one_store, [report(i) for i in range(n // 2, n)], REPORTS_STREAM)
                assert one.wait_until(lambda: all_completed(one_store, app, n), 60)
                assert one.wait_idle(30) and two.wait_idle(30)
                assert one.errors == two.errors == []
            wait_until(lambda: len(first.partitions()) == 16, 20, "the first holds them all")
        check_exactly_once(one_store, n)
        history = claims(one_store, app)
        assert {c.owner for c in history} == {"first", "second"}
        epochs = collections.Counter((c.partition, c.epoch) for c in history)
        assert max(epochs.values()) == 1
        rows = partition_rows(two_store, app)  # what ``decider status`` shows
        assert len(rows) == 16 and {row.owner for row in rows} == {None}  # all released


def test_a_member_whose_leases_another_process_took_over_commits_nothing(uri: str) -> None:
    app = make_app("esdbfenced")
    with transactional(uri) as store, transactional(uri) as thief:
        group = PartitionGroup(store, app, owner="paused", ttl=0.5)
        with member(Service(app, store, group=group)):
            wait_until(lambda: len(group.partitions()) == 16, 20, "the member holds them all")
            # The heartbeat stops (a paused process); another process (its own connection, so
            # the member's store remembers the lease streams where it last wrote them) takes
            # every partition over once the leases expire. The member does not notice its
            # pause, so it tries to commit under the leases it held.
            lost = pause_unnoticed(group)
            taken: list[str] = []

            def take_over() -> bool:
                for number in range(16):
                    name = lease_name(app.name, number)
                    if name not in taken and thief.claim_lease(name, "thief", 60) is not None:
                        taken.append(name)
                return len(taken) == 16

            wait_until(take_over, 20, "another process took every partition over")
            app.publish_many(thief, [report(i) for i in range(10)], REPORTS_STREAM)
            wait_until(lambda: lost, 20, "a commit refused for a lost lease")
        assert {lease.owner for lease in lost} == {"paused"}
        assert instance_streams(thief, f"{workflow.name}-") == {}


def test_a_batch_of_several_partitions_is_one_atomic_write(uri: str) -> None:
    """A member that holds several partitions commits a batch that spans them once, each
    partition's checkpoint under its lease, not once per partition."""
    app = make_app("esdbjoint")
    n = 40
    with transactional(uri) as store:
        fenced_by = fences_of(store, "append_batch")
        group = PartitionGroup(store, app, owner="alone", ttl=2)
        with member(Service(app, store, group=group)) as service:
            wait_until(lambda: len(group.partitions()) == 16, 20, "the member holds them all")
            app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
            assert service.wait_until(lambda: all_completed(store, app, n), 60)
            assert service.wait_idle(30)  # the fines are issued after the completions
            assert service.errors == []
        check_exactly_once(store, n)
        # 40 reports over 16 partitions: the workflow processor's first batch spans them
        assert max(fenced_by) > 1, fenced_by


def test_partitions_auto_needs_the_atomic_store(uri: str) -> None:
    plain = EsdbEventStore(uri)
    try:
        with pytest.raises(ValueError, match="fence"):
            join_group(plain, make_app("esdbplain"), "auto", 10)
    finally:
        plain.close()
