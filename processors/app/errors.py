"""The errors the processors raise.

::

    ProcessorError
    ├── AppDefinitionError     an App registered wrongly (duplicate workflow, handler, bad type)
    ├── NotParked              retry_parked of a command that is not parked
    ├── InstanceEnded          retry_parked of a command whose workflow instance has ended
    ├── ConflictsExhausted     an instance kept changing under the processor; it will resume
    ├── InvalidStreamName      a stream name built from data that no store can hold
    ├── ProcessorDied          a processor's thread ended while the service was running
    ├── RequestTimeout         app.request: no reply came in time (also a TimeoutError)
    └── RequestNotAnswered     app.request: the instance ended or ignored it without a reply

    OperationError             an operator's request that cannot be carried out (app.cancel,
                               decider publish/cancel/reset)
"""

from __future__ import annotations


class ProcessorError(Exception):
    """Base class of every error the processors raise."""


class OperationError(Exception):
    """An operator's request that cannot be carried out; the message says why."""


class AppDefinitionError(ProcessorError, ValueError):
    """An :class:`~decider.processors.App` was set up wrongly; the message says what
    and where."""


class NotParked(ProcessorError, LookupError):
    """The command named is not parked (never was, or was already retried)."""

    def __init__(self, app: str, command_id: str) -> None:
        self.app = app
        self.command_id = command_id
        super().__init__(f"command {command_id!r} is not parked in app {app!r}")


class InstanceEnded(ProcessorError):
    """A parked command's workflow instance has ended (completed, failed or cancelled): a retry
    would carry the command out for an instance that no longer takes its result."""

    def __init__(self, command_id: str, command_type: str, stream: str, status: str) -> None:
        self.command_id = command_id
        self.command_type = command_type
        self.stream = stream
        self.status = status
        super().__init__(
            f"command {command_id!r} ({command_type}) belongs to instance {stream!r}, which has "
            f"ended ({status}): carried out now, its result would be recorded as Ignored"
        )


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

    The service stops and :meth:`~decider.processors.service.service.Service.run_forever` raises
    this, so the process exits non-zero and a supervisor can restart it.
    """

    def __init__(self, processor: str) -> None:
        self.processor = processor
        super().__init__(f"processor {processor!r} ended unexpectedly; the service stopped")


class RequestTimeout(ProcessorError, TimeoutError):
    """No reply to a request came within its timeout (see :meth:`App.request
    <decider.processors.client.app.App.request>`).

    ``message_id`` is the request's message id (its reply stream is ``reply-<message_id>``),
    ``instances`` the instance streams its routes name. The request stays published: it may
    still be handled, and a second request with the same ``message_id`` is the same input.
    """

    def __init__(
        self, message_type: str, message_id: str, instances: tuple[str, ...], waited: float
    ) -> None:
        self.message_type = message_type
        self.message_id = message_id
        self.instances = instances
        self.waited = waited
        to = f" to instance {', '.join(instances)}" if instances else ""
        super().__init__(
            f"no reply to {message_type} (message id {message_id}){to} within {waited:.1f}s; "
            "is a service of the app running?"
        )


class RequestNotAnswered(ProcessorError):
    """The instance recorded a request without replying: it had ended (``Ignored``), or the
    request ended it (``Failed``, ``Cancelled``). ``reason`` is the one recorded."""

    def __init__(self, message_type: str, message_id: str, instance: str, reason: str) -> None:
        self.message_type = message_type
        self.message_id = message_id
        self.instance = instance
        self.reason = reason
        super().__init__(
            f"instance {instance} did not reply to {message_type} (message id {message_id}): "
            f"{reason}"
        )
