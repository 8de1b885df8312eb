"""The console over HTTP, without a browser: pages, filters, safety rules, actions, re-drive."""

from __future__ import annotations

import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from decider import Lifecycle
from decider.processors import Service, list_parked
from decider.processors.console import Console, make_server
from decider.processors.console.data import list_instances, list_skipped, processor_rows
from decider.processors.console.server import CSP
from decider.stores.sqlite import SqliteEventStore
from tests.console.console_support import (
    XSS,
    completed,
    console_process,
    filled,
    filled_store,
    stream,
)
from tests.support import console_app
from tests.support.postgres import fresh_store

TOKEN = "t0ken-for-tests"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


OPENER = urllib.request.build_opener(_NoRedirect)


class Running:
    """A console served from a thread of this process."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.server = make_server(console)
        host, port = self.server.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def request(
        self,
        path: str,
        form: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], str]:
        body = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(self.url + path, data=body, headers=headers or {})
        try:
            with OPENER.open(request, timeout=30) as answer:
                return answer.status, dict(answer.headers), answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read().decode()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console") / "events.db"


@pytest.fixture(scope="module")
def world(db: Path) -> Iterator[tuple[SqliteEventStore, Service]]:
    with filled_store(db) as world:
        yield world


@pytest.fixture
def read_only(world: tuple[SqliteEventStore, Service]) -> Iterator[Running]:
    running = Running(Console(console_app.app, world[0]))
    yield running
    running.close()


@pytest.fixture
def acting(world: tuple[SqliteEventStore, Service]) -> Iterator[Running]:
    running = Running(Console(console_app.app, world[0], actions=True, token=TOKEN))
    yield running
    running.close()


PAGES = [
    "/instances",
    "/instances?workflow=IssueTrafficFineForSpeedingViolation&status=running&stuck=1",
    f"/instance?stream={stream('PR-PARK')}",
    "/workflows",
    "/workflow?name=IssueTrafficFineForSpeedingViolation",
    "/parked",
    "/skipped",
    "/processors",
    "/partitions",
    "/instances?q=PR&refresh=5",
    "/static/console.css",
]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_answers_with_a_policy_that_allows_no_script(
    read_only: Running, path: str
) -> None:
    code, headers, body = read_only.request(path)
    assert code == 200, body
    assert headers["Content-Security-Policy"] == CSP
    assert "script-src" not in CSP and "default-src 'none'" in CSP
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "<script" not in body


def test_stored_markup_is_shown_as_text(read_only: Running) -> None:
    _, _, body = read_only.request(f"/instance?stream={stream('PR-XSS')}")
    assert XSS not in body
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in body


def test_a_read_only_console_offers_and_accepts_no_action(read_only: Running) -> None:
    assert "Retry" not in read_only.request("/parked")[2]
    assert read_only.request("/confirm?action=retry&id=x")[0] == 403
    code, _, body = read_only.request("/actions/retry", {"id": "x", "token": "anything"})
    assert code == 403 and "read-only" in body
    assert read_only.request(f"/instances?token={TOKEN}")[0] == 403


def test_a_request_for_another_host_name_is_refused(read_only: Running) -> None:
    port = read_only.url.rsplit(":", 1)[1]
    assert read_only.request("/instances", headers={"Host": f"evil.example:{port}"})[0] == 421


def test_unknown_things_are_404s(read_only: Running) -> None:
    assert read_only.request("/nope")[0] == 404
    assert read_only.request("/instance?stream=Nope-1")[0] == 404
    assert read_only.request("/workflow?name=Nope")[0] == 404
    assert read_only.request("/instances?workflow=Nope")[0] == 404
    assert read_only.request("/static/../server.py")[0] == 404


def test_an_action_needs_the_token_and_the_console_as_origin(acting: Running) -> None:
    command = list_parked(acting.console.store, console_app.app)[0].command_id
    assert acting.request("/actions/retry", {"id": command})[0] == 403
    assert acting.request("/actions/retry", {"id": command, "token": "wrong"})[0] == 403
    elsewhere = {"Origin": "http://evil.example"}
    assert acting.request("/actions/retry", {"id": command, "token": TOKEN}, elsewhere)[0] == 403
    assert list_parked(acting.console.store, console_app.app)[0].command_id == command


def test_the_printed_token_url_sets_a_strict_cookie_that_allows_actions(acting: Running) -> None:
    code, headers, _ = acting.request(f"/parked?token={TOKEN}")
    assert code == 303 and headers["Location"] == "/parked"
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert acting.request("/instances?token=wrong")[0] == 403
    assert acting.request(f"/\\evil.example?token={TOKEN}")[1]["Location"] == "/instances"
    page = acting.request("/confirm?action=retry&id=x")[2]
    assert 'name="token"' in page  # no cookie: the token is asked for
    cookie_header = {"Cookie": cookie.split(";")[0]}
    assert (
        'name="token"' not in acting.request("/confirm?action=retry&id=x", headers=cookie_header)[2]
    )
    code, _, body = acting.request("/actions/retry", {"id": "not-parked"}, cookie_header)
    assert code == 409 and "not parked" in body


def test_retry_from_the_console_lets_the_parked_instance_complete(
    acting: Running, world: tuple[SqliteEventStore, Service]
) -> None:
    store, service = world
    command = list_parked(store, console_app.app)[0].command_id
    console_app.BROKEN.clear()
    try:
        code, _, body = acting.request("/actions/retry", {"id": command, "token": TOKEN})
        assert code == 200 and "requested" in body
        assert service.wait_until(lambda: completed(store, "PR-PARK"), 30)
    finally:
        console_app.BROKEN.set()
    assert list_parked(store, console_app.app) == []


def test_redrive_feeds_a_skipped_input_again(
    acting: Running, world: tuple[SqliteEventStore, Service]
) -> None:
    store, service = world
    (skipped,) = list_skipped(store, console_app.app)
    assert skipped.redrivable and "the route returned None" in skipped.reason
    code, _, body = acting.request("/actions/redrive", {"id": skipped.skip_id, "token": TOKEN})
    assert code == 200, body
    # The copy is an input again; its route still finds no instance, so it is skipped again.
    assert service.wait_until(lambda: len(list_skipped(store, console_app.app)) == 2, 30)
    again = list_skipped(store, console_app.app)[1]
    assert (again.stream, again.revision) == (skipped.stream, skipped.revision + 1)
    # Re-driving the same record twice writes one copy.
    assert acting.request("/actions/redrive", {"id": skipped.skip_id, "token": TOKEN})[0] == 200
    assert len(store.read_stream(skipped.stream)) == 2
    assert acting.request("/actions/redrive", {"id": "nope", "token": TOKEN})[0] == 409


def test_the_instance_list_filters_and_pages(world: tuple[SqliteEventStore, Service]) -> None:
    store, _ = world
    everything = list_instances(store, console_app.app)
    assert everything.total == 6
    failed = list_instances(store, console_app.app, status_value=Lifecycle.FAILED.value)
    assert [r.stream for r in failed.rows] == [stream("PR-FAIL")]
    running = list_instances(store, console_app.app, status_value=Lifecycle.RUNNING.value)
    assert {r.stream for r in running.rows} <= {stream("PR-WAIT"), stream("PR-PARK")}
    stuck_now = list_instances(store, console_app.app, stuck_only=True, stuck_after=timedelta(0))
    assert {r.stream for r in stuck_now.rows} == {r.stream for r in running.rows}
    first = list_instances(store, console_app.app, limit=2)
    second = list_instances(store, console_app.app, offset=2, limit=2)
    assert len(first.rows) == 2 and len(second.rows) == 2
    assert not {r.stream for r in first.rows} & {r.stream for r in second.rows}


def test_the_pager_links_to_the_next_page(world: tuple[SqliteEventStore, Service]) -> None:
    running = Running(Console(console_app.app, world[0], page_size=2))
    try:
        body = running.request("/instances")[2]
        assert "1 to 2 of 6" in body and 'href="/instances?offset=2"' in body
    finally:
        running.close()


def test_processors_show_their_checkpoint_and_nothing_pending_once_idle(
    world: tuple[SqliteEventStore, Service],
) -> None:
    store, service = world
    assert service.wait_idle(30)
    rows = {r.name: r for r in processor_rows(store, console_app.app)}
    assert set(rows) == {
        "console-fines.workflow.IssueTrafficFineForSpeedingViolation",
        "console-fines.commands",
        "console-fines.timers",
    }
    workflow = rows["console-fines.workflow.IssueTrafficFineForSpeedingViolation"]
    assert workflow.checkpoint is not None and workflow.pending == 0
    assert workflow.oldest_pending_at is None


def test_an_instance_is_drawn_even_when_its_workflow_cannot_be_explored(
    world: tuple[SqliteEventStore, Service], monkeypatch: pytest.MonkeyPatch
) -> None:
    def cannot(*args: object, **kwargs: object) -> None:
        raise ModuleNotFoundError("No module named 'hypothesis'", name="hypothesis")

    monkeypatch.setattr("decider.processors.console.data.definition", cannot)
    running = Running(Console(console_app.app, world[0]))
    try:
        code, _, body = running.request(f"/instance?stream={stream('PR-1')}")
    finally:
        running.close()
    assert code == 200
    # The states and transitions the instance took are drawn all the same.
    for state in ("Initial", "AwaitingSystemNumber", "AwaitingManualIdentificationCode"):
        assert f'data-state="{state}"' in body
    assert '<g class="state current terminal" data-state="Final">' in body


def test_decider_console_serves_read_only_until_sigterm(
    world: tuple[SqliteEventStore, Service], db: Path
) -> None:
    with console_process(f"sqlite:///{db}") as console:
        assert console.token is None
        with urllib.request.urlopen(f"{console.url}instances", timeout=30) as answer:
            page = answer.read().decode()
        assert 'class="mode">read-only' in page and stream("PR-WAIT") in page
        console.process.terminate()
        assert console.process.wait(30) == 0


def test_the_console_reads_and_acts_on_postgresql_too() -> None:
    with fresh_store() as store, filled(store) as service:
        running = Running(Console(console_app.app, store, actions=True, token=TOKEN))
        try:
            for path in PAGES:
                code, _, body = running.request(path)
                assert code == 200, (path, body)
            rows = {r.name: r for r in processor_rows(store, console_app.app)}
            assert rows["console-fines.commands"].pending == 0
            command = list_parked(store, console_app.app)[0].command_id
            console_app.BROKEN.clear()
            assert running.request("/actions/retry", {"id": command, "token": TOKEN})[0] == 200
            assert service.wait_until(lambda: completed(store, "PR-PARK"), 30)
            (skipped,) = list_skipped(store, console_app.app)
            form = {"id": skipped.skip_id, "token": TOKEN}
            assert running.request("/actions/redrive", form)[0] == 200
            assert service.wait_until(lambda: len(list_skipped(store, console_app.app)) == 2, 30)
        finally:
            running.close()


def test_an_instance_page_says_first_why_it_failed(read_only: Running) -> None:
    body = read_only.request(f"/instance?stream={stream('PR-FAIL')}")[2]
    ended = body.index('<p class="ended failed"><b>Failed</b>: decide raised ')
    assert ended < body.index('<dl class="summary">')  # up front, before everything else
    assert 'class="ended' not in read_only.request(f"/instance?stream={stream('PR-1')}")[2]


def test_the_timeline_is_one_line_per_event_with_the_payload_on_demand(
    read_only: Running, world: tuple[SqliteEventStore, Service]
) -> None:
    body = read_only.request(f"/instance?stream={stream('PR-1')}")[2]
    events = len(world[0].read_stream(stream("PR-1")))
    timeline = body[body.index('<ol class="timeline">') :]
    assert timeline.count('<li class="event"><details><summary>') == events
    assert "<details open" not in timeline
    assert timeline.count('<pre class="payload">') == events  # inside each, shown when opened


def test_search_finds_an_instance_by_its_id_or_key(read_only: Running) -> None:
    code, headers, _ = read_only.request("/instances?q=PR-1")
    assert code == 303
    assert headers["Location"] == f"/instance?stream={stream('PR-1')}"
    code, headers, _ = read_only.request(f"/instances?q={stream('PR-2')}")
    assert code == 303 and headers["Location"] == f"/instance?stream={stream('PR-2')}"
    code, _, body = read_only.request("/instances?q=pr-")  # part of a key, any case: a list
    assert code == 200 and "1 to 6 of 6" in body and 'value="pr-"' in body
    body = read_only.request("/instances?q=WAI")[2]
    assert stream("PR-WAIT") in body and stream("PR-1") not in body
    assert "No instance matches." in read_only.request("/instances?q=nobody")[2]


def test_a_page_refreshes_itself_at_the_interval_chosen(read_only: Running) -> None:
    body = read_only.request("/processors?refresh=10")[2]
    assert '<meta http-equiv="refresh" content="10">' in body
    assert 'href="/instances?refresh=10"' in body  # the navigation keeps the interval
    assert '<option value="10" selected>every 10 s</option>' in body
    kept = read_only.request("/instances?status=running&refresh=5")[2]
    assert '<input type="hidden" name="status" value="running">' in kept
    for asked in ("7", "x", "0"):
        assert 'http-equiv="refresh"' not in read_only.request(f"/parked?refresh={asked}")[2]


def test_the_workflow_page_says_what_its_definition_does_not_draw(read_only: Running) -> None:
    body = read_only.request("/workflow?name=IssueTrafficFineForSpeedingViolation")[2]
    assert '(<code>on_error="fail"</code>): any state can end <b>failed</b>' in body
    assert "<summary>Not explored (6)</summary>" in body
    assert "Initial: no TrafficFineSystemNumberGenerated accepted (" in body


def test_the_partitions_page_of_an_unpartitioned_app_says_so(read_only: Running) -> None:
    code, _, body = read_only.request("/partitions")
    assert code == 200
    assert "has not run partitioned on this store" in body
    assert "console-fines.workflow.IssueTrafficFineForSpeedingViolation" in body


def test_the_partitions_page_shows_processes_owners_leases_checkpoints_and_lag() -> None:
    from decider.processors.group.membership import PartitionGroup
    from decider.stores.memory import MemoryEventStore
    from samples.traffic_fine.app import REPORTS_STREAM, make_app
    from tests.processors.test_proc_traffic_fine import all_completed, report
    from tests.support.partitions import member

    store = MemoryEventStore()
    app = make_app("shown")
    group = PartitionGroup(store, app, owner="host-a:1", ttl=30)
    app.publish_many(store, [report(i) for i in range(20)], REPORTS_STREAM)
    with member(Service(app, store, group=group)) as service:
        assert service.wait_until(lambda: all_completed(store, app, 20), 30)
        assert service.wait_idle(30)
        running = Running(Console(app, store))
        try:
            code, _, body = running.request("/partitions")
        finally:
            running.close()
    assert code == 200, body
    processes = body[body.index('<table class="processes">') :]
    assert "<td>host-a:1</td>" in processes and '<td class="num">16</td>' in processes
    table = body[body.index('<table class="partitions">') :]
    assert table.count('<tr><td class="num">') == 16
    assert table.count("<td>host-a:1</td>") == 16
    assert '<span class="lease-until">until' in table
    assert "<th>workflow.IssueTrafficFineForSpeedingViolation</th>" in table
    assert "· 0 · none pending" in table and "@none · 0" not in table.split("timers")[0]


def test_cancel_from_the_console_needs_actions_a_reason_and_the_token(
    read_only: Running, acting: Running, world: tuple[SqliteEventStore, Service]
) -> None:
    store, service = world
    waiting = stream("PR-WAIT")
    assert "Cancel this instance" not in read_only.request(f"/instance?stream={waiting}")[2]
    assert read_only.request(f"/confirm?action=cancel&id={waiting}")[0] == 403
    page = acting.request(f"/instance?stream={waiting}")[2]
    link = urllib.parse.urlencode({"action": "cancel", "id": waiting})
    assert f'href="/confirm?{link.replace("&", "&amp;")}">Cancel this instance' in page
    confirm = acting.request(f"/confirm?{link}")[2]
    assert 'name="reason"' in confirm and "Cancel the instance" in confirm
    assert acting.request("/actions/cancel", {"id": waiting, "reason": "x"})[0] == 403
    assert acting.request("/actions/cancel", {"id": waiting, "token": TOKEN})[0] == 400
    form = {"id": waiting, "token": TOKEN, "reason": "the guest called"}
    code, _, body = acting.request("/actions/cancel", form)
    assert code == 200 and "Cancel of" in body, body
    assert service.wait_until(
        lambda: list_instances(store, console_app.app, status_value="cancelled").total == 1, 30
    )
    after = acting.request(f"/instance?stream={waiting}")[2]
    assert '<p class="ended cancelled"><b>Cancelled</b>: the guest called</p>' in after
    assert "Cancel this instance" not in after
    code, _, body = acting.request("/actions/cancel", {**form, "id": stream("PR-1")})
    assert code == 409 and "is completed, not running" in body
