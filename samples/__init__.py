"""Sample workflows, each with its given-when-then tests under ``tests/samples``."""
