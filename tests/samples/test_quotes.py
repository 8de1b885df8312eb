"""Given-when-then tests of the quote workflow, and a caller waiting for its reply."""

from __future__ import annotations

from hypothesis import strategies as st

from decider import (
    Began,
    Codec,
    Complete,
    InitiatedBy,
    Lifecycle,
    Publish,
    Replied,
    Reply,
    Schedule,
    Scheduled,
)
from decider.processors import FakeClock, Service, show
from decider.processors.cli.loading import load_app
from decider.stores.protocol import EventStore
from decider.testing import (
    WorkflowSpec,
    assert_decide_deterministic,
    assert_fold_total,
    assert_replays,
    strategy_for,
)
from samples.quotes import workflow
from samples.quotes.app import REQUESTS_STREAM, make_app
from samples.quotes.messages import (
    AcceptQuote,
    Quote,
    QuoteAccepted,
    QuoteDeclined,
    QuoteExpired,
    QuoteLine,
    RequestQuote,
)
from samples.quotes.workflow import VALIDITY, Final, Quoted, UnexpectedInput

spec = WorkflowSpec(workflow)

QUOTE_ID = "q-1"
REQUEST = RequestQuote(
    quote_id=QUOTE_ID,
    customer_id="cust-7",
    lines=(QuoteLine(sku="mug", quantity=2), QuoteLine(sku="tea", quantity=1)),
)
BIG = RequestQuote(
    quote_id=QUOTE_ID, customer_id="cust-7", lines=(QuoteLine(sku="teapot", quantity=3),)
)
QUOTE = Quote(quote_id=QUOTE_ID, total_cents=2900, discount_cents=0)
ACCEPT = AcceptQuote(quote_id=QUOTE_ID)
EXPIRED = QuoteExpired(quote_id=QUOTE_ID)
ACCEPTED = QuoteAccepted(quote_id=QUOTE_ID, customer_id="cust-7", total_cents=2900)


def test_a_request_is_answered_with_a_quote_that_holds_for_a_day() -> None:
    spec.when(REQUEST).then_commands(Reply(QUOTE), Schedule(VALIDITY, EXPIRED)).then_events(
        Began(), InitiatedBy(REQUEST), Replied(QUOTE), Scheduled(VALIDITY, EXPIRED)
    ).then_state(Quoted(quote=QUOTE, customer_id="cust-7"))


def test_a_large_request_gets_the_volume_discount() -> None:
    spec.when(BIG).then_commands(
        Reply(Quote(quote_id=QUOTE_ID, total_cents=10_530, discount_cents=1170)),
        Schedule(VALIDITY, EXPIRED),
    )


def test_a_request_for_an_unknown_sku_is_declined() -> None:
    odd = RequestQuote(
        quote_id=QUOTE_ID, customer_id="c", lines=(QuoteLine(sku="kettle", quantity=1),)
    )

    spec.when(odd).then_commands(
        Reply(QuoteDeclined(quote_id=QUOTE_ID, reason="unknown SKU: kettle")), Complete()
    ).then_completed()


def test_a_request_without_quantities_is_declined() -> None:
    empty = RequestQuote(quote_id=QUOTE_ID, customer_id="c", lines=())

    spec.when(empty).then_commands(
        Reply(QuoteDeclined(quote_id=QUOTE_ID, reason="every line needs a quantity")), Complete()
    )


def test_a_request_repeated_while_the_quote_holds_gets_the_same_quote() -> None:
    spec.given(REQUEST).when(BIG).then_commands(Reply(QUOTE))


def test_accepting_in_time_replies_and_publishes_the_acceptance() -> None:
    spec.given(REQUEST).when(ACCEPT).then_commands(
        Reply(ACCEPTED), Publish(ACCEPTED), Complete()
    ).then_completed().then_state(Final())


def test_an_expired_quote_can_no_longer_be_accepted() -> None:
    spec.given(REQUEST).when(EXPIRED).then_commands(Complete())
    spec.given(REQUEST, EXPIRED).when(ACCEPT).then_ignored()


def test_accepting_a_quote_never_requested_is_unexpected() -> None:
    spec.when(ACCEPT).then_raises(
        UnexpectedInput, match="AcceptQuote is not expected in state Initial"
    )


def test_histories_recorded_by_this_version_replay_the_same() -> None:
    assert_replays(
        workflow,
        spec.given(REQUEST).when(ACCEPT).history,
        spec.given(REQUEST).when(EXPIRED).history,
        spec.given(REQUEST, EXPIRED).when(ACCEPT).history,
    )


IDS = st.sampled_from(["q-1", "q-2"])
LINES = st.lists(
    st.builds(
        QuoteLine, sku=st.sampled_from(["mug", "tea", "kettle"]), quantity=st.integers(0, 20)
    ),
    max_size=3,
).map(tuple)
INPUTS = st.one_of(
    strategy_for(RequestQuote, quote_id=IDS, lines=LINES),
    strategy_for(AcceptQuote, quote_id=IDS),
    strategy_for(QuoteExpired, quote_id=IDS),
)


def test_decide_is_deterministic() -> None:
    assert_decide_deterministic(workflow, INPUTS)


def test_fold_is_total_over_the_histories_it_produces() -> None:
    assert_fold_total(workflow, INPUTS, codec=Codec())


def _reply(store: EventStore, message_id: str) -> object | None:
    """The reply to the input ``message_id``, once the service has copied it (else None)."""
    app = make_app()
    records = store.read_stream(f"reply-{message_id}")
    return app.codec.decode_message(records[0].type, records[0].data) if records else None


def test_a_caller_gets_its_quote_then_its_acceptance_from_the_service(store: EventStore) -> None:
    app = load_app("samples.quotes:app")
    with Service(app, store, clock=FakeClock()) as service:
        app.publish(store, REQUEST, REQUESTS_STREAM, message_id="req-1")
        assert service.wait_until(lambda: _reply(store, "req-1") is not None, 30)
        assert _reply(store, "req-1") == QUOTE

        app.publish(store, ACCEPT, REQUESTS_STREAM, message_id="acc-1")
        assert service.wait_until(lambda: _reply(store, "acc-1") is not None, 30)
        assert service.wait_idle(30)
        assert service.errors == []
    assert _reply(store, "acc-1") == ACCEPTED
    view = show(store, app, workflow.stream(QUOTE_ID))
    assert view.status is Lifecycle.COMPLETED
