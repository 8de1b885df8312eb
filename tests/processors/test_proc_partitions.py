"""Partitions and leases in one process: the hash, a group of one, rebalancing on join and on
graceful leave, fencing of a member that lost its leases, the recorded partition count, and
``decider status``'s partition listing."""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from decider.processors import App, Service, by_correlation
from decider.processors.app.streams import (
    command_processor_name,
    results_stream,
    timer_stream,
    workflow_processor_name,
)
from decider.processors.cli import main
from decider.processors.commands.processor import CommandProcessor
from decider.processors.engine.committing import writer_for
from decider.processors.group.membership import PartitionGroup
from decider.processors.group.partitions import (
    PartitionCountMismatch,
    checkpoint_name,
    claims,
    ensure_count,
    lease_name,
    partition_of,
)
from decider.processors.timers.processor import TimerProcessor
from decider.stores.leases import Lease
from decider.stores.memory import MemoryEventStore
from decider.stores.protocol import StreamAppend, TransactionalStore
from decider.stores.sqlite import SqliteEventStore
from samples.traffic_fine.app import REPORTS_STREAM, make_app, make_state_stored_app
from samples.traffic_fine.workflow import workflow
from tests.processors.test_proc_traffic_fine import all_completed, check_exactly_once, report
from tests.support.apps import JobRequested, Reminded, RemindMe, add_job, job, reminder
from tests.support.partitions import fences_of, member, pause_heartbeat, pause_unnoticed
from tests.support.stores import instance_streams
from tests.support.waiting import wait_until


def test_the_partition_of_a_stream_is_stable_and_spread() -> None:
    # crc32, not hash(): the same in every process (a process's hash() is salted).
    assert partition_of("Order-o-1", 16) == 14
    spread = collections.Counter(partition_of(f"Order-o-{i}", 16) for i in range(1600))
    assert set(spread) == set(range(16))
    assert min(spread.values()) > 60


def test_a_group_of_one_holds_every_partition_and_does_all_the_work() -> None:
    store = MemoryEventStore()
    app = make_app("one")
    group = PartitionGroup(store, app, owner="solo", ttl=5)
    n = 40
    app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
    with member(Service(app, store, group=group)) as service:
        assert sorted(group.partitions()) == list(range(16))
        assert service.wait_until(lambda: all_completed(store, app, n), 30)
        assert service.wait_idle(30)
        assert service.errors == []
    check_exactly_once(store, n)
    # Each partition has its own checkpoint; the processor's unpartitioned one is not used.
    processor = workflow_processor_name(app.name, workflow.name)
    assert store.load_checkpoint(processor) is None
    assert all(store.load_checkpoint(checkpoint_name(processor, p)) for p in range(16))
    # A graceful stop released every lease.
    assert all(lease.owner is None for lease in store.leases())


def test_partitions_rebalance_when_a_member_joins_and_when_one_leaves() -> None:
    store = MemoryEventStore()
    app = make_app("pair")
    first = PartitionGroup(store, app, owner="first", ttl=1)
    second = PartitionGroup(store, app, owner="second", ttl=1)
    with member(Service(app, store, group=first)) as one:
        app.publish_many(store, [report(i) for i in range(30)], REPORTS_STREAM)
        with member(Service(app, store, group=second)) as two:
            wait_until(lambda: len(first.partitions()) == len(second.partitions()) == 8, 10)
            assert not set(first.partitions()) & set(second.partitions())
            app.publish_many(store, [report(i) for i in range(30, 60)], REPORTS_STREAM)
            assert one.wait_until(lambda: all_completed(store, app, 60), 30)
            assert one.wait_idle(30) and two.wait_idle(30)
            assert one.errors == two.errors == []
        # The second left gracefully: its partitions were released, the first takes them all.
        wait_until(lambda: len(first.partitions()) == 16, 10, "the first holds every partition")
        app.publish_many(store, [report(i) for i in range(60, 80)], REPORTS_STREAM)
        assert one.wait_until(lambda: all_completed(store, app, 80), 30)
        assert one.wait_idle(30)
    check_exactly_once(store, 80)
    history = claims(store, app)
    assert {c.owner for c in history} == {"first", "second"}
    epochs = collections.Counter((c.partition, c.epoch) for c in history)
    assert max(epochs.values()) == 1  # one owner per epoch of a partition


