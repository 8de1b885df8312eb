"""The in-memory reference store passes the shared contract."""

from decider.stores.contract import EventStoreContract
from decider.stores.memory import MemoryEventStore


class TestMemoryStore(EventStoreContract):
    store_factory = staticmethod(lambda tmp_path: MemoryEventStore())
