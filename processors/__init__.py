"""processors: run workflows as a service on any event store of the ``stores`` protocol.

An :class:`App` registers workflows (with their inputs and routes), command handlers and target
streams; a :class:`Service` runs its workflow, command and timer processors as threads;
:func:`show`, :func:`status`, :func:`list_parked` and :func:`retry_parked` are the operator's
views. See docs/processors.md for the guarantees and the stream names.
"""

from decider.processors.app import (
    DEFAULT_POOL_SIZE,
    DEFAULT_TIMEOUT,
    App,
    Handler,
    HandlerResult,
    Route,
    by_correlation,
)
from decider.processors.base import LOGGER
from decider.processors.clock import Clock, FakeClock, Signal, SystemClock
from decider.processors.errors import (
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
from decider.processors.handler_status import HandlerStatus, handler_status
from decider.processors.messages import (
    CommandFailed,
    CommandParked,
    InputSkipped,
    ParkedCommandRetried,
)
from decider.processors.pool import HandlerLoad
from decider.processors.queries import (
    HistoryEntry,
    InstanceStatus,
    InstanceView,
    ParkedCommand,
    list_parked,
    retry_parked,
    show,
    status,
)
from decider.processors.retry import HandlerFailure, RetryPolicy
from decider.processors.service import Service

__all__ = [
    "DEFAULT_POOL_SIZE",
    "DEFAULT_TIMEOUT",
    "LOGGER",
    "App",
    "AppDefinitionError",
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
    "handler_status",
    "list_parked",
    "retry_parked",
    "show",
    "status",
]
