"""The parked ledger beside a consumer group's parked stream: what keeps the two consistent.

The ledger (``decider parked``, ``decider retry``) says what is parked *now*; the group's parked
stream on the server is a history of parks. Three places meet (see
:mod:`decider.processors.commands.consumer_group`):

- a redelivered command (``retry_count`` > 0) whose results or park record are stored already
  is answered without calling its handler again (:func:`concluded_before`);
- a parked event the server replays is turned into the ledger's retry request when the ledger
  shows its command parked, the very request ``decider retry`` writes
  (:func:`retry_for_replay`);
- a command the server parked on its own is found in the parked stream and parked in the
  ledger too (:func:`unrecorded_parks`).
"""

from __future__ import annotations

from decider import Metadata
from decider.codec import Kind, parse_type
from decider.processors.app import decoding, streams
from decider.processors.app.definition import AppDefinition, HandlerRegistration
from decider.processors.app.messages import RETRIED, CommandParked, ParkedCommandRetried
from decider.processors.commands.parking import parked_now, retry_request
from decider.processors.commands.replay import park_record_id
from decider.processors.engine import logs
from decider.stores.consumer_groups import ConsumerGroup
from decider.stores.errors import CorruptEvent
from decider.stores.protocol import ANY, EventStore, RecordedEvent, StreamAppend


def concluded_before(
    store: EventStore, ledger: str, handler: HandlerRegistration, command_id: str, round_key: str
) -> str | None:
    """``"done"`` if the command's results are stored, ``"parked"`` if this round's park
    record is in the ledger, else ``None``."""
    if store.read_stream(streams.results_stream(handler.name, command_id), 0, 1):
        return "done"
    record = str(park_record_id(ledger, command_id, round_key))
    if any(str(e.id) == record for e in store.read_stream(ledger)):
        return "parked"
    return None


def retry_for_replay(
    app: AppDefinition, store: EventStore, event: RecordedEvent, log: logs.ContextAdapter
) -> list[StreamAppend]:
    """What a parked ``event`` the server sends again leads to: the ledger's retry request
    for its command if the ledger shows it parked, else nothing (it concluded, or its retry is
    queued already)."""
    ledger = streams.parked_stream(app.name)
    command_id = str(event.id)
    if event.type == RETRIED and event.stream == ledger:
        request = decoding.decode_message(app.codec, event)
        if isinstance(request, ParkedCommandRetried):
            command_id = request.command_id
    found = parked_now(app, store).get(command_id)
    extra = {"command_id": command_id}
    if found is None:
        log.info("replayed %s is not parked in the ledger; nothing to do", command_id, extra=extra)
        return []
    log.info("replayed %s is parked in the ledger; requesting its retry", command_id, extra=extra)
    command, park = found
    return [StreamAppend(ledger, [retry_request(app, command, park)], ANY)]


def unrecorded_parks(
    app: AppDefinition, store: EventStore, group: ConsumerGroup
) -> list[tuple[RecordedEvent, HandlerRegistration, Metadata]]:
    """The commands in ``group``'s parked stream that the ledger never heard of (no park, no
    retry) and that have no results: the server parked them on its own."""
    links = group.parked()
    if not links:
        return []
    ledger = streams.parked_stream(app.name)
    known: set[str] = set()
    for record in store.read_stream(ledger):
        try:
            message = decoding.decode_message(app.codec, record)
        except CorruptEvent:
            continue
        if isinstance(message, CommandParked | ParkedCommandRetried):
            known.add(message.command_id)
    found = []
    for link in links:
        stored = store.read_stream(link.stream, link.revision, 1)
        if not stored or str(stored[0].id) in known:
            continue
        event = stored[0]
        kind, type_name = parse_type(event.type)
        handler = app.handlers.get(type_name)
        if kind != Kind.SENT or handler is None or app.workflow_of_stream(event.stream) is None:
            continue
        if store.read_stream(streams.results_stream(handler.name, str(event.id)), 0, 1):
            continue
        try:
            metadata = decoding.input_metadata(app.codec, event)
        except CorruptEvent:
            continue
        known.add(str(event.id))
        found.append((event, handler, metadata))
    return found
