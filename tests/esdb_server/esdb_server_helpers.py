"""Helpers of the test-server tests (a module of its own: ``conftest`` names are ambiguous)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from esdbclient import NewEvent


def events(count: int, event_type: str = "Tested") -> list[NewEvent]:
    """``count`` new events with distinct bodies."""
    return [NewEvent(type=event_type, data=f'{{"n":{i}}}'.encode()) for i in range(count)]


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Return once ``predicate()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        pause.wait(0.005)
