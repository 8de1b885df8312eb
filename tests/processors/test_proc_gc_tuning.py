"""The collector settings a service applies (:mod:`~decider.processors.service.gc_tuning`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from decider.processors.service import gc_tuning


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    """Put the collector back as it was (thresholds, nothing frozen)."""
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_tune_freezes_start_up_and_raises_the_young_threshold() -> None:
    gc.unfreeze()
    _, middle, old = gc.get_threshold()
    gc_tuning.tune()
    assert gc.get_threshold() == (gc_tuning.YOUNG_THRESHOLD, middle, old)
    assert gc.get_freeze_count() > 0


def test_tune_takes_a_threshold_of_its_own() -> None:
    gc_tuning.tune(5_000)
    assert gc.get_threshold()[0] == 5_000


def test_zero_leaves_the_collector_as_it_is() -> None:
    gc.unfreeze()
    before = gc.get_threshold()
    gc_tuning.tune(0)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_negative_threshold_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        gc_tuning.tune(-1)
