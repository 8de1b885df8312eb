"""Fixtures of the sample apps' service tests: the same test on every store.

``store`` is parametrised over every kind :func:`tests.support.stores.open_store` opens.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from decider.stores.protocol import EventStore
from tests.support.stores import STORES, open_store


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    """A fresh, empty store of each kind."""
    opened, cleanups = open_store(request.param, tmp_path)
    try:
        yield opened
    finally:
        for cleanup in cleanups:
            cleanup()
