"""The quotes sample as a runnable App: ``decider run --app samples.quotes:app``.

A caller appends a ``RequestQuote`` (or an ``AcceptQuote``) to :data:`REQUESTS_STREAM` with a
message id of its choosing, and reads the reply from ``reply-<that message id>``, where the
command processor copies every ``Reply`` the input led to. Accepted quotes are published to
``topic-quotes.QuoteAccepted-...`` for the order system. There is no handler: the workflow
needs nothing carried out but its replies, its publication and its expiry timer.
"""

from __future__ import annotations

from decider import Metadata
from decider.processors import App, by_correlation
from samples.quotes.messages import AcceptQuote, QuoteExpired, RequestQuote
from samples.quotes.workflow import workflow

REQUESTS_STREAM = "quote-requests"
"""Where callers append their requests and acceptances."""


def _quote_id(message: RequestQuote | AcceptQuote, _: Metadata) -> str:
    return message.quote_id


def make_app(name: str = "quotes") -> App:
    """A fresh App for the quote workflow."""
    app = App(name)
    app.workflow(
        workflow,
        inputs={RequestQuote: _quote_id, AcceptQuote: _quote_id, QuoteExpired: by_correlation},
    )
    return app


app = make_app()
"""The quotes App, as ``decider run --app samples.quotes:app`` runs it."""
