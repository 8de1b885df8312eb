"""Request and reply, and cancel, with the service in another process: ``decider run
samples.quotes:app`` in a subprocess on SQLite and PostgreSQL, the caller in this process."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from decider import Lifecycle
from decider.processors import RequestNotAnswered, show
from decider.stores.protocol import EventStore
from decider.stores.uri import open_store
from samples.quotes.app import REQUESTS_STREAM, app
from samples.quotes.caller import accept, ask_for_a_quote
from samples.quotes.messages import AcceptQuote, Quote, QuoteAccepted, QuoteLine, RequestQuote
from tests.support.postgres import PG_URI, fresh_schema
from tests.support.service import ROOT, ServiceProcess, decider_command, service_env
from tests.support.waiting import wait_until

WAIT = 60.0


@pytest.fixture(params=["sqlite", "postgres"])
def uri(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store that does not exist yet: an SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'events.db'}"
    else:
        with fresh_schema() as schema:
            yield f"{PG_URI}?schema={schema}"


@pytest.fixture
def running(uri: str, tmp_path: Path) -> Iterator[ServiceProcess]:
    """``decider run samples.quotes:app`` on ``uri``, ended by pid after the test."""
    service = ServiceProcess("samples.quotes:app", uri, tmp_path / "service.log", service_env())
    try:
        service.start()
        wait_until(service.started, WAIT, "the service to start")
        yield service
    finally:
        service.cleanup()


@pytest.fixture
def store(uri: str, running: ServiceProcess) -> Iterator[EventStore]:
    opened = open_store(uri)
    try:
        yield opened
    finally:
        opened.close()


def decider_json(uri: str, *arguments: str) -> Any:
    """``decider ARGUMENTS --json`` on the quotes app and ``uri``, which must succeed."""
    at = ["--app", "samples.quotes:app", "--store", uri, "--json"]
    result = subprocess.run(
        [*decider_command(), *arguments, *at],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=service_env(),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def ask(quote_id: str) -> RequestQuote:
    return RequestQuote(
        quote_id=quote_id, customer_id="cust-9", lines=(QuoteLine(sku="teapot", quantity=3),)
    )


def test_a_caller_waits_for_the_reply_of_a_service_in_another_process(
    store: EventStore, running: ServiceProcess
) -> None:
    # The README's caller, as a user writes it.
    assert ask_for_a_quote(store, "p0") == Quote(quote_id="p0", total_cents=1700, discount_cents=0)
    assert asyncio.run(accept(store, "p0")).total_cents == 1700
    quote = app.request(store, ask("p1"), timeout=WAIT, stream=REQUESTS_STREAM)
    assert quote == Quote(quote_id="p1", total_cents=10530, discount_cents=1170)
    accepted = asyncio.run(app.request_async(store, AcceptQuote(quote_id="p1"), timeout=WAIT))
    assert accepted == QuoteAccepted(quote_id="p1", customer_id="cust-9", total_cents=10530)
    with pytest.raises(RequestNotAnswered, match="has completed"):
        app.request(store, AcceptQuote(quote_id="p1"), timeout=WAIT)
    running.check_alive()
    assert running.terminate(signal.SIGTERM) == 0


def test_decider_cancel_cancels_a_running_instance_of_the_service(
    uri: str, store: EventStore, running: ServiceProcess
) -> None:
    assert isinstance(app.request(store, ask("p2"), timeout=WAIT), Quote)
    cancel = decider_json(uri, "cancel", "Quote-p2", "--reason", "changed my mind")
    assert cancel["already_requested"] is False

    def cancelled() -> bool:
        running.check_alive()
        return show(store, app, "Quote-p2").status is Lifecycle.CANCELLED

    wait_until(cancelled, WAIT, "the service to cancel Quote-p2")
    # The quote's expiry timer is pending; the instance has ended, so it will never fire.
    with pytest.raises(RequestNotAnswered, match="was cancelled"):
        app.request(store, AcceptQuote(quote_id="p2"), timeout=WAIT)
    # The version of the code that began the instance, in Began's metadata.
    shown = decider_json(uri, "show", "Quote-p2")
    assert shown["events"][0]["type"] == "Began"
    assert shown["events"][0]["metadata"]["workflow_version"] == "quotes-1"
    assert running.terminate(signal.SIGTERM) == 0
