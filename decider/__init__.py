"""decider: event-sourced workflows as pure decide/evolve functions.

The pure core: messages, commands, workflow events, the :class:`Workflow` triple,
:func:`fold`, :func:`translate`, the codec and deterministic ids. It does no I/O and imports
nothing from :mod:`decider.stores` or :mod:`decider.processors`, which are imported on
their own.
"""

from decider.codec import Codec, event_kind
from decider.commands import Command, Complete, Publish, Reply, Schedule, Send
from decider.errors import (
    DeciderError,
    DecodeError,
    MessageRegistrationError,
    UnknownMessageType,
)
from decider.events import (
    Began,
    Completed,
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
from decider.system import CommandFailed
from decider.workflow import (
    Instance,
    Lifecycle,
    Workflow,
    advance,
    fold,
    handle,
    lifecycle,
    start,
    translate,
)

__all__ = [
    "REGISTRY",
    "Began",
    "Codec",
    "Command",
    "CommandFailed",
    "Complete",
    "Completed",
    "DecodeError",
    "DeciderError",
    "Envelope",
    "Ignored",
    "InitiatedBy",
    "Instance",
    "Lifecycle",
    "MessageRegistrationError",
    "MessageRegistry",
    "Metadata",
    "Publish",
    "Published",
    "Received",
    "Replied",
    "Reply",
    "Schedule",
    "Scheduled",
    "Send",
    "Sent",
    "UnknownMessageType",
    "Workflow",
    "WorkflowEvent",
    "advance",
    "event_id",
    "event_kind",
    "fold",
    "handle",
    "lifecycle",
    "message",
    "new_id",
    "start",
    "translate",
    "type_name_of",
]
