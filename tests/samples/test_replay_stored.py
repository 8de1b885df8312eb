"""Replay checks of stored instances: the quotes service's store, replayed through changed code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

import samples.quotes.app
from decider import Schedule
from decider.processors import App, FakeClock, Service
from decider.processors.cli import main
from decider.processors.operate.replay_check import assert_stored_replays, replay_stored
from decider.stores.protocol import EventStore
from decider.stores.sqlite import SqliteEventStore
from samples.quotes import workflow
from samples.quotes.app import REQUESTS_STREAM, make_app
from samples.quotes.messages import AcceptQuote, QuoteLine, RequestQuote
from samples.quotes.workflow import VALIDITY


def _request(quote_id: str, sku: str = "mug") -> RequestQuote:
    return RequestQuote(quote_id=quote_id, customer_id="c", lines=(QuoteLine(sku=sku, quantity=1),))


def _run(store: EventStore) -> None:
    """Three quotes: one accepted, one declined, one still held."""
    app = make_app()
    app.publish(store, _request("accepted"), REQUESTS_STREAM)
    app.publish(store, _request("declined", "kettle"), REQUESTS_STREAM)
    app.publish(store, _request("held"), REQUESTS_STREAM)
    with Service(app, store, clock=FakeClock()) as service:
        assert service.wait_idle(30)
        app.publish(store, AcceptQuote(quote_id="accepted"), REQUESTS_STREAM)
        assert service.wait_until(
            lambda: len(store.read_stream(workflow.stream("accepted"))) == 8, 30
        )
        assert service.wait_idle(30)
        assert service.errors == []


def _with_longer_validity() -> App:
    """The same App, with code that schedules the expiry two days out instead of one."""

    def decide(message: Any, state: Any) -> Any:
        return [
            Schedule(VALIDITY * 2, c.message) if isinstance(c, Schedule) else c
            for c in workflow.decide(message, state)
        ]

    routes = {r.cls: r.route for r in make_app().workflows["Quote"].inputs.values()}
    app = App("quotes")
    app.workflow(attrs.evolve(workflow, decide=decide), inputs=routes)
    return app


def test_stored_instances_replay_the_same_through_the_code_that_wrote_them(
    store: EventStore,
) -> None:
    _run(store)

    replays = assert_stored_replays(store, make_app())

    assert [r.stream for r in replays] == ["Quote-accepted", "Quote-declined", "Quote-held"]
    assert all(r.report.ok for r in replays)
    assert replay_stored(store, make_app(), limit=2)[-1].stream == "Quote-declined"


def test_instances_the_changed_code_would_record_differently_are_named(store: EventStore) -> None:
    _run(store)

    with pytest.raises(AssertionError) as raised:
        assert_stored_replays(store, _with_longer_validity())

    text = str(raised.value)
    assert "2 of 3 stored instances" in text  # the declined quote schedules nothing
    # Each names the version of the code that began it (recorded on Began).
    began = f"(began by version {workflow.version})"
    assert f"Quote-accepted {began}: differs at #3 (input RequestQuote(" in text
    assert f"Quote-held {began}: differs at #3" in text and "Quote-declined" not in text


def test_the_command_line_checks_a_store_and_exits_1_when_an_instance_differs(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteEventStore(tmp_path / "quotes.db")
    _run(store)
    store.close()
    args = [
        "replay-check",
        "--app",
        "samples.quotes:app",
        "--store",
        f"sqlite:///{tmp_path}/quotes.db",
    ]

    assert main(args) == 0
    assert capsys.readouterr().out.strip() == "3 instances replayed, 0 differ"

    monkeypatch.setattr(samples.quotes.app, "app", _with_longer_validity())
    assert main([*args, "--limit", "1"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"Quote-accepted (began by version {workflow.version}): differs at #3")
    assert out.rstrip().endswith("1 instances replayed, 1 differ")
    assert main([*args, "--workflow", "Nope"]) == 2
