"""The messages of the quote workflow, as frozen dataclasses (attrs classes work the same).

Amounts are integer cents: a float cannot hold most decimal amounts exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from decider import message


@dataclass(frozen=True, kw_only=True)
class QuoteLine:
    """A quantity of one stock-keeping unit to price."""

    sku: str
    quantity: int


@message("quotes.RequestQuote")
@dataclass(frozen=True, kw_only=True)
class RequestQuote:
    """A customer asks what some goods would cost: it begins the workflow, and the caller
    waits for the reply (a :class:`Quote` or a :class:`QuoteDeclined`)."""

    quote_id: str
    customer_id: str
    lines: tuple[QuoteLine, ...]


@message("quotes.Quote")
@dataclass(frozen=True, kw_only=True)
class Quote:
    """The reply to a request: the price, held until the quote expires."""

    quote_id: str
    total_cents: int
    discount_cents: int


@message("quotes.QuoteDeclined")
@dataclass(frozen=True, kw_only=True)
class QuoteDeclined:
    """The reply to a request that cannot be priced."""

    quote_id: str
    reason: str


@message("quotes.AcceptQuote")
@dataclass(frozen=True, kw_only=True)
class AcceptQuote:
    """The customer takes the quoted price; the caller waits for the reply."""

    quote_id: str


@message("quotes.QuoteAccepted")
@dataclass(frozen=True, kw_only=True)
class QuoteAccepted:
    """The reply to an acceptance, also published for the order system."""

    quote_id: str
    customer_id: str
    total_cents: int


@message("quotes.QuoteExpired")
@dataclass(frozen=True, kw_only=True)
class QuoteExpired:
    """The quote's validity ran out (a scheduled message)."""

    quote_id: str


Input: TypeAlias = RequestQuote | AcceptQuote | QuoteExpired
Output: TypeAlias = Quote | QuoteDeclined | QuoteAccepted | QuoteExpired
