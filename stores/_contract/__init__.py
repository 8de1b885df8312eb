"""The contract suite's parts (see :mod:`decider.stores.contract`, the one public entry point)."""

import sys

# pytest rewrites the asserts of test files only; these modules are not test files, so ask it
# to rewrite them too (before they are imported) and a failing check shows both sides.
if "pytest" in sys.modules:
    import pytest

    pytest.register_assert_rewrite(
        "decider.stores._contract.extras",
        "decider.stores._contract.log",
        "decider.stores._contract.names",
        "decider.stores._contract.stateful",
        "decider.stores._contract.streams",
        "decider.stores._contract.support",
    )
