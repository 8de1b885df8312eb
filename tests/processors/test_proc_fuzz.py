"""Fuzz the engine: generated stored events, good and bad, through every processor.

Hypothesis writes inputs for the workflow processors (bad JSON, wrong shapes, 100,000 levels of
nesting, bad metadata, instance ids no store can hold, routes and ``decide`` that raise, odd but
valid unicode), commands for the command processor and ``Scheduled`` events for the timer
processor, mixed with good inputs, on the memory store and SQLite (PostgreSQL in a smaller run).
Every good workflow completes, every bad event a processor reads is recorded in its skipped
stream with a reason (or parked, for a command no handler takes), and no processor stops.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import open_store
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proc_support import (
    Added,
    Closed,
    JobRequested,
    Reminded,
    RemindMe,
    job,
    reminder,
    tally,
    tally_route,
)
from proc_support import job_app as _job_app

from decider import Lifecycle, event_id
from decider.processors import (
    App,
    InputSkipped,
    RetryPolicy,
    Service,
    by_correlation,
    list_parked,
    status,
)
from decider.stores.protocol import ANY, EventStore, NewEvent

DEEP = "[" * 100_000 + "]" * 100_000
BAD_JSON = [b"{bad", b"", b"[1, 2]", b"null", b'"text"', b"\xff\xfe{}", DEEP.encode()]
BAD_METADATA = [b"{bad", b"[1]", b"{}", b'{"message_id": 5}', b"\xff", DEEP.encode()]
BAD_IDS = ["PR-\ud800", "PR-\x00", "x" * 1200, "boom", ""]
ODD_IDS = ["é-ü", "😀", "\u202eRTL", "a\u0301", "tab\there", "中文"]


@attrs.frozen
class Stored:
    """One event to store: where, what, and which processor must record it if it is bad."""

    stream: str
    type: str
    data: bytes
    metadata: bytes
    reads: str | None  # the processor that reads it: "tally", "commands", "timers", or None
    parks: bool = False


def _json(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()


def _meta(message_id: str, correlation: str | None = None) -> bytes:
    doc: dict[str, Any] = {"message_id": message_id}
    if correlation is not None:
        doc["correlation_id"] = correlation
    return _json(doc)


@st.composite
def bad_events(draw: st.DrawFn, index: int) -> Stored:
    """A stored event that its processor cannot handle."""
    message_id = f"bad{index}"
    meta = _meta(message_id)
    case = draw(st.sampled_from(["json", "shape", "id", "decide", "metadata", "command", "timer"]))
    if case == "json":
        return Stored("inputs", "ptest.Added", draw(st.sampled_from(BAD_JSON)), meta, "tally")
    if case == "shape":
        data = draw(
            st.sampled_from(
                [
                    _json({"tally_id": "x"}),
                    _json({"amount": 1}),
                    _json({"tally_id": "x", "amount": "one"}),
                    b'{"tally_id": ' + DEEP.encode() + b', "amount": 1}',
                ]
            )
        )
        return Stored("inputs", "ptest.Added", data, meta, "tally")
    if case == "id":
        tally_id = draw(st.sampled_from(BAD_IDS))
        data = json.dumps({"tally_id": tally_id, "amount": 1}).encode()  # \ud800 as an escape
        return Stored("inputs", "ptest.Added", data, meta, "tally")
    if case == "decide":
        data = _json({"tally_id": f"neg{index}", "amount": -draw(st.integers(1, 10**9))})
        return Stored("inputs", "ptest.Added", data, meta, "tally")
    if case == "metadata":
        data = _json({"tally_id": f"m{index}", "amount": 1})
        return Stored("inputs", "ptest.Added", data, draw(st.sampled_from(BAD_METADATA)), "tally")
    if case == "command":
        command = draw(st.sampled_from(["ptest.DoWork", "ptest.Unknown", "x.Y-z"]))
        stream = f"Job-bad{index}"
        if command != "ptest.DoWork":
            return Stored(stream, f"Sent:{command}", b"{}", meta, "commands", parks=True)
        if draw(st.booleans()):
            return Stored(stream, "Sent:ptest.DoWork", _json({"job_id": 1}), meta, "commands")
        return Stored(
            stream, "Sent:ptest.DoWork", b"{}", draw(st.sampled_from(BAD_METADATA)), "commands"
        )
    data = draw(
        st.sampled_from(
            [
                *BAD_JSON,
                _json({"after": -1, "message": {"reminder_id": "r"}}),
                _json({"after": "soon", "message": {"reminder_id": "r"}}),
                _json({"after": 1, "message": [1]}),
                _json({"after": 1e300, "message": {}}),
                b'{"after": 1, "message": ' + DEEP.encode() + b"}",
            ]
        )
    )
    return Stored(f"Reminder-bad{index}", "Scheduled:ptest.Reminded", data, meta, "timers")


def noise(index: int) -> st.SearchStrategy[Stored]:
    """Events no processor reads: unknown types, odd type names."""
    return st.builds(
        lambda name, data: Stored("inputs", name, data, _meta(f"noise{index}"), None),
        st.sampled_from(["unknown.Type", "Sent", "Sent:", "Began", "Completed", "x" * 300]),
        st.sampled_from(BAD_JSON[:3]),
    )


@attrs.frozen
class Case:
    bad: list[Stored]
    good_tallies: list[str]
    good_jobs: list[str]
    good_reminders: list[str]


cases = st.builds(
    Case,
    bad=st.integers(0, 10**6).flatmap(
        lambda seed: st.lists(
            st.integers(0, 10**6).flatmap(
                lambda i: st.one_of(bad_events(seed * 1000 + i), noise(i))
            ),
            min_size=1,
            max_size=8,
        )
    ),
    good_tallies=st.lists(
        st.sampled_from(["t1", "t2", *ODD_IDS]), min_size=1, max_size=3, unique=True
    ),
    good_jobs=st.lists(st.sampled_from(["j1", "j2", "j3"]), max_size=2, unique=True),
    good_reminders=st.lists(st.sampled_from(["r1", "r2"]), max_size=2, unique=True),
)


def fuzz_app() -> App:
    app, _ = _job_app("fuzz", retry=RetryPolicy(max_attempts=1))
    app.workflow(tally, inputs={Added: tally_route, Closed: tally_route})
    app.workflow(reminder, inputs={RemindMe: lambda m, _: m.reminder_id, Reminded: by_correlation})
    return app


def _store(stored: Stored, index: int, store: EventStore) -> NewEvent:
    new = NewEvent(
        event_id(stored.stream, f"fuzz{index}", 0), stored.type, stored.data, stored.metadata
    )
    store.append(stored.stream, [new], ANY)
    return new


def _skipped_ids(store: EventStore, app: App) -> set[str]:
    ids: set[str] = set()
    for name in (*(f"workflow.{w}" for w in app.workflows), "commands", "timers"):
        for event in store.read_stream(f"decider-skipped-{app.name}.{name}"):
            record = app.codec.decode_message(event.type, event.data)
            assert isinstance(record, InputSkipped) and record.reason
            ids.add(record.event_id)
    return ids


def run_case(store: EventStore, case: Case) -> None:
    app = fuzz_app()
    expected_skips: set[str] = set()
    expected_parks: set[str] = set()
    for index, stored in enumerate(case.bad):
        new = _store(stored, index, store)
        if stored.parks:
            expected_parks.add(str(new.id))
        elif stored.reads is not None:
            expected_skips.add(str(new.id))
    for tally_id in case.good_tallies:
        app.publish(store, Added(tally_id=tally_id, amount=2), "inputs")
        app.publish(store, Closed(tally_id=tally_id), "inputs")
    for job_id in case.good_jobs:
        app.publish(store, JobRequested(job_id=job_id, action="ok"), "jobs")
    for reminder_id in case.good_reminders:
        app.publish(store, RemindMe(reminder_id=reminder_id, seconds=0), "reminders")
    good = {tally.stream(t) for t in case.good_tallies}
    good |= {job.stream(j) for j in case.good_jobs}
    good |= {reminder.stream(r) for r in case.good_reminders}

    def completed() -> set[str]:
        return {s.stream for s in status(store, app) if s.status is Lifecycle.COMPLETED}

    def done() -> bool:
        parked = {p.command_id for p in list_parked(store, app)}
        return (
            good <= completed()
            and expected_skips <= _skipped_ids(store, app)
            and expected_parks <= parked
        )

    with Service(app, store) as service:
        assert service.wait_until(done, 30), (
            f"missing skips {expected_skips - _skipped_ids(store, app)}, "
            f"incomplete {good - completed()}"
        )
        assert service.wait_idle(30)
        assert all(thread.is_alive() for thread in service._threads)
        assert service.errors == []


@contextlib.contextmanager
def fresh(kind: str) -> Iterator[EventStore]:
    with tempfile.TemporaryDirectory() as directory:
        store, cleanups = open_store(kind, Path(directory))
        try:
            yield store
        finally:
            for cleanup in cleanups:
                cleanup()


_SETTINGS = {
    "deadline": None,
    "derandomize": True,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


@pytest.mark.parametrize(("kind", "examples"), [("memory", 60), ("sqlite", 30)])
def test_fuzzed_events_never_stop_a_processor(kind: str, examples: int) -> None:
    @settings(max_examples=examples, **_SETTINGS)  # type: ignore[arg-type]
    @given(case=cases)
    def check(case: Case) -> None:
        with fresh(kind) as store:
            run_case(store, case)

    check()


@pytest.mark.slow
def test_fuzzed_events_never_stop_a_processor_on_postgres() -> None:
    @settings(max_examples=8, **_SETTINGS)  # type: ignore[arg-type]
    @given(case=cases)
    def check(case: Case) -> None:
        with fresh("postgres") as store:
            run_case(store, case)

    check()
