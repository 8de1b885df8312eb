"""Bad stored data is a CorruptEvent naming stream and revision; the rest stays readable."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from decider import Codec, Metadata, Sent
from decider.processors.app.decoding import decode_event, decode_message, decode_metadata
from decider.stores import NO_STREAM, CorruptEvent, EventStore, NewEvent
from decider.stores.memory import MemoryEventStore
from decider.stores.sqlite import SqliteEventStore
from samples.traffic_fine.messages import GenerateTrafficFineSystemNumber

CODEC = Codec()


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    s: EventStore = (
        MemoryEventStore() if request.param == "memory" else SqliteEventStore(tmp_path / "e.db")
    )
    yield s
    s.close()


def _good(index: int) -> NewEvent:
    event = Sent(GenerateTrafficFineSystemNumber(police_report_id=f"r{index}"))
    type_name, data = CODEC.encode_event(event)
    meta = CODEC.encode_metadata(Metadata(message_id=f"m{index}"))
    return NewEvent(id=uuid.uuid4(), type=type_name, data=data, metadata=meta)


def test_bad_json_and_unknown_type_name_their_stream_and_revision(store: EventStore) -> None:
    bad_json = NewEvent(uuid.uuid4(), "Sent:fines.GenerateTrafficFineSystemNumber", b"{nope", b"{}")
    unknown = NewEvent(uuid.uuid4(), "Sent:os.system", b"{}", b"{}")
    store.append("Fine-1", [_good(0), bad_json, unknown, _good(3)], NO_STREAM)
    records = store.read_stream("Fine-1")

    with pytest.raises(CorruptEvent) as bad:
        decode_event(CODEC, records[1])
    assert (bad.value.stream, bad.value.revision) == ("Fine-1", 1)
    assert "invalid JSON" in str(bad.value)

    with pytest.raises(CorruptEvent) as unknown_type:
        decode_event(CODEC, records[2])
    assert (unknown_type.value.stream, unknown_type.value.revision) == ("Fine-1", 2)
    assert "os.system" in str(unknown_type.value)
    assert "not registered" in str(unknown_type.value)

    # The events around the bad ones, in the stream and in the log, still decode.
    assert decode_event(CODEC, records[0]) == Sent(
        GenerateTrafficFineSystemNumber(police_report_id="r0")
    )
    assert decode_event(CODEC, records[3]) == Sent(
        GenerateTrafficFineSystemNumber(police_report_id="r3")
    )
    assert [r.revision for r in store.read_all()] == [0, 1, 2, 3]


def test_metadata_gets_the_recorded_time_and_bad_metadata_is_corrupt(store: EventStore) -> None:
    broken = NewEvent(uuid.uuid4(), "Completed", b"{}", b"[1, 2]")
    store.append("Fine-2", [_good(0), broken], NO_STREAM)
    good, bad = store.read_stream("Fine-2")
    metadata = decode_metadata(CODEC, good)
    assert metadata.message_id == "m0"
    assert metadata.recorded_at == good.recorded_at
    with pytest.raises(CorruptEvent, match="'Fine-2' revision 1"):
        decode_metadata(CODEC, bad)


def test_a_workflow_event_is_not_a_message(store: EventStore) -> None:
    store.append("Fine-3", [_good(0)], NO_STREAM)
    (record,) = store.read_stream("Fine-3")
    with pytest.raises(CorruptEvent, match="is a workflow event, not a message"):
        decode_message(CODEC, record)
