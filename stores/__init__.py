"""Event stores: one protocol, several backends, one contract suite they all pass."""

from decider.stores.errors import (
    CorruptEvent,
    StoreError,
    StoreUnavailable,
    StreamDeleted,
    UnsupportedStoreURI,
    WrongExpectedVersion,
)
from decider.stores.leases import Lease, LeaseLost, LeaseStore
from decider.stores.protocol import (
    ALL,
    ANY,
    EXISTS,
    NO_STREAM,
    AppendResult,
    CaughtUp,
    CheckpointStore,
    EventStore,
    ExpectedRevision,
    Filter,
    NewEvent,
    RecordedEvent,
    StreamAppend,
    StreamState,
    Subscription,
    TransactionalStore,
)
from decider.stores.uri import open_store

__all__ = [
    "ALL",
    "ANY",
    "EXISTS",
    "NO_STREAM",
    "AppendResult",
    "CaughtUp",
    "CheckpointStore",
    "CorruptEvent",
    "EventStore",
    "ExpectedRevision",
    "Filter",
    "Lease",
    "LeaseLost",
    "LeaseStore",
    "NewEvent",
    "RecordedEvent",
    "StoreError",
    "StoreUnavailable",
    "StreamAppend",
    "StreamDeleted",
    "StreamState",
    "Subscription",
    "TransactionalStore",
    "UnsupportedStoreURI",
    "WrongExpectedVersion",
    "open_store",
]