def test_a_member_whose_leases_were_taken_over_commits_nothing() -> None:
    store = MemoryEventStore()
    app = make_app("fenced")
    group = PartitionGroup(store, app, owner="paused", ttl=0.5)
    with member(Service(app, store, group=group)):
        # The heartbeat stops (a paused process): the leases expire and another owner takes
        # every partition over, while the processors still hold their old leases in hand (the
        # member does not notice its pause, so it tries to commit under them).
        lost = pause_unnoticed(group)
        taken = []

        def take_over() -> bool:
            for number in range(16):
                name = lease_name(app.name, number)
                if name not in taken and store.claim_lease(name, "thief", 60) is not None:
                    taken.append(name)
            return len(taken) == 16

        wait_until(take_over, 10, "another owner took every partition over")
        app.publish_many(store, [report(i) for i in range(10)], REPORTS_STREAM)
        wait_until(lambda: lost, 10, "a commit refused for a lost lease")
    assert {lease.owner for lease in lost} == {"paused"}
    assert instance_streams(store, f"{workflow.name}-") == {}


def test_commands_dropped_while_the_leases_were_past_their_deadline_are_carried_out() -> None:
    # A late heartbeat (a loaded machine): the leases pass their local deadline, and the command
    # processor drops what it has in hand for them, as for a lost lease. The renewal that
    # follows keeps the same epochs (no one took them over), and nothing tells the processors
    # the leases changed: the dropped commands must still be carried out, not passed over by
    # the partitions' checkpoints.
    store = MemoryEventStore()
    app = make_app("late")
    group = PartitionGroup(store, app, owner="late", ttl=1)
    n = 20
    with member(Service(app, store, group=group)) as service:
        wait_until(lambda: len(group.partitions()) == 16, 10, "every partition held")
        (commands,) = [p for p in service.processors if isinstance(p, CommandProcessor)]
        dropped: list[int] = []
        drop = commands.marks.drop

        def dropping(key: int) -> None:
            dropped.append(key)
            drop(key)

        commands.marks.drop = dropping  # type: ignore[method-assign]
        pause_heartbeat(group)
        wait_until(lambda: not group.partitions(), 10, "the leases past their local deadline")
        app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
        wait_until(lambda: dropped, 10, "commands in hand dropped")
        del group.tick  # the heartbeat resumes: the leases are renewed, under the same epochs
        assert service.wait_until(lambda: all_completed(store, app, n), 30)
        assert service.wait_idle(30)
        assert service.errors == []
    check_exactly_once(store, n)
    assert {claim.epoch for claim in claims(store, app)} == {1}  # never taken over


def test_a_partition_renewed_after_its_local_deadline_is_worked_on_again() -> None:
    # One lease (not all) passes its local deadline: a late heartbeat that renews the others
    # first. The processors let that partition go and start a life without it; the renewal
    # that follows brings it back under the same epoch, and they must take it up again, or
    # its inputs and commands would never be done (seen as a stall at N = 50,000 on SQLite).
    store = MemoryEventStore()
    app = make_app("lapse")
    group = PartitionGroup(store, app, owner="lapse", ttl=30)
    n = 40
    with member(Service(app, store, group=group)) as service:
        wait_until(lambda: len(group.partitions()) == 16, 10, "every partition held")
        pause_heartbeat(group)
        with group._lock:
            name, (lease, _) = next(iter(group._held.items()))
            group._held[name] = (lease, time.monotonic() - 1)  # past its local deadline
        (lapsed,) = set(range(16)) - set(group.partitions())
        app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)

        def let_go() -> bool:  # a processor started a life without the partition
            views = [p.share._held_view for p in service.processors]
            return any(
                isinstance(view, frozenset) and lapsed not in {n for n, _ in view} for view in views
            )

        wait_until(let_go, 10, "a processor working without the lapsed partition")
        del group.tick  # the heartbeat resumes: renewed, under the same epoch
        group.tick()
        assert len(group.partitions()) == 16
        assert service.wait_until(lambda: all_completed(store, app, n), 30)
        assert service.wait_idle(30)
        assert service.errors == []
    check_exactly_once(store, n)
    assert {claim.epoch for claim in claims(store, app)} == {1}  # never taken over


