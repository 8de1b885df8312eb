"""The contract suite's parts (see :mod:`stores.contract`, the one public entry point)."""

import sys

# pytest rewrites the asserts of test files only; these modules are not test files, so ask it
# to rewrite them too (before they are imported) and a failing check shows both sides.
if "pytest" in sys.modules:
    import pytest

    pytest.register_assert_rewrite(
        "stores._contract.extras",
        "stores._contract.log",
        "stores._contract.stateful",
        "stores._contract.streams",
        "stores._contract.support",
    )
