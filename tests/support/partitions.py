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


def pause_unnoticed(group: PartitionGroup) -> list[Lease]:
    """:func:`pause_heartbeat`, in a process that does not notice its pause: ``group`` goes on
    answering the partitions it held when paused, past their local deadlines, as a process
    paused between its check of a lease and its commit acts. Only the store's fence can then
    refuse its commits (its processors do not let the partitions go first, which they may do
    or not depending on when a loaded machine runs them)."""
    believed = group.partitions()
    lost = pause_heartbeat(group)
    group.partitions = lambda: dict(believed)  # type: ignore[method-assign]
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