def _count_joint_commits(store: MemoryEventStore) -> dict[str, list[int]]:
    """How many partitions' leases each fenced ``append_batch`` of ``store`` carried, by the
    processor whose checkpoints it stored."""
    counts: dict[str, list[int]] = collections.defaultdict(list)
    original = store.append_batch

    def counting(
        appends: Sequence[StreamAppend],
        *,
        checkpoints: Sequence[tuple[str, int]] = (),
        leases: Sequence[Lease] = (),
    ) -> Any:
        processor = checkpoints[0][0].rsplit(".", 1)[0] if checkpoints else "-"
        counts[processor].append(len(leases))
        return original(appends, checkpoints=checkpoints, leases=leases)

    store.append_batch = counting  # type: ignore[method-assign]
    return counts


def test_a_batch_of_several_partitions_commits_in_one_transaction() -> None:
    store = MemoryEventStore()
    app = make_app("together")
    counts = _count_joint_commits(store)
    n = 40
    app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
    group = PartitionGroup(store, app, owner="solo", ttl=5)
    with member(Service(app, store, group=group)) as service:
        assert service.wait_until(lambda: all_completed(store, app, n), 30)
        assert service.wait_idle(30)
        assert service.errors == []
    check_exactly_once(store, n)
    # The first batch held inputs of most of the 16 partitions: one commit for all of them,
    # by the workflow processor and by the command processor.
    processor = workflow_processor_name(app.name, workflow.name)
    assert max(counts[processor]) > 8
    assert max(counts[command_processor_name(app.name)]) > 8
    assert all(store.load_checkpoint(checkpoint_name(processor, p)) for p in range(16))


def test_how_a_store_commits_is_chosen_by_its_protocols_not_its_signature() -> None:
    """A TransactionalStore commits several partitions at once, whatever its ``append_batch``
    spells (a wrapper that forwards ``**fences`` too); others write append by append."""

    class Forwarding:
        def __init__(self, inner: MemoryEventStore) -> None:
            self.inner = inner

        def append(self, *args: Any) -> Any:
            return self.inner.append(*args)

        def append_batch(self, appends: Any, **fences: Any) -> Any:
            return self.inner.append_batch(appends, **fences)

    class Plain:
        def append(self, *args: Any) -> Any:
            raise AssertionError("never called")

    memory = MemoryEventStore()
    assert writer_for(memory, memory).joint
    forwarding: Any = Forwarding(memory)
    writer = writer_for(forwarding, memory)
    assert writer.joint and writer.transactional
    plain: Any = Plain()
    assert not writer_for(plain, memory).joint
    assert not writer_for(plain, memory).pipelined
    # The joint write goes through the forwarding method with the lists only.
    lease = memory.claim_lease("p", "me", 60)
    assert lease is not None
    writer.write([], [("cp", 3)], [lease])
    assert memory.load_checkpoint("cp") == 3


