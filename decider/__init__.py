"""decider: event-sourced workflows as pure decide/evolve functions.

The pure core: messages, commands, workflow events, the :class:`Workflow` triple,
:func:`fold`, :func:`translate`, :func:`handle` and its lifecycle rules, the codec,
deterministic ids and snapshots of a state. It does no I/O and imports
nothing from :mod:`decider.stores` or :mod:`decider.processors`, which are imported on
their own.
"""

from decider.codec import Codec, event_kind
from decider.commands import Cancel, Command, Complete, Fail, Publish, Reply, Schedule, Send
from decider.errors import (
    DeciderError,
    DecodeError,
    InvalidDecision,
    MessageRegistrationError,
    UnknownMessageType,
    WorkflowDefinitionError,
)
from decider.events import (
    Began,
    Cancelled,
    Completed,
    Failed,
    Ignored,
    InitiatedBy,
    Published,
    Received,
    Replied,
    Scheduled,
    Sent,
    WorkflowEvent,
)
from decider.ids import event_id, new_id
from decider.messages import REGISTRY, Envelope, MessageRegistry, Metadata, message, type_name_of
from decider.snapshots import Restored, StateCodec, snapshot_due
from decider.system import CancelRequested, CommandFailed
from decider.workflow import (
    Instance,
    Lifecycle,
    OnError,
    Workflow,
    advance,
    began_version,
    fold,
    handle,
    handle_cancel,
    lifecycle,
    record_failure,
    start,
    translate,
)

__all__ = [
    "REGISTRY",
    "Began",
    "Cancel",
    "CancelRequested",
    "Cancelled",
    "Codec",
    "Command",
    "CommandFailed",
    "Complete",
    "Completed",
    "DecodeError",
    "DeciderError",
    "Envelope",
    "Fail",
    "Failed",
    "Ignored",
    "InitiatedBy",
    "Instance",
    "InvalidDecision",
    "Lifecycle",
    "MessageRegistrationError",
    "MessageRegistry",
    "Metadata",
    "OnError",
    "Publish",
    "Published",
    "Received",
    "Replied",
    "Reply",
    "Restored",
    "Schedule",
    "Scheduled",
    "Send",
    "Sent",
    "StateCodec",
    "UnknownMessageType",
    "Workflow",
    "WorkflowDefinitionError",
    "WorkflowEvent",
    "advance",
    "began_version",
    "event_id",
    "event_kind",
    "fold",
    "handle",
    "handle_cancel",
    "lifecycle",
    "message",
    "new_id",
    "record_failure",
    "snapshot_due",
    "start",
    "translate",
    "type_name_of",
]
