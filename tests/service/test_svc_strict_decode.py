"""JSON that does not fit its message is refused, naming each field, wherever it enters: the
``decider publish`` command refuses it (exit 2, nothing stored), and a stored input that does not
decode is skipped with the field named (the stored event left as it was)."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

from decider import Metadata
from decider.processors import Service
from decider.processors.operate.skipped import list_skipped
from decider.stores import ANY, NewEvent
from decider.stores.memory import MemoryEventStore
from decider.stores.uri import open_store
from tests.support.apps import Added, tally_app
from tests.support.service import ROOT, decider_command, service_env

ORDERS = "samples.order_fulfilment.app:app"


def _publish(uri: str, body: str) -> subprocess.CompletedProcess[str]:
    """``decider publish orders.OrderPlaced BODY`` as a user runs it."""
    command = [*decider_command(), "publish", "orders.OrderPlaced", body, "--app", ORDERS]
    return subprocess.run(
        [*command, "--store", uri],
        capture_output=True, text=True, cwd=ROOT, env=service_env(), timeout=60, check=False,
    )  # fmt: skip


def test_publish_refuses_json_that_does_not_fit_naming_each_field(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'events.db'}"
    body = {
        "order_id": "o-1",
        "items": [{"sku": "mug", "quantity": 2.7}],
        "amount_cents": "100",
        "confirm_withn": 5,
    }

    result = _publish(uri, json.dumps(body))

    assert result.returncode == 2, result.stdout
    error = result.stderr.strip().splitlines()[-1]
    assert error == (
        "decider: error: cannot decode the message: cannot decode 'orders.OrderPlaced': "
        "items[0].quantity: expected an integer, got 2.7; "
        'amount_cents: expected an integer, got "100"; unknown field: confirm_withn'
    )
    missing = _publish(uri, '{"order_id": "o-2", "items": []}')
    assert missing.returncode == 2
    assert missing.stderr.strip().endswith("missing field: amount_cents")
    store = open_store(uri)
    try:
        assert list(store.read_all()) == []
    finally:
        store.close()


def test_a_stored_input_that_does_not_fit_is_skipped_naming_the_field() -> None:
    app = tally_app("strict")
    store = MemoryEventStore()
    metadata = app.codec.encode_metadata(Metadata(message_id="m-1"))
    stored = [
        NewEvent(uuid.uuid4(), "ptest.Added", b'{"tally_id": "t1", "amount": 2.7}', metadata),
        NewEvent(uuid.uuid4(), "ptest.Added", b'{"tally_id": "t2", "amount": "3"}', metadata),
        NewEvent(uuid.uuid4(), "ptest.Added", b'{"tally_id": "t3", "amont": 3}', metadata),
    ]
    store.append("in", stored, ANY)
    app.publish(store, Added(tally_id="t4", amount=1), "in")

    with Service(app, store) as service:
        assert service.wait_until(lambda: len(list_skipped(store, app)) == 3, 20)
        assert service.wait_idle(20)

    reasons = sorted(skipped.reason for skipped in list_skipped(store, app))
    assert any("amount: expected an integer, got 2.7" in reason for reason in reasons), reasons
    assert any('amount: expected an integer, got "3"' in reason for reason in reasons), reasons
    assert any("unknown field: amont" in reason for reason in reasons), reasons
    assert any("missing field: amount" in reason for reason in reasons), reasons
    # nothing stored changed: the inputs are as they were, and only t4 began an instance
    assert [e.data for e in store.read_stream("in")][:3] == [e.data for e in stored]
    began = {e.stream for e in store.read_all() if e.type == "Began"}
    assert began == {"Tally-t4"}