def test_a_batch_with_one_lease_lost_commits_the_other_partitions() -> None:
    store = MemoryEventStore()
    app = make_app("onelost")
    group = PartitionGroup(store, app, owner="paused", ttl=0.5)
    n = 40
    streams = {i: workflow.stream(f"r{i}") for i in range(n)}
    gone = partition_of(streams[0], 16)
    with member(Service(app, store, group=group)) as service:
        wait_until(lambda: len(group.partitions()) == 16, 10, "every partition held")
        lost = pause_heartbeat(group)
        name = lease_name(app.name, gone)
        wait_until(lambda: store.claim_lease(name, "thief", 60) is not None, 10, "taken over")
        app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
        kept = {s for s in streams.values() if partition_of(s, 16) != gone}
        wait_until(
            lambda: kept <= set(instance_streams(store, f"{workflow.name}-")),
            30,
            "every partition still held did its work",
        )
        assert service.wait_until(lambda: bool(lost), 10)
    assert {(lease.partition, lease.owner) for lease in lost} == {(name, "paused")}
    # Nothing of the lost partition was written, by a joint commit or its own.
    assert set(instance_streams(store, f"{workflow.name}-")) == kept


def test_a_process_with_another_partition_count_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "events.db"
    with contextlib.closing(SqliteEventStore(db)) as store:
        assert ensure_count(store, App("svc-fines", partitions=8)) == 8
        with pytest.raises(PartitionCountMismatch, match="configured with 16 partitions but"):
            PartitionGroup(store, make_app("svc-fines"), owner="x").start()
    uri = f"sqlite:///{db}"
    arguments = ["run", "tests.support.apps:fines_app", "--store", uri, "--partitions", "auto"]
    assert main(arguments) == 2
    assert "records 8" in capsys.readouterr().err


def test_status_lists_the_partitions_with_owner_checkpoint_and_lag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "events.db"
    app = make_app()
    with contextlib.closing(SqliteEventStore(db)) as store:
        group = PartitionGroup(store, app, owner="host:1:abcd", ttl=30)
        app.publish_many(store, [report(i) for i in range(10)], REPORTS_STREAM)
        with member(Service(app, store, group=group)) as service:
            assert service.wait_until(lambda: all_completed(store, app, 10), 30)
            spec = "samples.traffic_fine.app:app"
            assert main(["status", "--app", spec, "--store", f"sqlite:///{db}"]) == 0
    out = capsys.readouterr().out
    assert "partitions: 16" in out
    assert "host:1:abcd epoch 1 until" in out
    assert "lag 0" in out


def test_a_member_whose_leases_were_taken_over_commits_no_command_result_nor_timer() -> None:
    store = MemoryEventStore()
    release = threading.Event()
    app = App("fencedwork")

    def blocked(command_id: str, kind: str) -> None:
        release.wait(10)

    calls = add_job(app, blocked)
    app.workflow(reminder, inputs={RemindMe: _reminder_id, Reminded: by_correlation})
    group = PartitionGroup(store, app, owner="paused", ttl=0.5)
    with member(Service(app, store, group=group)) as service:
        commands = service.processor("commands")
        timers = service.processor("timers")
        assert isinstance(commands, CommandProcessor) and isinstance(timers, TimerProcessor)
        app.publish(store, JobRequested(job_id="j1", action="ok"), "jobs")
        app.publish(store, RemindMe(reminder_id="r1", seconds=1.0), "reminders")
        # The command's handler runs (blocked), the timer is queued and not due yet.
        wait_until(lambda: calls["j1"] == 1, 10, "the handler called")
        wait_until(lambda: len(timers.pending) == 1, 10, "the timer queued")
        # A paused process: the heartbeat stops, and the processors go on with the leases they
        # had in hand (the local deadlines aside), so only the store's fence can stop them.
        held = group.partitions()
        lost = pause_heartbeat(group)
        group.partitions = lambda: held  # type: ignore[method-assign]
        taken: list[str] = []

        def take_over() -> bool:
            for number in range(app.partitions):
                name = lease_name(app.name, number)
                if name not in taken and store.claim_lease(name, "thief", 60) is not None:
                    taken.append(name)
            return len(taken) == app.partitions

        wait_until(take_over, 10, "another owner took every partition over")
        release.set()  # the command concludes in the member that lost its partition
        wait_until(
            lambda: commands.in_flight == 0 and commands.marks.idle(),
            10,
            "the command's result refused",
        )
        wait_until(lambda: not timers.pending, 10, "the timer due, its firing refused")
        (sent,) = [e for e in store.read_stream(job.stream("j1")) if e.type.startswith("Sent:")]
        (scheduled,) = [
            e for e in store.read_stream(reminder.stream("r1")) if e.type.startswith("Scheduled:")
        ]
        assert store.read_stream(results_stream("do_work", str(sent.id))) == []
        assert store.read_stream(timer_stream(str(scheduled.id))) == []
        assert timers.fired == 0
    assert lost and {lease.owner for lease in lost} == {"paused"}


