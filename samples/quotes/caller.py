"""A caller of the quotes service: it asks for a quote, waits for the reply, accepts it.

A service of ``samples.quotes:app`` must run on the same store, in this process or another
(``decider run samples.quotes:app``).
"""

from __future__ import annotations

from decider.stores.protocol import EventStore
from samples.quotes.app import REQUESTS_STREAM, app
from samples.quotes.messages import (
    AcceptQuote,
    Quote,
    QuoteAccepted,
    QuoteDeclined,
    QuoteLine,
    RequestQuote,
)


def ask_for_a_quote(store: EventStore, quote_id: str) -> Quote | QuoteDeclined:
    """Ask what two mugs cost and wait for the workflow's reply (RequestTimeout after 10 s)."""
    lines = (QuoteLine(sku="mug", quantity=2),)
    request = RequestQuote(quote_id=quote_id, customer_id="cust-7", lines=lines)
    reply: Quote | QuoteDeclined = app.request(store, request, timeout=10.0, stream=REQUESTS_STREAM)
    return reply


async def accept(store: EventStore, quote_id: str) -> QuoteAccepted:
    """Accept the quote, waiting for the reply without blocking the event loop."""
    acceptance = AcceptQuote(quote_id=quote_id)
    accepted: QuoteAccepted = await app.request_async(
        store, acceptance, timeout=10.0, stream=REQUESTS_STREAM
    )
    return accepted
