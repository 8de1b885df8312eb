"""``decider retry`` of a parked command whose workflow instance has ended: refused, saying
so (a declined card of a failed booking must not be charged later), unless ``--force``."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from decider import Lifecycle
from decider.processors import InstanceEnded, Service, list_parked, retry_parked, show
from decider.processors.cli import main
from decider.stores.sqlite import SqliteEventStore
from tests.support.booking_app import BookingRequested, booking, booking_app

SPEC = "tests.support.booking_app:booking_app"


def test_retry_of_a_command_whose_instance_failed_is_refused_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "events.db"
    with contextlib.closing(SqliteEventStore(db)) as store:
        booking_app.publish(
            store, BookingRequested(booking_id="b1", price_cents=100), "requests", "m-1"
        )
        with Service(booking_app, store) as service:
            assert service.wait_until(lambda: len(list_parked(store, booking_app)) == 1, 30)
            assert service.wait_until(
                lambda: show(store, booking_app, booking.stream("b1")).status is Lifecycle.FAILED,
                30,
            )
            assert service.wait_idle(30)
        [parked] = list_parked(store, booking_app)
        with pytest.raises(InstanceEnded, match=r"which has ended \(failed\)"):
            retry_parked(store, booking_app, parked.command_id)

    at = ["--app", SPEC, "--store", f"sqlite:///{db}"]
    assert main(["retry", parked.command_id, *at]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"decider: error: command {parked.command_id!r} (hotel.ChargeCard) belongs to instance "
        "'Booking-b1', which has ended (failed): carried out now, its result would be recorded "
        "as Ignored; --force retries it anyway\n"
    )
    with contextlib.closing(SqliteEventStore(db)) as store:
        assert [c.command_id for c in list_parked(store, booking_app)] == [parked.command_id]

    assert main(["retry", parked.command_id, "--force", *at]) == 0
    assert capsys.readouterr().out.startswith(f"retry of {parked.command_id} requested")
    with contextlib.closing(SqliteEventStore(db)) as store:
        assert list_parked(store, booking_app) == []