def _reminder_id(request: RemindMe, _: object) -> str:
    return request.reminder_id


def test_a_partition_checkpoint_of_commands_never_passes_its_unfinished_command() -> None:
    store = MemoryEventStore()
    release = threading.Event()
    app = App("lanes")

    first: list[str] = []

    def slow_for_one(command_id: str, kind: str) -> None:
        if not first or first == [command_id]:  # the first command (the slow job's) blocks
            first[:] = [command_id]
            release.wait(10)

    calls = add_job(app, slow_for_one)
    slow_stream = job.stream("slow")
    slow_partition = partition_of(slow_stream, app.partitions)
    fast = [
        f"fast{n}"
        for n in range(40)
        if partition_of(job.stream(f"fast{n}"), 16) != (slow_partition)
    ][:10]
    commands = command_processor_name(app.name)
    group = PartitionGroup(store, app, owner="solo", ttl=5)
    with member(Service(app, store, group=group)) as service:
        app.publish(store, JobRequested(job_id="slow", action="ok"), "jobs")
        wait_until(lambda: len(store.read_stream(slow_stream)) >= 3, 10, "the slow job's Sent")
        (sent,) = [e for e in store.read_stream(slow_stream) if e.type.startswith("Sent:")]
        wait_until(lambda: calls["slow"] == 1, 10, "the slow command running")
        app.publish_many(store, [JobRequested(job_id=j, action="ok") for j in fast], "jobs")
        assert service.wait_until(lambda: all(done(store, j) for j in fast), 30)
        # Every other partition's commands checkpoint moves past the slow command; its own
        # stays before it while the command is in hand.
        others = {partition_of(job.stream(j), 16) for j in fast}

        def moved_on() -> bool:
            marks = [store.load_checkpoint(checkpoint_name(commands, p)) for p in others]
            return all(mark is not None and mark > sent.position for mark in marks)

        wait_until(moved_on, 10, "the other partitions' command checkpoints past the slow one")
        mark = store.load_checkpoint(checkpoint_name(commands, slow_partition))
        assert mark is None or mark < sent.position
        release.set()
        assert service.wait_until(lambda: done(store, "slow"), 10)
        wait_until(
            lambda: (
                (store.load_checkpoint(checkpoint_name(commands, slow_partition)) or -1)
                >= sent.position
            ),
            10,
            "the slow partition's checkpoint past its command once it concluded",
        )
    assert calls["slow"] == 1 and all(calls[j] == 1 for j in fast)


