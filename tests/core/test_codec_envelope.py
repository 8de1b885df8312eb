"""A message travels with its metadata beside it: the envelope round trip."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from decider import Codec, DecodeError, Envelope, Metadata
from samples.traffic_fine.messages import GenerateTrafficFineSystemNumber

CODEC = Codec()


def test_an_envelope_becomes_type_data_and_metadata_and_back() -> None:
    envelope = Envelope(
        GenerateTrafficFineSystemNumber(police_report_id="PR-1"),
        Metadata(
            message_id="msg_1",
            correlation_id="PR-1",
            causation_id="msg_0",
            recorded_at=datetime(2026, 11, 21, 12, 0, tzinfo=UTC),
        ),
    )
    type_name, data, metadata = CODEC.encode_envelope(envelope)
    assert type_name == "fines.GenerateTrafficFineSystemNumber"
    assert data == b'{"police_report_id":"PR-1"}'
    assert b"correlation_id" not in data, "metadata stays out of the message's JSON"
    assert CODEC.decode_envelope(type_name, data, metadata) == envelope


def test_bad_metadata_in_an_envelope_is_a_decode_error() -> None:
    type_name, data = CODEC.encode_message(GenerateTrafficFineSystemNumber(police_report_id="x"))
    with pytest.raises(DecodeError, match="metadata"):
        CODEC.decode_envelope(type_name, data, b'{"correlation_id": "x"}')
