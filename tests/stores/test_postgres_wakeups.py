"""PostgreSQL wakes another process's subscriptions only for the partitions and types written.

A commit's ``NOTIFY`` carries its gist (the events' types and partition keys): a listener wakes
only the subscriptions that may want one of them, so in a group a process is not woken, and does
not read, for the commits of partitions it does not hold. A gist too big for a payload is sent
empty and wakes every subscription. These tests count the subscriptions' reads of the log, with
the listener's probe set to an hour so that only notifications wake anyone.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from decider.stores import ANY, CaughtUp, Filter, NewEvent, Partitions, RecordedEvent
from decider.stores.contract import take, wait_until
from decider.stores.postgres import PostgresEventStore, _listen
from decider.stores.postgres._notify import PAYLOAD_LIMIT, payload
from decider.stores.subscription import CatchUpSubscription, Gist, written_to
from tests.support.postgres import PG_URI, fresh_store

HOUR = 3600.0
COUNT = 8
FIVE = Filter(partitions=Partitions(count=COUNT, held=frozenset({5}), unknown=False))


def _keyed(key: int, event_type: str = "Tested") -> NewEvent:
    return NewEvent(uuid.uuid4(), event_type, b"{}", partition_key=key)


@pytest.fixture
def stores(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[PostgresEventStore, PostgresEventStore, list[Filter]]]:
    """A reader store whose log reads are listed (by filter), and a writer store on the same
    schema (another announcer: another process, as far as the listener can tell)."""
    monkeypatch.setattr(_listen, "PROBE_INTERVAL", HOUR)
    with fresh_store() as reader:
        reads: list[Filter] = []
        real = reader._head_and_page

        def counted(
            after: int | None, limit: int, filter: Filter
        ) -> tuple[int | None, list[RecordedEvent]]:
            reads.append(filter)
            return real(after, limit, filter)

        monkeypatch.setattr(reader, "_head_and_page", counted)
        writer = PostgresEventStore(PG_URI, schema=reader.schema)
        try:
            yield reader, writer, reads
        finally:
            writer.close()


def _seen_by(everything: CatchUpSubscription, stream: str) -> Callable[[], bool]:
    """Whether the unfiltered subscription ``everything`` has delivered an event of ``stream``
    (so the listener has handled the notification of its commit)."""

    def seen() -> bool:
        while (item := everything.poll(0)) is not None:
            if isinstance(item, RecordedEvent) and item.stream == stream:
                return True
        return False

    return seen


def test_a_commit_of_partition_3_does_not_wake_a_listener_holding_only_partition_5(
    stores: tuple[PostgresEventStore, PostgresEventStore, list[Filter]],
) -> None:
    reader, writer, reads = stores
    with reader.subscribe(None, FIVE) as five, reader.subscribe(None) as everything:
        assert take(five, 1) == [CaughtUp(position=None)]
        assert isinstance(take(everything, 1)[0], CaughtUp)
        before = reads.count(FIVE)
        for number in range(3):
            writer.append(f"three-{number}", [_keyed(3 + COUNT * number)], ANY)
        # The unfiltered subscription was woken by the same notifications, in the same pass.
        wait_until(_seen_by(everything, "three-2"))
        assert five.poll(0) is None
        assert reads.count(FIVE) == before, (
            "commits of partition 3 made partition 5's subscription read"
        )
        wanted = _keyed(5 + COUNT)
        writer.append("five-1", [wanted], ANY)
        [event] = take(five, 1, timeout=10)
        assert isinstance(event, RecordedEvent) and event.id == wanted.id
        # (It may read more than once: while rows wait behind a transaction in flight, the
        # listener wakes it again.)


def test_a_commit_of_a_type_it_does_not_take_does_not_wake_it(
    stores: tuple[PostgresEventStore, PostgresEventStore, list[Filter]],
) -> None:
    reader, writer, reads = stores
    wanted_type = Filter(event_types=("Wanted",))
    with reader.subscribe(None, wanted_type) as sub, reader.subscribe(None) as everything:
        assert take(sub, 1) == [CaughtUp(position=None)]
        assert isinstance(take(everything, 1)[0], CaughtUp)
        before = reads.count(wanted_type)
        writer.append("other-1", [_keyed(1, "Unwanted")], ANY)
        wait_until(_seen_by(everything, "other-1"))
        assert sub.poll(0) is None
        assert reads.count(wanted_type) == before, "a commit of another type made it read"
        writer.append("mine-1", [_keyed(1, "Wanted")], ANY)
        [event] = take(sub, 1, timeout=10)
        assert isinstance(event, RecordedEvent) and event.stream == "mine-1"


def test_a_gist_too_big_for_a_payload_wakes_every_subscription(
    stores: tuple[PostgresEventStore, PostgresEventStore, list[Filter]],
) -> None:
    reader, writer, reads = stores
    # 2,000 keys, none of partition 5: about 22,000 bytes, past PostgreSQL's 8,000.
    events = [_keyed(10**9 + COUNT * n) for n in range(2000)]
    assert payload(Gist.of(written_to("many", events))) == ""
    with reader.subscribe(None, FIVE) as five, reader.subscribe(None) as everything:
        assert take(five, 1) == [CaughtUp(position=None)]
        assert isinstance(take(everything, 1)[0], CaughtUp)
        before = reads.count(FIVE)
        writer.append("many", events, ANY)
        wait_until(_seen_by(everything, "many"))
        wait_until(
            lambda: five.poll(0) is None and reads.count(FIVE) > before
        )  # woken: it looked, found none


def test_payloads_round_trip_and_stay_under_the_limit() -> None:
    gist = Gist(frozenset({"Placed", 'Odd "type", with commas'}), frozenset({0, 2**32 - 1}), True)
    text = payload(gist)
    assert Gist.of_text(text) == gist
    assert len(text.encode()) <= PAYLOAD_LIMIT
    assert payload(None) == "" and Gist.of_text("") is None
    assert Gist.of_text("not json") is None and Gist.of_text("[1, 2]") is None
    # What a store before gists sent (an empty payload) wakes every subscription.
    assert Gist.of_text("") is None


def test_a_notification_no_subscription_wants_costs_no_held_back_check(
    stores: tuple[PostgresEventStore, PostgresEventStore, list[Filter]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reader, writer, _ = stores
    followed: list[Gist | None] = []
    real = _listen.NotifyListener._follow_held_back

    def follow(self: _listen.NotifyListener, connection: Any, gist: Gist | None) -> None:
        followed.append(gist)
        real(self, connection, gist)

    monkeypatch.setattr(_listen.NotifyListener, "_follow_held_back", follow)
    with reader.subscribe(None, FIVE) as five:
        assert take(five, 1) == [CaughtUp(position=None)]
        for number in range(3):
            writer.append(f"three-{number}", [_keyed(3 + COUNT * number)], ANY)
        wanted = _keyed(5 + COUNT)
        writer.append("five-1", [wanted], ANY)
        # Delivered: the listener has taken every notification before this one's.
        [event] = take(five, 1, timeout=10)
        assert isinstance(event, RecordedEvent) and event.id == wanted.id
    assert followed, "the wanted commit's notification was followed"
    for gist in followed:
        assert gist is not None and 5 + COUNT in gist.keys, f"followed {gist} nobody wants"