def test_switching_between_one_process_and_a_group_needs_no_migration() -> None:
    store = MemoryEventStore()
    app = App("switch")
    calls = add_job(app)
    app.workflow(reminder, inputs={RemindMe: _reminder_id, Reminded: by_correlation})
    rounds = [("all", range(20)), ("auto", range(20, 40)), ("all", range(40, 60))]
    for mode, numbers in rounds:
        group = (
            PartitionGroup(store, app, owner=f"member-{mode}", ttl=5) if mode == "auto" else None
        )
        with member(Service(app, store, group=group)) as service:
            app.publish_many(
                store, [JobRequested(job_id=f"j{n}", action="ok") for n in numbers], "j"
            )
            app.publish_many(
                store, [RemindMe(reminder_id=f"r{n}", seconds=0.01) for n in numbers], "r"
            )
            names = [str(n) for n in numbers]

            def finished(names: list[str] = names) -> bool:
                return all(done(store, f"j{n}") and reminded(store, f"r{n}") for n in names)

            assert service.wait_until(finished, 30)
            assert service.wait_idle(30)
            timers = service.processor("timers")
            assert isinstance(timers, TimerProcessor)
            # Only this round's timers fired, only this round's commands carried out: each
            # mode resumed from what the other stored.
            assert timers.fired == len(numbers), mode
        assert sorted(calls.values()) == [1] * len(calls), mode
    assert len(calls) == 60


def done(store: MemoryEventStore, job_id: str) -> bool:
    """Whether the job completed."""
    events = store.read_stream(job.stream(job_id))
    return bool(events) and events[-1].type == "Completed"


def reminded(store: MemoryEventStore, reminder_id: str) -> bool:
    """Whether the reminder completed."""
    events = store.read_stream(reminder.stream(reminder_id))
    return bool(events) and events[-1].type == "Completed"


def test_a_state_stored_workflow_in_a_group_keeps_its_checkpoints_per_partition(
    tmp_path: Path,
) -> None:
    app = make_state_stored_app("state-group")
    n = 20
    with contextlib.closing(SqliteEventStore(tmp_path / "events.db")) as store:
        app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
        group = PartitionGroup(store, app, owner="solo", ttl=5)
        with member(Service(app, store, group=group)) as service:
            assert service.wait_until(lambda: all_completed(store, app, n), 30)
            assert service.wait_idle(30)
            assert service.errors == []
        processor = workflow_processor_name(app.name, workflow.name)
        # The processor's own checkpoint is not written in a group (a process that starts
        # later would take it for its partitions' checkpoints and skip their inputs).
        assert store.load_checkpoint(processor) is None
        assert all(store.load_checkpoint(checkpoint_name(processor, p)) for p in range(16))


def test_timers_due_in_several_partitions_fire_in_one_commit() -> None:
    store = MemoryEventStore()
    assert isinstance(store, TransactionalStore)
    app = App("jointtimers")
    app.workflow(reminder, inputs={RemindMe: _reminder_id, Reminded: by_correlation})
    group = PartitionGroup(store, app, owner="alone", ttl=5)
    with member(Service(app, store, group=group)) as service:
        wait_until(lambda: len(group.partitions()) == 16, 10, "the member holds them all")
        timers = service.processor("timers")
        assert isinstance(timers, TimerProcessor)
        # Due together, a second from now: by then every one is queued, in most partitions.
        app.publish_many(store, [RemindMe(reminder_id=f"r{n}", seconds=1) for n in range(40)], "r")
        assert service.wait_until(lambda: all(reminded(store, f"r{n}") for n in range(40)), 30)
        assert service.wait_idle(30)
        assert timers.fired == 40
        assert timers.joint_firings >= 1
        assert service.errors == []


def test_a_state_stored_batch_of_several_partitions_is_one_transaction(tmp_path: Path) -> None:
    app = make_state_stored_app("state-joint")
    n = 40
    with contextlib.closing(SqliteEventStore(tmp_path / "events.db")) as store:
        fenced_by = fences_of(store, "commit_states")
        app.publish_many(store, [report(i) for i in range(n)], REPORTS_STREAM)
        group = PartitionGroup(store, app, owner="solo", ttl=5)
        with member(Service(app, store, group=group)) as service:
            assert service.wait_until(lambda: all_completed(store, app, n), 30)
            assert service.wait_idle(30)
            assert service.errors == []
        # 40 reports over 16 partitions, read as one batch: one commit fences several leases
        assert fenced_by and max(fenced_by) > 1, fenced_by
