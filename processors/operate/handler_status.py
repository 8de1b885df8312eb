"""Each handler's commands as the store shows them, for ``decider status`` (no service needed).

A running service knows more (:meth:`~decider.processors.service.service.Service.handler_load`: in
flight, backing off, queued); from the store alone a command is *in hand* when it was sent
after the command processor's checkpoint and neither its results nor its park record are
stored yet (it is running, backing off, or waiting for a worker), and *parked* while it is
parked now.
"""

from __future__ import annotations

import collections

import attrs

from decider.codec import Kind, parse_type
from decider.processors.app import decoding, streams
from decider.processors.app.definition import AppDefinition
from decider.processors.app.messages import RETRIED
from decider.processors.commands.replay import park_record_id
from decider.processors.operate.queries import list_parked
from decider.stores.protocol import CheckpointStore, EventStore, RecordedEvent

_PAGE = 1000


@attrs.frozen
class HandlerStatus:
    """One handler's commands: in hand (sent, not concluded) and parked now."""

    handler: str
    in_hand: int
    parked: int


def handler_status(store: EventStore, app: AppDefinition) -> list[HandlerStatus]:
    """Every handler of ``app`` with its commands in hand and parked, by handler name."""
    names = {h.type_name: h.name for h in app.handlers.values()}
    parked = collections.Counter(
        names.get(p.command_type, p.command_type) for p in list_parked(store, app)
    )
    in_hand: collections.Counter[str] = collections.Counter()
    checkpoint = None
    if isinstance(store, CheckpointStore):
        checkpoint = store.load_checkpoint(streams.command_processor_name(app.name))
    ledger = streams.parked_stream(app.name)
    records = {str(e.id) for e in _read_stream(store, ledger)}
    flt = decoding.command_filter(app.workflows, ledger, RETRIED)
    after = checkpoint
    while page := store.read_all(after, _PAGE, flt):
        for event in page:
            kind, type_name = parse_type(event.type)
            handler = names.get(type_name)
            if kind != Kind.SENT or handler is None or app.workflow_of_stream(event.stream) is None:
                continue
            command_id = str(event.id)
            if store.read_stream(streams.results_stream(handler, command_id), 0, 1):
                continue
            if str(park_record_id(ledger, command_id, "")) in records:
                continue
            in_hand[handler] += 1
        after = page[-1].position
    return [
        HandlerStatus(name, in_hand[name], parked[name])
        for name in sorted(h.name for h in app.handlers.values())
    ]


def _read_stream(store: EventStore, stream: str) -> list[RecordedEvent]:
    events: list[RecordedEvent] = []
    while page := store.read_stream(stream, len(events), _PAGE):
        events.extend(page)
        if len(page) < _PAGE:
            break
    return events


def handler_lines(statuses: list[HandlerStatus]) -> list[str]:
    """One line per handler: its commands in hand and parked."""
    if not statuses:
        return []
    lines = ["handlers (commands in hand: sent, not yet concluded):"]
    lines += [f"  {s.handler}: in hand {s.in_hand}, parked {s.parked}" for s in statuses]
    return lines
