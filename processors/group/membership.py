"""A process's membership in its app's group: which partitions it holds, through leases.

Every service process of an app started with a :class:`PartitionGroup` (``decider run
--partitions auto``) takes part in one group, held together by the store's leases
(:class:`~decider.stores.leases.LeaseStore`), with no coordinator:

- each member keeps a member lease (``<app>/member/<owner>``) alive: the live members are the
  owners of unexpired member leases;
- each member aims to hold ``ceil(partitions / live members)`` partition leases: below that it
  claims free or expired partitions, above it releases its surplus (highest numbers first);
- a partition's lease covers all of its work: its workflow inputs, its commands and its
  timers (each processor keeps its own checkpoint per partition);
- every lease is renewed every ``ttl / 3`` seconds and released on a graceful stop; a member that
  dies stops renewing, and after ``ttl`` seconds the others take its partitions over.

Guarantee (fencing): every commit of a partition's work passes its lease, which the store checks
in the commit transaction (:class:`~decider.stores.leases.LeaseLost` otherwise, nothing written),
so a member that lost a lease (paused past its expiry, cut off from the database) commits
nothing more for that partition. A member also stops using a lease at its own deadline (taken
before it asked for the lease), and drops a lease the moment a commit or renewal reports it lost.

WARNING: the guarantee covers what the processors write to the store. A command handler's side
effects outside the store may still run twice around a takeover (as after any crash).
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable

from decider.processors.app.definition import AppDefinition
from decider.processors.group import partitions
from decider.stores import Lease, LeaseLost, LeaseStore
from decider.stores.errors import StoreError
from decider.stores.protocol import EventStore

DEFAULT_TTL = 10.0
"""Seconds a lease lasts without renewal (a dead member's work resumes about this much later)."""


def default_owner() -> str:
    """A new member name: ``host:pid:random`` (unique even for a restarted pid)."""
    return "%s:%d:%s" % (socket.gethostname(), os.getpid(), secrets.token_hex(4))  # noqa: UP031


class PartitionGroup:
    """One process's membership in its app's group: the leases it holds, kept up by a thread.

    :meth:`partitions` gives the processors the leases to commit each partition's work under;
    :meth:`lost` drops a lease a commit found lost. Listeners added with
    :meth:`on_change` are called (on the group's thread) whenever the held set changes.
    """

    def __init__(
        self,
        store: LeaseStore,
        app: AppDefinition,
        *,
        owner: str | None = None,
        ttl: float = DEFAULT_TTL,
        logger: logging.Logger | None = None,
    ) -> None:
        if not isinstance(store, LeaseStore):
            raise TypeError(f"{type(store).__name__} keeps no leases: a group needs a LeaseStore")
        if not ttl > 0:
            raise ValueError(f"ttl must be positive, got {ttl!r}")
        self.store = store
        self.app = app
        self.count = partitions.check_count(app.partitions)
        self.owner = owner or default_owner()
        self.ttl = ttl
        self.logger = logger or logging.getLogger(__name__)
        self.version = 0
        """Incremented whenever the held set changes."""
        self._held: dict[str, tuple[Lease, float]] = {}  # name -> (lease, local deadline)
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._names = [partitions.lease_name(app.name, i) for i in range(self.count)]
        self._index = {name: i for i, name in enumerate(self._names)}
        self._member = partitions.member_lease_name(app.name, self.owner)
        self._member_lease: Lease | None = None

    # -- what the processors ask ----------------------------------------------------------

    def partitions(self) -> dict[int, Lease]:
        """The partitions held now (within their local deadline), by number."""
        now = time.monotonic()
        with self._lock:
            return {
                self._index[name]: lease
                for name, (lease, deadline) in self._held.items()
                if name in self._index and deadline > now
            }

    def lost(self, lease: Lease) -> None:
        """Drop ``lease`` (a commit found it lost); a later tick may claim it again."""
        with self._lock:
            entry = self._held.get(lease.partition)
            if entry is None or entry[0].epoch != lease.epoch:
                return
            del self._held[lease.partition]
        self.logger.warning("lease on %s (epoch %d) lost", lease.partition, lease.epoch)
        self._changed()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` whenever the held set changes."""
        self._listeners.append(listener)

    # -- life cycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Check the partition count, join (one tick at once), then keep ticking on a thread.

        Raises :class:`~decider.processors.group.partitions.PartitionCountMismatch` if the store
        records another count.
        """
        assert isinstance(self.store, EventStore)
        partitions.ensure_count(self.store, self.app)
        self._stop.clear()
        self.tick()
        self._thread = threading.Thread(target=self._loop, name="decider:group", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop ticking and release every lease held (the others take them over at once)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            held = [lease for lease, _ in self._held.values()]
            self._held.clear()
        if self._member_lease is not None:
            held.append(self._member_lease)  # last: the others see one member less
            self._member_lease = None
        for lease in held:
            try:
                self.store.release_lease(lease)
            except StoreError as exc:
                self.logger.warning("could not release %s: %s", lease.partition, exc)
        self._changed()

    def _loop(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                self.tick()
            except StoreError as exc:
                self.logger.warning("group %r: %s; retrying", self.app.name, exc)
            except Exception:
                self.logger.exception("group %r: tick failed; retrying", self.app.name)

    # -- one round --------------------------------------------------------------------------

    def tick(self) -> None:
        """Renew what is held, then claim or release toward this member's fair share."""
        changed = self._renew()
        leases = {lease.partition: lease for lease in self.store.leases()}
        members = self._live_members(leases)
        target = math.ceil(self.count / max(1, members))
        held = sorted(self._index[n] for n in self._held_names() if n in self._index)
        if len(held) > target:
            for number in held[target:]:
                changed |= self._release(self._names[number])
        else:
            wanted = target - len(held)
            for name in self._free(leases, self._names):
                if wanted <= 0:
                    break
                if self._claim(name):
                    wanted -= 1
                    changed = True
        if changed:
            self._changed()

    def _renew(self) -> bool:
        member = self.store.claim_lease(self._member, self.owner, self.ttl)
        if member is None:  # pragma: no cover - a member name is unique to this process
            raise RuntimeError(f"member name {self.owner!r} is taken")
        self._member_lease = member
        changed = False
        with self._lock:
            held = list(self._held.values())
        for lease, deadline in held:
            started = time.monotonic()
            try:
                renewed = self.store.renew_lease(lease, self.ttl)
            except LeaseLost:
                with self._lock:
                    self._held.pop(lease.partition, None)
                self.logger.warning("lease on %s (epoch %d) lost", lease.partition, lease.epoch)
                changed = True
                continue
            with self._lock:
                if lease.partition in self._held:
                    self._held[lease.partition] = (renewed, started + self.ttl)
            if deadline <= started:
                # Past its local deadline (a late heartbeat), the partition was not held as far
                # as partitions() said: a processor may have let it go and started a life
                # without it. It is held again under the same epoch, a change to them all.
                self.logger.info(
                    "lease on %s (epoch %d) renewed after its local deadline",
                    lease.partition,
                    lease.epoch,
                )
                changed = True
        return changed

    def _live_members(self, leases: dict[str, Lease]) -> int:
        prefix = partitions.member_prefix(self.app.name)
        mine = leases.get(self._member)
        # The store's clock, as this member's lease (just renewed to store-now + ttl) tells it.
        store_now = None if mine is None else mine.expires_at
        live = 0
        for name, lease in leases.items():
            if not name.startswith(prefix) or lease.owner is None:
                continue
            if store_now is None or (store_now - lease.expires_at).total_seconds() < self.ttl:
                live += 1
        return max(live, 1)

    def _free(self, leases: dict[str, Lease], names: list[str]) -> list[str]:
        """Of ``names``, those not held by anyone (never claimed, released, or expired by the
        store's clock as estimated from this member's fresh lease)."""
        mine = leases.get(self._member)
        store_now = None if mine is None else mine.expires_at
        free = []
        held = self._held_names()
        for name in names:
            if name in held:
                continue
            lease = leases.get(name)
            if lease is None or lease.owner is None:
                free.append(name)
            elif store_now is not None and (store_now - lease.expires_at).total_seconds() > (
                self.ttl
            ):
                free.append(name)  # expired: the claim itself decides, by the store's clock
        return free

    def _claim(self, name: str) -> bool:
        started = time.monotonic()
        lease = self.store.claim_lease(name, self.owner, self.ttl)
        if lease is None:
            return False
        with self._lock:
            self._held[name] = (lease, started + self.ttl)
        self.logger.info("claimed %s (epoch %d)", name, lease.epoch)
        assert isinstance(self.store, EventStore)
        partitions.record_claim(self.store, self.app, lease)
        return True

    def _release(self, name: str) -> bool:
        with self._lock:
            entry = self._held.pop(name, None)
        if entry is None:
            return False
        self.store.release_lease(entry[0])
        self.logger.info("released %s (epoch %d) to rebalance", name, entry[0].epoch)
        return True

    def _held_names(self) -> set[str]:
        with self._lock:
            return set(self._held)

    def _changed(self) -> None:
        self.version += 1
        for listener in self._listeners:
            listener()
