"""Forking from the console's instance page, over HTTP: offered on each input of the timeline
only with actions allowed, previewed (a dry run, nothing written) on the confirmation page,
then done with the token and a reason, and refused if the instance moved on since the
preview."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from decider.processors import FakeClock, Service
from decider.processors.console import Console
from decider.stores.sqlite import SqliteEventStore
from tests.console.test_console_http import TOKEN, Running
from tests.support.fork_app import Order, fixed_app, make_app
from tests.support.stores import events, types

WAIT = 30.0
STREAM = "Repair-c1"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteEventStore]:
    """A store where the buggy code failed ``Repair-c1`` once it was charged."""
    opened = SqliteEventStore(tmp_path / "events.db")
    buggy = make_app("repair", repaired=False)
    try:
        with Service(buggy, opened, clock=FakeClock()) as service:
            buggy.publish(opened, Order(order_id="c1", amount=5), "repair-inputs")
            assert service.wait_until(lambda: types(opened, STREAM)[-1:] == ["Failed"], WAIT)
            assert service.wait_idle(WAIT)
        yield opened
    finally:
        opened.close()


@pytest.fixture
def acting(store: SqliteEventStore) -> Iterator[Running]:
    running = Running(Console(fixed_app, store, actions=True, token=TOKEN))
    yield running
    running.close()


def fork_link(stream: str, at: int) -> str:
    query = urllib.parse.urlencode({"action": "fork", "id": stream, "at": at})
    return f'href="/confirm?{query.replace("&", "&amp;")}">Fork from here</a>'


def test_a_read_only_console_offers_no_fork(store: SqliteEventStore) -> None:
    running = Running(Console(fixed_app, store))
    try:
        page = running.request(f"/instance?stream={STREAM}")[2]
        assert "Fork from here" not in page
        assert running.request(f"/confirm?action=fork&id={STREAM}&at=4")[0] == 403
        form = {"id": STREAM, "at": "4", "revision": "5", "reason": "r", "token": TOKEN}
        assert running.request("/actions/fork", form)[0] == 403
    finally:
        running.close()


def test_fork_from_an_input_previews_then_forks(acting: Running, store: SqliteEventStore) -> None:
    page = acting.request(f"/instance?stream={STREAM}")[2]
    assert page.count("Fork from here</a>") == 2  # the order (#1) and the charge's result (#4)
    assert fork_link(STREAM, 1) in page and fork_link(STREAM, 4) in page
    # replay-check's first difference (the charge's result) is the fork suggested
    assert f'class="button fork suggested" {fork_link(STREAM, 4)}' in page
    assert "The current code first decides otherwise at input #4" in page

    before = len(events(store))
    code, _, confirm = acting.request(f"/confirm?action=fork&id={STREAM}&at=4")
    assert code == 200, confirm
    assert len(events(store)) == before  # the preview writes nothing
    assert f"{STREAM} forks to <b>{STREAM}~g2</b> at revision 4 (of 5)" in confirm
    assert "<td>Sent:repair.Ship</td><td>carried out anew</td>" in confirm
    assert "<td>Sent:repair.Charge</td><td>reuses #2</td>" in confirm
    assert '<input type="hidden" name="revision" value="5">' in confirm
    assert 'name="reason"' in confirm and "Fork the instance" in confirm

    form = {"id": STREAM, "at": "4", "revision": "5", "reason": "ship charged orders"}
    assert acting.request("/actions/fork", form)[0] == 403  # no token
    assert acting.request("/actions/fork", {**form, "token": TOKEN, "reason": " "})[0] == 400
    stale = acting.request("/actions/fork", {**form, "token": TOKEN, "revision": "4"})
    assert stale[0] == 409 and "recorded more events since the preview" in stale[2]
    assert len(events(store)) == before

    code, _, done = acting.request("/actions/fork", {**form, "token": TOKEN})
    assert code == 200 and f"{STREAM} forked to {STREAM}~g2 at revision 4" in done, done
    assert f'href="/instance?stream={STREAM}~g2">Open {STREAM}~g2</a>' in done
    assert types(store, STREAM)[-1] == "Cancelled"
    assert types(store, f"{STREAM}~g2")[-1] == "Sent:repair.Ship"

    after = acting.request(f"/instance?stream={STREAM}")[2]
    assert "<b>Forked</b> to" in after and "Fork from here" not in after
    generation = acting.request(f"/instance?stream={STREAM}~g2")[2]
    assert fork_link(f"{STREAM}~g2", 4) in generation
    assert "suggested" not in generation  # it replays the same: nothing to repair
    again = acting.request("/actions/fork", {**form, "token": TOKEN})
    assert again[0] == 200 and "was already forked to" in again[2]
    assert len(events(store)) == before + len(types(store, f"{STREAM}~g2")) + 1


def test_a_fork_that_cannot_be_planned_is_refused(acting: Running) -> None:
    assert acting.request(f"/confirm?action=fork&id={STREAM}&at=x")[0] == 400
    code, _, page = acting.request(f"/confirm?action=fork&id={STREAM}&at=99")
    assert code == 409 and "revisions 1 to 5" in page
    assert acting.request("/confirm?action=fork&id=Nope-1&at=1")[0] == 409
