"""The contract every event store passes: one base class, subclassed in one line per store.

Usage, in a store's test module::

    from decider.stores.contract.suite import EventStoreContract
    from decider.stores.sqlite.store import SqliteEventStore

    class TestSqliteStore(EventStoreContract):
        store_factory = staticmethod(lambda tmp_path: SqliteEventStore(tmp_path / "e.db"))

``store_factory(tmp_path)`` makes a store; the suite closes it after each test. A store that
needs more set-up (a server, a container, an environment variable) overrides the ``store``
fixture instead, and may depend on any fixture of its own::

    class TestEsdbStore(EventStoreContract):
        @pytest.fixture
        def store(self, esdb_server: str) -> Iterator[EventStore]:
            store = EsdbEventStore(esdb_server)
            yield store
            store.close()

The suite assumes nothing about what else is in the store: every test writes streams with a
unique prefix, reads the global log only after a marker it appends first, and filters by its
prefix, so it runs on a shared server whose log is not empty and holds system events.
Optional abilities (:class:`~decider.stores.protocol.CheckpointStore`,
:class:`~decider.stores.protocol.TransactionalStore`, :class:`~decider.stores.leases.LeaseStore`)
are tested only when the store has them; the
other tests of those groups are skipped.

``close()`` must be idempotent: one test closes the store itself, and the fixture closes it
again. The stateful test shares one store across its examples (a fresh scope each) and runs
``stateful_settings``; a slow store may override that attribute.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from decider.stores.contract._extras import (
    CheckpointContract,
    ConcurrencyContract,
    IdLookupContract,
    TransactionContract,
)
from decider.stores.contract._leases import LeaseContract
from decider.stores.contract._log import LogContract
from decider.stores.contract._names import NameContract
from decider.stores.contract._partitions import PartitionContract
from decider.stores.contract._stateful import comparison_machine
from decider.stores.contract._streams import StreamContract
from decider.stores.contract._support import (
    DEFAULT_TIMEOUT,
    Scope,
    new_events,
    open_scope,
    take,
    wait_until,
)
from decider.stores.protocol import EventStore

__all__ = [
    "DEFAULT_TIMEOUT",
    "EventStoreContract",
    "Scope",
    "new_events",
    "open_scope",
    "take",
    "wait_until",
]


class EventStoreContract(
    StreamContract,
    LogContract,
    CheckpointContract,
    TransactionContract,
    IdLookupContract,
    ConcurrencyContract,
    NameContract,
    LeaseContract,
    PartitionContract,
):
    """The shared store suite; a store passes it by a one-line subclass named ``Test...``.

    Hooks: set ``store_factory`` (called with pytest's ``tmp_path``), or override the ``store``
    fixture. Tests use the ``scope`` fixture: the store plus this test's unique stream prefix
    and start position.
    """

    store_factory: ClassVar[staticmethod[[Path], EventStore]]
    stateful_settings: ClassVar[settings] = settings(
        max_examples=30,
        stateful_step_count=20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[EventStore]:
        """A fresh store from ``store_factory``, closed after the test."""
        store = type(self).store_factory(tmp_path)
        try:
            yield store
        finally:
            store.close()

    @pytest.fixture
    def scope(self, store: EventStore) -> Scope:
        """This test's unique stream prefix and start position in ``store``."""
        return open_scope(store)

    def test_matches_the_reference_store(self, store: EventStore) -> None:
        """Random sequences of operations give what the in-memory reference store gives."""
        run_state_machine_as_test(comparison_machine(store), settings=self.stateful_settings)
