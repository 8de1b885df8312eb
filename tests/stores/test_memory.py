"""The in-memory reference store passes the shared contract."""

from stores.contract import EventStoreContract
from stores.memory import MemoryEventStore


class TestMemoryStore(EventStoreContract):
    store_factory = staticmethod(lambda tmp_path: MemoryEventStore())
