"""The quotes sample: request and reply, a price the caller waits for, with frozen dataclasses."""

from samples.quotes.workflow import workflow

__all__ = ["workflow"]
