"""A ``Service`` tunes the process's garbage collector as it starts, once per process
(:func:`~decider.processors.service.gc_tuning.tune_once`), unless told to leave it alone."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from decider.processors import Service
from decider.processors.service import gc_tuning
from decider.stores.memory import MemoryEventStore
from tests.support.apps import tally_app


@pytest.fixture(autouse=True)
def untuned_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A process no service tuned yet, nothing frozen; put back as it was afterwards."""
    thresholds = gc.get_threshold()
    monkeypatch.setattr(gc_tuning, "_tuned", set())
    gc.unfreeze()
    gc.set_threshold(700, *thresholds[1:])
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def _run(gc_young_threshold: int = gc_tuning.YOUNG_THRESHOLD) -> None:
    service = Service(
        tally_app("gc-tuned"), MemoryEventStore(), gc_young_threshold=gc_young_threshold
    )
    with service:
        pass


def test_a_service_tunes_the_collector_as_it_starts() -> None:
    _, middle, old = gc.get_threshold()
    service = Service(tally_app("gc-tuned"), MemoryEventStore())
    assert gc.get_threshold()[0] == 700  # made, not started: nothing changed yet
    with service:
        assert gc.get_threshold() == (gc_tuning.YOUNG_THRESHOLD, middle, old)
        assert gc.get_freeze_count() > 0  # start-up's objects (the app, the store) frozen
    assert gc.get_threshold()[0] == gc_tuning.YOUNG_THRESHOLD  # the process's, after a stop


def test_a_threshold_of_0_leaves_the_collector_alone() -> None:
    before = gc.get_threshold()
    _run(gc_young_threshold=0)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_only_the_first_service_of_a_process_tunes_it() -> None:
    _run(gc_young_threshold=0)  # leaving it alone does not count
    _run(gc_young_threshold=5_000)
    assert gc.get_threshold()[0] == 5_000
    frozen = gc.get_freeze_count()
    _run()
    _run(gc_young_threshold=20_000)
    assert gc.get_threshold()[0] == 5_000
    assert gc.get_freeze_count() == frozen


def test_a_negative_threshold_is_refused() -> None:
    with pytest.raises(ValueError, match="gc_young_threshold must be at least 0"):
        Service(tally_app("gc-tuned"), MemoryEventStore(), gc_young_threshold=-1)
    with pytest.raises(ValueError, match="must not be negative"):
        gc_tuning.tune_once(-1)
