"""Request and reply through a running service, on every store: ``app.request`` and
``await app.request_async`` with the quotes sample, their errors, and update-with-start."""

from __future__ import annotations

import asyncio
import re

import pytest

from decider import Lifecycle
from decider.processors import FakeClock, RequestNotAnswered, RequestTimeout, Service, show
from decider.stores.protocol import EventStore
from samples.quotes.app import REQUESTS_STREAM, make_app
from samples.quotes.messages import (
    AcceptQuote,
    Quote,
    QuoteAccepted,
    QuoteDeclined,
    QuoteLine,
    RequestQuote,
)
from tests.support.stores import types

WAIT = 30.0


def ask(quote_id: str, sku: str = "mug") -> RequestQuote:
    return RequestQuote(
        quote_id=quote_id, customer_id="cust-7", lines=(QuoteLine(sku=sku, quantity=2),)
    )


def test_request_starts_an_instance_then_delivers_to_it(store: EventStore, app_name: str) -> None:
    app = make_app(app_name)
    with Service(app, store, clock=FakeClock()):
        quote = app.request(store, ask("q1"), timeout=WAIT, stream=REQUESTS_STREAM)
        assert quote == Quote(quote_id="q1", total_cents=1700, discount_cents=0)
        # Asked again while it holds (update-with-start: the running instance answers).
        assert app.request(store, ask("q1"), timeout=WAIT) == quote
        accepted = app.request(store, AcceptQuote(quote_id="q1"), timeout=WAIT)
        assert accepted == QuoteAccepted(quote_id="q1", customer_id="cust-7", total_cents=1700)
        declined = app.request(store, ask("q2", sku="boat"), timeout=WAIT)
        assert declined == QuoteDeclined(quote_id="q2", reason="unknown SKU: boat")
        assert show(store, app, "Quote-q1").status is Lifecycle.COMPLETED


def test_request_async_does_not_block_the_loop(store: EventStore, app_name: str) -> None:
    app = make_app(app_name)

    async def main() -> list[object]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        replies = await asyncio.gather(
            *(app.request_async(store, ask(f"a{i}"), timeout=WAIT) for i in range(3))
        )
        ticker.cancel()
        assert ticks > 0
        return list(replies)

    with Service(app, store, clock=FakeClock()):
        replies = asyncio.run(main())
    assert [r.quote_id for r in replies if isinstance(r, Quote)] == ["a0", "a1", "a2"]


def test_a_request_to_an_ended_instance_is_not_answered_at_once(
    store: EventStore, app_name: str
) -> None:
    app = make_app(app_name)
    with Service(app, store, clock=FakeClock()):
        app.request(store, ask("q3"), timeout=WAIT)
        app.request(store, AcceptQuote(quote_id="q3"), timeout=WAIT)
        with pytest.raises(RequestNotAnswered) as caught:
            app.request(store, AcceptQuote(quote_id="q3"), timeout=WAIT)
    error = caught.value
    assert (error.instance, error.message_type) == ("Quote-q3", "quotes.AcceptQuote")
    assert error.reason == "the workflow instance has completed"
    assert types(store, "Quote-q3")[-1] == "Ignored:quotes.AcceptQuote"


def test_a_request_that_decide_rejects_is_not_answered_at_once(
    store: EventStore, app_name: str
) -> None:
    app = make_app(app_name)
    with Service(app, store, clock=FakeClock()), pytest.raises(RequestNotAnswered) as caught:
        app.request(store, AcceptQuote(quote_id="nothing"), timeout=WAIT)
    assert caught.value.instance == "Quote-nothing"
    assert caught.value.reason.startswith("the input was skipped: ")
    assert "AcceptQuote is not expected in state Initial()" in caught.value.reason


def test_a_request_without_a_service_times_out_naming_the_instance(
    store: EventStore, app_name: str
) -> None:
    app = make_app(app_name)
    with pytest.raises(RequestTimeout) as caught:
        app.request(store, ask("q4"), timeout=0.2, message_id="msg-q4")
    error = caught.value
    assert isinstance(error, TimeoutError)
    assert (error.message_id, error.instances) == ("msg-q4", ("Quote-q4",))
    assert re.match(
        r"no reply to quotes\.RequestQuote \(message id msg-q4\) to instance Quote-q4 within "
        r"0\.\ds; is a service of the app running\?",
        str(error),
    )
    # The request stays published: a service started later answers it, and asking again
    # with the same message id is the same input, whose reply is found.
    with Service(app, store, clock=FakeClock()):
        quote = app.request(store, ask("q4"), timeout=WAIT, message_id="msg-q4")
    assert isinstance(quote, Quote)
    assert types(store, "Quote-q4").count("Replied:quotes.Quote") == 1
    with pytest.raises(ValueError, match="timeout must be positive"):
        app.request(store, ask("q5"), timeout=0)
    with pytest.raises(ValueError, match=r"no workflow of app '\w+' takes 'quotes.Quote'"):
        app.request(store, Quote(quote_id="q6", total_cents=1, discount_cents=0))
    assert all(e.type != "quotes.Quote" for e in store.read_stream(f"inputs-{app.name}"))
