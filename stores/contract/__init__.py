"""The contract every event store passes: one base class, subclassed in one line per store
(see :mod:`decider.stores.contract.suite`); its parts are the private modules beside it."""

import sys

# pytest rewrites the asserts of test files only; these modules are not test files, so ask it
# to rewrite them too (before they are imported) and a failing check shows both sides.
if "pytest" in sys.modules:
    import pytest

    pytest.register_assert_rewrite(
        "decider.stores.contract._extras",
        "decider.stores.contract._log",
        "decider.stores.contract._names",
        "decider.stores.contract._stateful",
        "decider.stores.contract._streams",
        "decider.stores.contract._support",
    )

# after the asserts' rewrite is asked for
from decider.stores.contract.suite import (
    DEFAULT_TIMEOUT,
    EventStoreContract,
    Scope,
    new_events,
    open_scope,
    take,
    wait_until,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "EventStoreContract",
    "Scope",
    "new_events",
    "open_scope",
    "take",
    "wait_until",
]
