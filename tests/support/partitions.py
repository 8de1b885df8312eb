"""Helpers for in-process tests of partition groups: a member service, a paused heartbeat, the
leases each commit is fenced by."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

from decider.processors import Service
from decider.processors.group.membership import PartitionGroup
from decider.stores.leases import Lease


@contextlib.contextmanager
def member(service: Service) -> Iterator[Service]:
    """``service`` started, and stopped at the end (also when the test fails)."""
    service.start()
    try:
        yield service
    finally:
        if service.running:
            service.stop()


def pause_heartbeat(group: PartitionGroup) -> list[Lease]:
    """Stop ``group``'s heartbeat, as in a paused process (its leases then expire while its
    processors hold them in hand); the list the group's lost leases are added to."""
    lost: list[Lease] = []
    original_lost = group.lost

    def losing(lease: Lease) -> None:
        lost.append(lease)
        original_lost(lease)

    group.tick = lambda: None  # type: ignore[method-assign]
    group.lost = losing  # type: ignore[method-assign]
    return lost


def fences_of(store: object, method: str) -> list[int]:
    """Wrap ``store``'s commit ``method`` (``append_batch``, ``commit_states``) to record how
    many leases fence each call (``leases``); the list they are added to."""
    fenced_by: list[int] = []
    original: Callable[..., Any] = getattr(store, method)

    @functools.wraps(original)
    def counting(*args: Any, **kwargs: Any) -> Any:
        fenced_by.append(len(kwargs.get("leases", ())))
        return original(*args, **kwargs)

    setattr(store, method, counting)
    return fenced_by
