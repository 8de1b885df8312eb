"""Helpers of the test-server tests."""

from __future__ import annotations

from esdbclient import NewEvent, RecordedEvent


def events(count: int, event_type: str = "Tested") -> list[NewEvent]:
    """``count`` new events with distinct bodies."""
    return [NewEvent(type=event_type, data=f'{{"n":{i}}}'.encode()) for i in range(count)]


def commit_position(event: RecordedEvent) -> int:
    """The event's commit position (every event read from the log has one)."""
    assert event.commit_position is not None, event
    return event.commit_position
