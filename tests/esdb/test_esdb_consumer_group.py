"""The command processor as a consumer group on the EventStoreDB test server (either client):
competing consumers, retries through the server, parking in both places, ``decider retry``,
a hung consumer's commands redelivered, and the refusal on other stores."""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from decider import Lifecycle, Metadata
from decider.processors import (
    App,
    CommandFailed,
    RetryPolicy,
    Service,
    by_correlation,
    list_parked,
    retry_parked,
    show,
)
from decider.processors.cli import main
from decider.processors.commands.consumer_group import ConsumerGroupCommandProcessor, command_group
from decider.stores.consumer_groups import ConsumerGroupStore, GroupSettings
from decider.stores.esdb import EsdbEventStore
from decider.stores.esdb._batch import open_esdb_store
from decider.stores.esdb.testserver import EsdbTestServer
from decider.stores.protocol import EventStore
from decider.stores.sqlite import SqliteEventStore
from tests.support.apps import DoWork, JobRequested, WorkDone, job
from tests.support.stores import counts
from tests.support.waiting import wait_until

FAST = RetryPolicy(max_attempts=3, initial_delay=0.001, max_delay=0.002)
WAIT = 30.0


class Effects:
    """What the handlers did: calls per job, and the effect per command id (idempotent)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: collections.Counter[str] = collections.Counter()
        self.effects: dict[str, str] = {}
        self.first_calls: dict[str, str] = {}  # job id -> the thread of its first call

    def record(self, job_id: str, command_id: str) -> int:
        with self.lock:
            self.calls[job_id] += 1
            self.first_calls.setdefault(job_id, threading.current_thread().name)
            self.effects.setdefault(command_id, job_id)
            return self.calls[job_id]


def job_app(name: str, handle: Callable[[DoWork, str], list[object]]) -> App:
    app = App(name, pool_size=2)
    app.workflow(
        job,
        inputs={
            JobRequested: _job_id,
            WorkDone: by_correlation,
            CommandFailed: by_correlation,
        },
    )
    app.handler(DoWork, retry=FAST, name="do_work")(handle)
    return app


def _job_id(request: JobRequested, _: Metadata) -> str:
    return request.job_id


@pytest.fixture
def server() -> Iterator[EsdbTestServer]:
    with EsdbTestServer() as running:
        yield running


@contextlib.contextmanager
def consumer(app: App, uri: str, group: str = "") -> Iterator[Service]:
    """A service of ``app`` whose command processor joins the consumer group (own connection)."""
    store = open_esdb_store(uri)
    try:
        with Service(app, store, consumer_group=group) as service:
            yield service
    finally:
        store.close()


def status(store: EventStore, app: App, job_id: str) -> Lifecycle:
    return show(store, app, job.stream(job_id)).status


def done(store: EventStore, app: App, job_id: str) -> bool:
    return status(store, app, job_id) is Lifecycle.COMPLETED


def commands(service: Service) -> ConsumerGroupCommandProcessor:
    found = service.processor("commands")
    assert isinstance(found, ConsumerGroupCommandProcessor)
    return found


def results(store: EventStore) -> collections.Counter[str]:
    return counts(store, "do_work-")


def test_two_consumers_in_one_group_share_the_commands(server: EsdbTestServer) -> None:
    effects = Effects()

    def do_work(command: DoWork, command_id: str) -> list[object]:
        effects.record(command.job_id, command_id)
        return [WorkDone(job_id=command.job_id)]

    app = job_app("cg-split", do_work)
    store = open_esdb_store(server.uri)
    jobs = [f"j{i}" for i in range(24)]
    with consumer(app, server.uri) as first, consumer(app, server.uri) as second:
        joined = [commands(first).joined, commands(second).joined]
        wait_until(lambda: all(j.is_set() for j in joined), WAIT, "both consumers in the group")
        for job_id in jobs:
            app.publish(store, JobRequested(job_id=job_id, action="ok"), "jobs")
        wait_until(lambda: all(done(store, app, j) for j in jobs), WAIT, "every job completed")
        shares = [commands(first).carried_out, commands(second).carried_out]
        assert all(shares) and sum(shares) >= len(jobs)
    # Each command had one effect and one result, whoever carried it out.
    assert sorted(effects.effects.values()) == sorted(jobs)
    assert set(results(store).values()) == {1} and len(results(store)) == len(jobs)
    assert list_parked(store, app) == []
    # The group's checkpoint became the command processor's: a run without the group goes on
    # from there, and carries nothing out again.
    assert store.load_checkpoint("cg-split.commands") is not None
    calls = sum(effects.calls.values())
    with Service(app, store) as alone:
        assert alone.wait_idle(WAIT)
    assert sum(effects.calls.values()) == calls
    store.close()


def test_a_retryable_failure_is_retried_through_the_group_then_succeeds(
    server: EsdbTestServer,
) -> None:
    effects = Effects()

    def do_work(command: DoWork, command_id: str) -> list[object]:
        if effects.record(command.job_id, command_id) < 3:
            raise ConnectionError("the service is busy")
        return [WorkDone(job_id=command.job_id)]

    app = job_app("cg-retry", do_work)
    store = open_esdb_store(server.uri)
    assert isinstance(store, ConsumerGroupStore)
    with consumer(app, server.uri) as service:
        app.publish(store, JobRequested(job_id="r", action="ok"), "jobs")
        wait_until(lambda: done(store, app, "r"), WAIT, "the job completed")
        assert service.wait_idle(WAIT)
        assert commands(service).nacked == 2  # two nack-retries, then the ack
    assert effects.calls["r"] == 3
    assert list_parked(store, app) == [] and command_group(store, app).parked() == []
    assert set(results(store).values()) == {1}
    store.close()


def test_an_always_failing_command_is_parked_in_both_places_and_retry_brings_it_back(
    server: EsdbTestServer,
) -> None:
    fixed = threading.Event()
    effects = Effects()

    def do_work(command: DoWork, command_id: str) -> list[object]:
        effects.record(command.job_id, command_id)
        if not fixed.is_set():
            raise RuntimeError(f"cannot do {command.job_id}")
        return [WorkDone(job_id=command.job_id)]

    app = job_app("cg-park", do_work)
    store = open_esdb_store(server.uri)
    assert isinstance(store, ConsumerGroupStore)
    group = command_group(store, app)
    with consumer(app, server.uri):
        app.publish(store, JobRequested(job_id="p", action="ok"), "jobs")
        wait_until(lambda: list_parked(store, app), WAIT, "the command parked in the ledger")
        (parked,) = list_parked(store, app)
        assert parked.attempts == FAST.max_attempts and "cannot do p" in parked.reason
        assert effects.calls["p"] == FAST.max_attempts
        wait_until(group.parked, WAIT, "the command parked on the server")
        (link,) = group.parked()
        assert (link.stream, link.revision) == (parked.stream, parked.revision)
        # The workflow heard of the failure (CommandFailed), as without a group.
        wait_until(lambda: "Received:decider.CommandFailed" in _types(store, app, "p"), WAIT)
        # Fixed, and retried as an operator would (what `decider retry` calls).
        fixed.set()
        retry_parked(store, app, parked.command_id)
        wait_until(lambda: results(store), WAIT, "the retried command's results")
        assert list_parked(store, app) == []
    assert effects.calls["p"] == FAST.max_attempts + 1
    assert results(store) == {f"do_work-{parked.command_id}": 1}
    store.close()


def test_a_replay_of_the_parked_stream_goes_through_the_ledger(server: EsdbTestServer) -> None:
    fixed = threading.Event()

    def do_work(command: DoWork, command_id: str) -> list[object]:
        if not fixed.is_set():
            raise RuntimeError("broken")
        return [WorkDone(job_id=command.job_id)]

    app = job_app("cg-replay", do_work)
    store = open_esdb_store(server.uri)
    assert isinstance(store, ConsumerGroupStore)
    group = command_group(store, app)
    with consumer(app, server.uri):
        app.publish(store, JobRequested(job_id="q", action="ok"), "jobs")
        wait_until(lambda: list_parked(store, app) and group.parked(), WAIT, "parked")
        fixed.set()
        group.replay_parked()  # an operator's "replay parked messages"
        wait_until(lambda: results(store), WAIT, "the replayed command's results")
        wait_until(lambda: list_parked(store, app) == [], WAIT, "the ledger agrees")
        # Replayed again (the server's link is stale): acknowledged, nothing done twice.
        group.replay_parked()
        wait_until(lambda: group.info().in_flight + group.info().retry_buffer == 0, WAIT)
    assert set(results(store).values()) == {1}
    store.close()


def test_a_hung_consumers_command_is_redelivered_after_the_message_timeout(
    server: EsdbTestServer,
) -> None:
    release = threading.Event()
    effects = Effects()

    def do_work(command: DoWork, command_id: str) -> list[object]:
        if effects.record(command.job_id, command_id) == 1:
            release.wait(WAIT)  # the first consumer hangs after its effect, before its results
        return [WorkDone(job_id=command.job_id)]

    app = job_app("cg-hung", do_work)
    store = open_esdb_store(server.uri)
    assert isinstance(store, ConsumerGroupStore)
    settings = GroupSettings(consumer_strategy="RoundRobin", message_timeout=1.0)
    assert command_group(store, app).ensure(settings, start=None)
    with consumer(app, server.uri) as first, consumer(app, server.uri) as second:
        app.publish(store, JobRequested(job_id="h", action="ok"), "jobs")
        wait_until(lambda: effects.calls["h"] >= 1, WAIT, "the first call")
        # The server sends it again after the timeout (retry_count 1 or more); only the other
        # consumer can carry it out: the hung one holds the instance's commands behind the
        # call in hand (one instance's commands run one at a time in a process).
        wait_until(lambda: done(store, app, "h"), WAIT, "the job completed")
        assert effects.calls["h"] >= 2
        release.set()
        busy = [commands(first), commands(second)]
        wait_until(lambda: all(not p._open for p in busy), WAIT, "both consumers answered")
    assert effects.effects == {next(iter(effects.effects)): "h"}  # one effect
    assert set(results(store).values()) == {1} and len(results(store)) == 1
    assert list_parked(store, app) == []
    store.close()


def test_what_the_server_parks_on_its_own_reaches_the_ledger(server: EsdbTestServer) -> None:
    release = threading.Event()
    effects = Effects()

    def do_work(command: DoWork, command_id: str) -> list[object]:
        if effects.record(command.job_id, command_id) == 1:
            release.wait(WAIT)  # hung: the server times the delivery out, and parks it
        return [WorkDone(job_id=command.job_id)]

    app = job_app("cg-server-park", do_work)
    store = open_esdb_store(server.uri)
    assert isinstance(store, ConsumerGroupStore)
    group = command_group(store, app)
    assert group.ensure(GroupSettings(message_timeout=1.0, max_retry_count=0), start=None)
    try:
        with consumer(app, server.uri) as service:
            app.publish(store, JobRequested(job_id="s", action="ok"), "jobs")
            wait_until(group.parked, WAIT, "the server parked the command")
            assert list_parked(store, app) == []  # the ledger does not know yet
            service.stop(timeout=2)  # the hung call is left behind
    finally:
        release.set()
    # The next start records the server's park in the ledger; retried, the command succeeds.
    with consumer(app, server.uri) as service:
        wait_until(lambda: list_parked(store, app), WAIT, "the park in the ledger")
        (parked,) = list_parked(store, app)
        assert parked.attempts == 1 and "parked by the server" in parked.reason
        retry_parked(store, app, parked.command_id)
        wait_until(lambda: results(store), WAIT, "the retried command's results")
    assert results(store) == {f"do_work-{parked.command_id}": 1}
    assert list_parked(store, app) == []
    store.close()


def test_the_consumer_group_is_refused_on_other_stores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = job_app("cg-refused", lambda c, i: [])
    with (
        contextlib.closing(SqliteEventStore(tmp_path / "events.db")) as store,
        pytest.raises(ValueError, match="EventStoreDB/KurrentDB"),
    ):
        Service(app, store, consumer_group="")
    uri = f"sqlite:///{tmp_path / 'events.db'}"
    arguments = ["run", "tests.support.apps:fines_app", "--store", uri, "--esdb-consumer-group"]
    assert main(arguments) == 2
    assert "leave --esdb-consumer-group out" in capsys.readouterr().err


def _types(store: EventStore, app: App, job_id: str) -> list[Any]:
    return [entry.type for entry in show(store, app, job.stream(job_id)).history]


def test_the_adapter_is_a_consumer_group_store(server: EsdbTestServer) -> None:
    store = EsdbEventStore(server.uri)
    assert isinstance(store, ConsumerGroupStore)
    store.close()
