"""The app the operator-command tests run (``tests.support.ops_app:ops_app``, imported from the
repository root, the working directory of the processes).

- ``Ticket``: ``TicketOpened`` begins an instance that stays running until ``TicketClosed``;
  it is expected to progress within a millisecond, so an open ticket is stuck at once. While
  ``$OPS_POISON_FAILS`` is ``1`` the route of a ticket of kind ``poison`` raises (the input is
  skipped); once the variable is gone the same input is handled (a fixed deployment).
- ``Chore``: ``ChoreAdded`` begins an instance that stays running, with no progress setting.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import attrs

from decider import Command, Complete, Metadata, Workflow, WorkflowEvent, message
from decider.processors import App

POISON_ENV = "OPS_POISON_FAILS"


@message("ops.TicketOpened")
@attrs.frozen(kw_only=True)
class TicketOpened:
    ticket_id: str
    kind: str


@message("ops.TicketClosed")
@attrs.frozen(kw_only=True)
class TicketClosed:
    ticket_id: str


@message("ops.ChoreAdded")
@attrs.frozen(kw_only=True)
class ChoreAdded:
    chore_id: str


def ticket_decide(input: Any, state: None) -> Sequence[Command[Any]]:
    match input:
        case TicketOpened():
            return []
        case TicketClosed():
            return [Complete()]
    raise ValueError(f"unexpected input {input!r}")


def ticket_route(message: TicketOpened | TicketClosed, _: Metadata) -> str:
    poison = isinstance(message, TicketOpened) and message.kind == "poison"
    if poison and os.environ.get(POISON_ENV) == "1":
        raise RuntimeError(f"ticket {message.ticket_id} is poison")
    return message.ticket_id


def _same(state: None, event: WorkflowEvent[Any, Any]) -> None:
    return state


ticket: Workflow[Any, None, Any] = Workflow("Ticket", None, _same, ticket_decide)
chore: Workflow[Any, None, Any] = Workflow("Chore", None, _same, lambda input, state: [])

ops_app = App("svc-ops")
ops_app.workflow(
    ticket,
    inputs={TicketOpened: ticket_route, TicketClosed: ticket_route},
    progress_within=timedelta(milliseconds=1),
)
ops_app.workflow(chore, inputs={ChoreAdded: lambda m, _: m.chore_id})
