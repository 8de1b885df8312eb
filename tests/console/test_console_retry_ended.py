"""The console's *Retry* of a parked command whose workflow instance has ended is refused
(409, saying why), as ``decider retry`` refuses it: the same operation."""

from __future__ import annotations

import contextlib
import html
from pathlib import Path

from decider import Lifecycle
from decider.processors import Service, list_parked, show
from decider.processors.console import Console
from decider.stores.sqlite import SqliteEventStore
from tests.console.test_console_http import TOKEN, Running
from tests.support.booking_app import BookingRequested, booking, booking_app


def test_the_console_refuses_to_retry_a_command_of_a_failed_booking(tmp_path: Path) -> None:
    with contextlib.closing(SqliteEventStore(tmp_path / "events.db")) as store:
        booking_app.publish(
            store, BookingRequested(booking_id="b2", price_cents=100), "requests", "m-2"
        )
        with Service(booking_app, store) as service:
            assert service.wait_until(
                lambda: show(store, booking_app, booking.stream("b2")).status is Lifecycle.FAILED,
                30,
            )
            assert service.wait_idle(30)
        [parked] = list_parked(store, booking_app)
        running = Running(Console(booking_app, store, actions=True, token=TOKEN))
        try:
            code, _, body = running.request(
                "/actions/retry", {"id": parked.command_id, "token": TOKEN}
            )
        finally:
            running.close()
        assert code == 409
        assert "which has ended (failed)" in html.unescape(body)
        assert list_parked(store, booking_app) == [parked]
