"""processors: run workflows as a service on any event store of the ``stores`` protocol.

An :class:`App` registers workflows (with their inputs and routes), command handlers and target
streams, and publishes, requests and cancels from outside a service (its definition alone is an
:class:`AppDefinition`, which the processors read); a :class:`Service` runs its workflow,
command and timer processors as threads;
:func:`show`, :func:`status`, :func:`list_parked` and :func:`retry_parked` are the operator's
views, and :func:`fork_many` repairs instances in bulk. See docs/processors.md for the
guarantees and the stream names.
"""

from decider.processors.app.definition import (
    DEFAULT_POOL_SIZE,
    DEFAULT_TIMEOUT,
    AppDefinition,
    Handler,
    HandlerResult,
    Route,
    by_correlation,
)
from decider.processors.app.errors import (
    AppDefinitionError,
    ConflictsExhausted,
    InstanceEnded,
    InvalidStreamName,
    NotParked,
    ProcessorDied,
    ProcessorError,
    RequestNotAnswered,
    RequestTimeout,
)
from decider.processors.app.messages import (
    CommandFailed,
    CommandParked,
    InputSkipped,
    ParkedCommandRetried,
)
from decider.processors.app.retry import HandlerFailure, RetryPolicy
from decider.processors.client.app import App
from decider.processors.commands.parking import ParkedCommand
from decider.processors.commands.pool import HandlerLoad
from decider.processors.engine.base import LOGGER
from decider.processors.engine.clock import Clock, FakeClock, Signal, SystemClock
from decider.processors.operate.bulk_fork import BulkFork, fork_many
from decider.processors.operate.handler_status import HandlerStatus, handler_status
from decider.processors.operate.queries import (
    HistoryEntry,
    InstanceStatus,
    InstanceView,
    list_parked,
    retry_parked,
    show,
    status,
)
from decider.processors.service.service import Service

__all__ = [
    "DEFAULT_POOL_SIZE",
    "DEFAULT_TIMEOUT",
    "LOGGER",
    "App",
    "AppDefinition",
    "AppDefinitionError",
    "BulkFork",
    "Clock",
    "CommandFailed",
    "CommandParked",
    "ConflictsExhausted",
    "FakeClock",
    "Handler",
    "HandlerFailure",
    "HandlerLoad",
    "HandlerResult",
    "HandlerStatus",
    "HistoryEntry",
    "InputSkipped",
    "InstanceEnded",
    "InstanceStatus",
    "InstanceView",
    "InvalidStreamName",
    "NotParked",
    "ParkedCommand",
    "ParkedCommandRetried",
    "ProcessorDied",
    "ProcessorError",
    "RequestNotAnswered",
    "RequestTimeout",
    "RetryPolicy",
    "Route",
    "Service",
    "Signal",
    "SystemClock",
    "by_correlation",
    "fork_many",
    "handler_status",
    "list_parked",
    "retry_parked",
    "show",
    "status",
]
