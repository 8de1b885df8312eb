"""The partitioned read path: inputs and the instances' work are stored with their partition
key, and a process of a group is sent only the events of the partitions it holds (and those of
unknown key, which it routes itself)."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs
import pytest

from decider import Envelope, Lifecycle, Metadata
from decider.processors import App, Service, status
from decider.processors.app.messages import ROUTED
from decider.processors.app.streams import (
    command_processor_name,
    instance_stream,
    routed_stream,
    timer_processor_name,
    workflow_processor_name,
)
from decider.processors.group.membership import PartitionGroup
from decider.processors.group.partitions import (
    checkpoint_name,
    lease_name,
    member_lease_name,
    stream_key,
)
from decider.processors.workflows.router import InputRouter, start_routing
from decider.stores.leases import Lease
from decider.stores.memory import MemoryEventStore
from decider.stores.protocol import (
    ALL,
    ANY,
    AppendResult,
    Filter,
    NewEvent,
    RecordedEvent,
    StreamAppend,
)
from decider.stores.sqlite import SqliteEventStore
from decider.stores.subscription import CatchUpSubscription
from samples.traffic_fine.app import REPORTS_STREAM, make_app
from samples.traffic_fine.messages import PoliceReportPublished
from samples.traffic_fine.workflow import workflow
from tests.processors.test_proc_traffic_fine import all_completed, check_exactly_once, report
from tests.support.partitions import member
from tests.support.stores import instance_streams
from tests.support.waiting import wait_until

P = 16


class CountingStore(MemoryEventStore):
    """A memory store that records every event its subscriptions with a partitioned filter
    deliver (what a group's processors are sent), with the filter's held partitions."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[frozenset[int], RecordedEvent]] = []
        self._sent_lock = threading.Lock()

    def subscribe(
        self, after_position: int | None = None, filter: Filter = ALL
    ) -> CatchUpSubscription:
        def read_page(after: int | None, limit: int) -> list[RecordedEvent]:
            found = self.read_all(after, limit, filter)
            if filter.partitions is not None:
                with self._sent_lock:
                    self.sent.extend((filter.partitions.held, e) for e in found)
            return found

        return CatchUpSubscription(
            read_page=read_page,
            head=self._head,
            notifier=self._notifier,
            after_position=after_position,
            filter=filter,
        )


def _instance_of(i: int) -> str:
    return instance_stream(workflow.name, f"r{i}")


def _partition(i: int) -> int:
    return stream_key(_instance_of(i)) % P


def test_app_publish_stores_each_input_with_its_instance_key() -> None:
    store = MemoryEventStore()
    app = make_app("keys")
    app.publish(store, report(1), REPORTS_STREAM)
    app.publish_many(store, [report(2), report(3)], REPORTS_STREAM)
    stored = store.read_stream(REPORTS_STREAM)
    assert [e.partition_key for e in stored] == [stream_key(_instance_of(i)) for i in (1, 2, 3)]


def test_an_input_that_two_workflows_take_is_stored_without_a_key() -> None:
    """Its two instances may be in two partitions: every process reads it."""
    store = MemoryEventStore()
    app = make_app("twice")
    app.workflow(
        attrs.evolve(workflow, name="Twin"),
        inputs={PoliceReportPublished: lambda m, _: m.police_report_id},
    )
    app.publish(store, report(1), REPORTS_STREAM)
    [stored] = store.read_stream(REPORTS_STREAM)
    assert stored.partition_key is None


@attrs.frozen
class Half:
    """A service of a group that holds half the partitions, on a counting store."""

    store: CountingStore
    app: App
    group: PartitionGroup
    service: Service


@pytest.fixture
def half() -> Iterator[Half]:
    """A service whose group holds half the partitions: another (silent) member holds the
    other half for the test's length."""
    store = CountingStore()
    with _reader_of_half(store, "half") as (app, group, service):
        yield Half(store, app, group, service)


@contextlib.contextmanager
def _reader_of_half(
    store: MemoryEventStore | SqliteEventStore, name: str
) -> Iterator[tuple[App, PartitionGroup, Service]]:
    """A running service of app ``name`` on ``store`` whose group holds the first half of the
    partitions, once it does: another member holds the other half for ten minutes."""
    app = make_app(name)
    store.claim_lease(member_lease_name(app.name, "other"), "other", 600)
    for number in range(P // 2, P):
        assert store.claim_lease(lease_name(app.name, number), "other", 600) is not None
    group = PartitionGroup(store, app, owner="reader", ttl=30)
    service = Service(app, store, group=group)
    with member(service):
        wait_until(lambda: sorted(group.partitions()) == list(range(P // 2)), 10)
        yield app, group, service


def _short_of_head(
    store: MemoryEventStore | SqliteEventStore, app: App, held: Sequence[int], head: int
) -> list[tuple[str, int, int | None]]:
    """The held partitions' checkpoints of every processor (workflow, commands, timers) that
    are not at ``head`` yet: each processor's name, the partition and its checkpoint."""
    names = [
        workflow_processor_name(app.name, workflow.name),
        command_processor_name(app.name),
        timer_processor_name(app.name),
    ]
    found = [(n, p, store.load_checkpoint(checkpoint_name(n, p))) for n in names for p in held]
    return [(n, p, mark) for n, p, mark in found if mark is None or mark < head]


def test_a_process_is_sent_only_its_partitions_work(
    half: Half,
) -> None:
    store, app, group, service = half.store, half.app, half.group, half.service
    n = 120
    app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
    mine = [i for i in range(n) if _partition(i) in group.partitions()]
    assert 0 < len(mine) < n
    wait_until(lambda: len(_done(store, app, mine)) == len(mine), 30, "its instances completed")
    assert service.wait_idle(30)
    assert service.errors == []
    held = frozenset(range(P // 2))
    assert store.sent, "the group's subscriptions read by partitions"
    assert {partitions for partitions, _ in store.sent} == {held}
    # Every event sent is of a partition held (the app keys everything it writes).
    assert all(e.partition_key is not None and e.partition_key % P in held for _, e in store.sent)
    # Of the inputs, exactly those of the instances held were sent, each once per processor.
    inputs = [e for _, e in store.sent if e.stream == REPORTS_STREAM]
    assert sorted(e.partition_key or -1 for e in inputs) == sorted(
        stream_key(_instance_of(i)) for i in mine
    )
    # The other partitions' instances were not started here.
    others = {_instance_of(i) for i in range(n)} - {_instance_of(i) for i in mine}
    assert not others & set(instance_streams(store, workflow.name))


def test_an_input_without_a_key_is_routed_once_to_its_partition(half: Half) -> None:
    """A writer outside the app appends inputs without a key: the router (in the process
    holding partition 0) records each one's partition; the workflow processor reads the
    records of its partitions, never an input of unknown key."""
    store, app, group, service = half.store, half.app, half.group, half.service
    ids = range(200, 240)
    _append_foreign(store, app, ids)
    mine = [i for i in ids if _partition(i) in group.partitions()]
    wait_until(lambda: len(_done(store, app, mine)) == len(mine), 30, "its instances completed")
    assert service.wait_idle(30)
    assert service.errors == []
    # One record per input, stored with the key of the instance it is routed to.
    records = _records(store, app)
    assert sorted(r.partition_key or -1 for r in records) == sorted(
        stream_key(_instance_of(i)) for i in ids
    )
    # Only the router read the inputs without a key; the workflow processor read the records
    # of its partitions.
    foreign = [(held, e) for held, e in store.sent if e.stream == REPORTS_STREAM]
    assert len(foreign) == len(ids)
    assert {held for held, _ in foreign} == {frozenset()}
    read = [e for held, e in store.sent if e.stream == routed_stream(app.name)]
    assert sorted(e.partition_key or -1 for e in read) == sorted(
        stream_key(_instance_of(i)) for i in mine
    )
    others = {_instance_of(i) for i in ids} - {_instance_of(i) for i in mine}
    assert not others & set(instance_streams(store, workflow.name))


def test_two_processes_route_each_foreign_input_once_and_complete_it_once() -> None:
    store = CountingStore()
    app = make_app("pair-routed")
    first = PartitionGroup(store, app, owner="first", ttl=1)
    second = PartitionGroup(store, app, owner="second", ttl=1)
    n = 60
    one, two = Service(app, store, group=first), Service(app, store, group=second)
    with member(one), member(two):
        wait_until(lambda: len(first.partitions()) == len(second.partitions()) == 8, 10)
        _append_foreign(store, app, range(n))
        app.publish_many(store, [report(i) for i in range(n, 2 * n)], REPORTS_STREAM)
        assert one.wait_until(lambda: all_completed(store, app, 2 * n), 30)
        assert one.wait_idle(30) and two.wait_idle(30)
        assert one.errors == two.errors == []
        # Routed by one process only (the one holding partition 0), each input once.
        routers = [p for s in (one, two) for p in s.processors if isinstance(p, InputRouter)]
        assert len(routers) == 2
        assert sorted(r.routed for r in routers) == [0, n]
    check_exactly_once(store, 2 * n)
    records = _records(store, app)
    assert len(records) == n  # each foreign input routed once, the published ones not at all
    # No process was sent an input of another's partitions, nor one of unknown key but the
    # router.
    for held, event in store.sent:
        if event.partition_key is None:
            assert held == frozenset(), event
        else:
            assert event.partition_key % P in held, event


def _records(store: MemoryEventStore, app: App) -> list[RecordedEvent]:
    """The router's records (after the routed stream's first event, where routing started)."""
    return [r for r in store.read_stream(routed_stream(app.name)) if r.type == ROUTED]


def _append_foreign(store: MemoryEventStore, app: App, numbers: range) -> None:
    """Inputs appended by a writer outside the app: no partition key."""
    for i in numbers:
        type_name, data, metadata = app.codec.encode_envelope(
            Envelope(report(i), Metadata(message_id=f"foreign-{i}"))
        )
        store.append(REPORTS_STREAM, [NewEvent(uuid.uuid4(), type_name, data, metadata)], ANY)


def _done(store: MemoryEventStore, app: App, numbers: list[int]) -> list[int]:
    completed = {s.stream for s in status(store, app) if s.status is Lifecycle.COMPLETED}
    return [i for i in numbers if _instance_of(i) in completed]


def test_the_router_moves_with_partition_0_and_goes_on_from_its_checkpoint() -> None:
    """The process holding partition 0 (the router's) leaves: the other takes it over and
    routes the inputs that came after, each once; every instance completes once."""
    store = CountingStore()
    app = make_app("router-moves")
    first = PartitionGroup(store, app, owner="first", ttl=1)
    second = PartitionGroup(store, app, owner="second", ttl=1)
    one, two = Service(app, store, group=first), Service(app, store, group=second)
    n = 40
    with member(one), member(two):
        wait_until(lambda: len(first.partitions()) == len(second.partitions()) == 8, 10)
        _append_foreign(store, app, range(n))
        assert one.wait_until(lambda: all_completed(store, app, n), 30)
        holder, other = (one, two) if 0 in first.partitions() else (two, one)
        holder.stop()
        remaining = second if other is two else first
        wait_until(lambda: len(remaining.partitions()) == P, 10, "the other holds every partition")
        _append_foreign(store, app, range(n, 2 * n))
        assert other.wait_until(lambda: all_completed(store, app, 2 * n), 30)
        assert other.wait_idle(30)
        assert one.errors == two.errors == []
    check_exactly_once(store, 2 * n)
    records = _records(store, app)
    assert sorted(r.partition_key or -1 for r in records) == sorted(
        stream_key(_instance_of(i)) for i in range(2 * n)
    )
    assert len({r.id for r in records}) == len(records) == 2 * n


def test_routing_starts_where_the_workflow_processors_left_off() -> None:
    """An app that ran without a group handled its inputs of no key itself: when it first
    runs in a group, the router starts after the workflow processor's checkpoint, and routes
    only the inputs of no key that come after it."""
    store = CountingStore()
    app = make_app("upgraded")
    n = 10
    _append_foreign(store, app, range(n))
    with member(Service(app, store)) as alone:
        assert alone.wait_until(lambda: all_completed(store, app, n), 30)
        assert alone.wait_idle(30)
    handled = store.load_checkpoint(f"{app.name}.workflow.{workflow.name}")
    assert handled is not None
    group = PartitionGroup(store, app, owner="solo", ttl=5)
    with member(Service(app, store, group=group)) as grouped:
        assert start_routing(store, app, store) == handled
        _append_foreign(store, app, range(n, 2 * n))
        assert grouped.wait_until(lambda: all_completed(store, app, 2 * n), 30)
        assert grouped.wait_idle(30)
        assert grouped.errors == []
    check_exactly_once(store, 2 * n)
    assert sorted(r.partition_key or -1 for r in _records(store, app)) == sorted(
        stream_key(_instance_of(i)) for i in range(n, 2 * n)
    )


class CheckpointLog(CountingStore):
    """A counting store that also keeps every checkpoint a commit wrote, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[tuple[str, int]] = []

    def append_batch(
        self,
        appends: Sequence[StreamAppend],
        *,
        checkpoints: Sequence[tuple[str, int]] = (),
        leases: Sequence[Lease] = (),
    ) -> list[AppendResult]:
        results = super().append_batch(appends, checkpoints=checkpoints, leases=leases)
        with self._sent_lock:
            self.saved.extend(checkpoints)
        return results

    def save_checkpoint(self, name: str, position: int) -> None:
        super().save_checkpoint(name, position)
        with self._sent_lock:
            self.saved.append((name, position))


def test_a_partition_taken_over_keeps_its_checkpoint_when_the_new_owner_is_behind() -> None:
    """A process takes partitions over from one that left: it resubscribes from the lowest
    checkpoint it holds, which may be behind theirs, and reads positions they were checkpointed
    past; no partition's checkpoint ever moves back."""
    store = CheckpointLog()
    app = make_app("takeover-marks")
    first = PartitionGroup(store, app, owner="first", ttl=1)
    second = PartitionGroup(store, app, owner="second", ttl=1)
    # The second reads in small batches: the first batch after the takeover ends before the
    # checkpoints of the partitions taken over.
    one, two = Service(app, store, group=first), Service(app, store, group=second, batch_size=5)
    n = 60
    with member(one), member(two):
        wait_until(lambda: len(first.partitions()) == len(second.partitions()) == 8, 10)
        # Only the first's partitions get work at the end: the second's checkpoints stay
        # behind theirs.
        app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
        assert one.wait_until(lambda: all_completed(store, app, n), 30)
        late = [i for i in range(n, 4 * n) if _partition(i) in first.partitions()][:n]
        app.publish_many(store, [report(i) for i in late], REPORTS_STREAM)
        assert one.wait_until(lambda: len(_done(store, app, late)) == len(late), 30)
        assert one.wait_idle(30) and two.wait_idle(30)
        one.stop()
        wait_until(lambda: len(second.partitions()) == P, 10, "the second holds every partition")
        assert two.wait_idle(30)
        assert one.errors == two.errors == []
    last: dict[str, int] = {}
    for name, position in store.saved:
        assert position >= last.get(name, -1), f"{name} moved back to {position}"
        last[name] = position


def test_a_partition_without_events_has_its_checkpoint_follow_the_log(half: Half) -> None:
    """The partitions a process holds get no events while the log grows with the other
    partitions' (which it is never sent): once its subscriptions have caught up, the held
    partitions' checkpoints of every processor move on to the log's head, not only with the
    batches of the process's other partitions (it has none here)."""
    store, app, group = half.store, half.app, half.group
    held = sorted(group.partitions())
    theirs = [i for i in range(400) if _partition(i) not in held][:30]
    app.publish_many(store, [report(i) for i in theirs], REPORTS_STREAM)
    head = store.read_all(None, 10**6)[-1].position
    wait_until(
        lambda: not _short_of_head(store, app, held, head),
        30,
        "every held partition's checkpoint at the head",
    )
    assert not any(
        e.partition_key is not None and e.partition_key % P not in held for _, e in store.sent
    ), "a process is sent only its partitions' events"
    assert half.service.errors == []


class ReadCountingSqlite(SqliteEventStore):
    """An SQLite store that records the position of every read of its partitioned
    subscriptions (a group's processors' reads). Its probe waits an hour: what passes rows
    over here is the processors' own look after an idle second."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, synchronous="OFF", probe_interval=3600.0)
        self.reads: list[int | None] = []

    def read_all(
        self, after_position: int | None = None, limit: int | None = None, filter: Filter = ALL
    ) -> list[RecordedEvent]:
        if filter.partitions is not None:
            self.reads.append(after_position)
        return super().read_all(after_position, limit, filter)


def test_a_partition_without_events_follows_the_log_without_reading_it(tmp_path: Path) -> None:
    """On SQLite, where the store knows what it announced, a process of a group that is sent
    nothing moves its partitions' checkpoints on to the log's head without reading the rows
    the other partitions' work wrote: each processor's look after an idle second passes them
    over unread (before, each looked by walking them again, in every process, once a
    second)."""
    store = ReadCountingSqlite(tmp_path / "events.db")
    try:
        with _reader_of_half(store, "unread") as (app, group, service):
            held = sorted(group.partitions())
            # Every subscription has caught up (its checkpoints are at the head): what it reads
            # from now on, it reads for the rows below.
            started = store.read_all(None, 10**6)[-1].position
            wait_until(
                lambda: not _short_of_head(store, app, held, started),
                30,
                "the checkpoints at the head",
            )
            before = len(store.reads)
            theirs = [i for i in range(400) if _partition(i) not in held][:30]
            app.publish_many(store, [report(i) for i in theirs], REPORTS_STREAM)
            head = store.read_all(None, 10**6)[-1].position
            assert head > started
            wait_until(
                lambda: not _short_of_head(store, app, held, head),
                30,
                "every held partition's checkpoint at the head",
            )
            assert store.reads[before:] == [], "the other partitions' rows were read again"
            assert service.errors == []
    finally:
        store.close()
