"""Waiting on a condition with a timeout: what a test does instead of sleeping."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def wait_until(
    predicate: Callable[[], object], timeout: float = 5.0, what: str = "the condition"
) -> None:
    """Poll ``predicate`` until it holds (what it waits on notifies nobody: another thread or
    process); fail the test naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        pause.wait(0.01)
