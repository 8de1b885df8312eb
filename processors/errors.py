"""The errors the processors raise.

::

    ProcessorError
    ├── AppDefinitionError     an App registered wrongly (duplicate workflow, handler, bad type)
    ├── NotParked              retry_parked of a command that is not parked
    └── ConflictsExhausted     an instance kept changing under the processor; it will resume
"""

from __future__ import annotations


class ProcessorError(Exception):
    """Base class of every error the processors raise."""


class AppDefinitionError(ProcessorError, ValueError):
    """An :class:`~decider.processors.app.App` was set up wrongly; the message says what and
    where."""


class NotParked(ProcessorError, LookupError):
    """The command named is not parked (never was, or was already retried)."""

    def __init__(self, app: str, command_id: str) -> None:
        self.app = app
        self.command_id = command_id
        super().__init__(f"command {command_id!r} is not parked in app {app!r}")


class ConflictsExhausted(ProcessorError):
    """An append kept failing its revision check after the bounded number of reloads."""

    def __init__(self, stream: str, attempts: int) -> None:
        self.stream = stream
        self.attempts = attempts
        super().__init__(
            f"stream {stream!r} kept changing: {attempts} appends failed their revision check"
        )
