"""The errors the processors raise.

::

    ProcessorError
    ├── AppDefinitionError     an App registered wrongly (duplicate workflow, handler, bad type)
    ├── NotParked              retry_parked of a command that is not parked
    ├── ConflictsExhausted     an instance kept changing under the processor; it will resume
    ├── InvalidStreamName      a stream name built from data that no store can hold
    └── ProcessorDied          a processor's thread ended while the service was running
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


class InvalidStreamName(ProcessorError, ValueError):
    """A stream name built from data (an instance id, a message id) that a store cannot hold:
    not UTF-8, holding NUL, or too long. The input it came from is skipped with this reason."""

    def __init__(self, shown: str, reason: str) -> None:
        self.shown = shown
        self.reason = reason
        super().__init__(f"invalid stream name {shown}: {reason}")


class ProcessorDied(ProcessorError):
    """A processor's thread ended although the service was not stopping.

    The service stops and :meth:`~decider.processors.service.Service.run_forever` raises this,
    so the process exits non-zero and a supervisor can restart it.
    """

    def __init__(self, processor: str) -> None:
        self.processor = processor
        super().__init__(f"processor {processor!r} ended unexpectedly; the service stopped")
