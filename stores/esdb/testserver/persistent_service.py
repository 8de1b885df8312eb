"""The ``event_store.client.persistent_subscriptions.PersistentSubscriptions`` servicer:
Create, Update, Delete, Read (with Ack and Nack), GetInfo, List, ReplayParked and
RestartSubsystem over :mod:`decider.stores.esdb.testserver.persistent`.

Errors are EventStoreDB's (``RpcExceptions``): ``ALREADY_EXISTS`` for a group that exists,
``NOT_FOUND`` for one that does not, ``INTERNAL`` "... failed: '<reason>'" for settings it
refuses (an unknown consumer strategy, a read batch not smaller than the history buffer),
``FAILED_PRECONDITION`` "Maximum subscriptions reached." past ``max_subscriber_count``. A
``Read`` whose group is updated, deleted or restarted ends with ``CANCELLED`` (the consumer
subscribes again).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any, NoReturn

import grpc

from decider.stores.esdb._proto import persistent_pb2, persistent_pb2_grpc
from decider.stores.esdb.testserver import wire
from decider.stores.esdb.testserver.log import EventLog, Record
from decider.stores.esdb.testserver.persistent import (
    ALL,
    Consumer,
    Group,
    GroupExists,
    GroupMissing,
    Groups,
    InvalidSettings,
    Settings,
    TooManyConsumers,
    stream_of_group,
)
from decider.stores.esdb.testserver.reads import RecordFilter
from decider.stores.esdb.testserver.wire import Context

_Resp: Any = persistent_pb2.ReadResp
_WAKE_SECONDS = 1.0
_TICKS_PER_MS = 10_000
_FROM: dict[str, Any] = {"from": "127.0.0.1"}  # "from" is a Python keyword
_NACK_ACTIONS = {0: "Unknown", 1: "Park", 2: "Retry", 3: "Skip", 4: "Stop"}


class PersistentSubscriptionsServicer(persistent_pb2_grpc.PersistentSubscriptionsServicer):
    """EventStoreDB's persistent subscriptions over one :class:`EventLog`."""

    def __init__(self, log: EventLog) -> None:
        self._log = log
        self.groups = Groups(log)

    # -- management ----------------------------------------------------------------------

    def Create(self, request: Any, context: Context) -> Any:
        """A new group on a stream (from a revision, the start or the end) or on ``$all``
        (from a position, the start or the end, with an optional filter)."""
        options = request.options
        source, start, record_filter = self._where(options, context, with_filter=True)
        settings = _settings(options.settings)
        try:
            self.groups.create(source, options.group_name, start, settings, record_filter)
        except GroupExists:
            context.abort(
                grpc.StatusCode.ALREADY_EXISTS,
                f"Subscription group {options.group_name} on stream {source} exists.",
            )
        except InvalidSettings as refused:
            _abort_failed(context, source, options.group_name, refused)
        return persistent_pb2.CreateResp()

    def Update(self, request: Any, context: Context) -> Any:
        """New settings and start; the group's consumers are dropped."""
        options = request.options
        source, start, _ = self._where(options, context, with_filter=False)
        try:
            self.groups.update(source, options.group_name, start, _settings(options.settings))
        except GroupMissing:
            _abort_missing(context, source, options.group_name)
        except InvalidSettings as refused:
            _abort_failed(context, source, options.group_name, refused)
        return persistent_pb2.UpdateResp()

    def Delete(self, request: Any, context: Context) -> Any:
        """Remove a group; its consumers' calls end."""
        options = request.options
        source = _source(options, "stream_identifier")
        try:
            self.groups.delete(source, options.group_name)
        except GroupMissing:
            _abort_missing(context, source, options.group_name)
        return persistent_pb2.DeleteResp()

    def GetInfo(self, request: Any, context: Context) -> Any:
        """One group's settings and state."""
        options = request.options
        source = _source(options, "stream_identifier")
        with self._log.changed:
            try:
                group = self.groups.get(source, options.group_name)
            except GroupMissing:
                _abort_missing(context, source, options.group_name)
            return persistent_pb2.GetInfoResp(subscription_info=_info(group))

    def List(self, request: Any, context: Context) -> Any:
        """Every group, or those of one stream (NOT_FOUND when it has none)."""
        options = request.options
        with self._log.changed:
            groups = list(self.groups.all())
            if options.WhichOneof("list_option") == "list_for_stream":
                wanted = _source(options.list_for_stream, "stream")
                groups = [g for g in groups if g.source == wanted]
                if not groups:
                    context.abort(grpc.StatusCode.NOT_FOUND, "Subscription group does not exist.")
            return persistent_pb2.ListResp(subscriptions=[_info(g) for g in groups])

    def ReplayParked(self, request: Any, context: Context) -> Any:
        """Send a group's parked events again (all, or the first ``stop_at``)."""
        options = request.options
        source = _source(options, "stream_identifier")
        stop_at = options.stop_at if options.WhichOneof("stop_at_option") == "stop_at" else None
        with self._log.changed:
            try:
                self.groups.get(source, options.group_name).replay_parked(stop_at)
            except GroupMissing:
                _abort_missing(context, source, options.group_name)
            self._log.changed.notify_all()
        return persistent_pb2.ReplayParkedResp()

    def RestartSubsystem(self, request: Any, context: Context) -> Any:
        """Restart every group from its checkpoint; consumers are dropped."""
        self.groups.restart()
        return request

    # -- consuming -----------------------------------------------------------------------

    def Read(self, request_iterator: Iterator[Any], context: Context) -> Iterator[Any]:
        """Options first, then acks and nacks from the consumer; events to it."""
        first = next(request_iterator, None)
        if first is None or first.WhichOneof("content") != "options":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Read options are missing")
        options = first.options
        source = _source(options, "stream_identifier")
        structured = options.uuid_option.WhichOneof("content") == "structured"
        metadata = dict(context.invocation_metadata())  # type: ignore[attr-defined]
        name = str(metadata.get("connection-name", ""))
        log = self._log
        with log.changed:
            try:
                group = self.groups.get(source, options.group_name)
                consumer = group.connect(name, options.buffer_size)
            except GroupMissing:
                _abort_missing(context, source, options.group_name)
            except TooManyConsumers:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "Maximum subscriptions reached.")
        context.add_callback(lambda: _wake(log))
        threading.Thread(
            target=self._settle, args=(group, consumer, request_iterator), daemon=True
        ).start()
        yield _Resp(
            subscription_confirmation=_Resp.SubscriptionConfirmation(
                subscription_id=f"{source}::{options.group_name}"
            )
        )
        try:
            while True:
                with log.changed:
                    if consumer.ended or log.closed or not context.is_active():
                        break
                    sent = group.next_deliveries(consumer)
                    if not sent:
                        deadline = group.next_deadline()
                        wait = _WAKE_SECONDS
                        if deadline is not None:
                            wait = min(wait, max(0.001, deadline - time.monotonic()))
                        log.changed.wait(wait)
                        continue
                for record, retry_count in sent:
                    yield self._event(group, record, retry_count, structured)
        finally:
            with log.changed:
                if not consumer.ended:
                    group.disconnect(consumer)
                log.changed.notify_all()
        if consumer.dropped and not log.closed and context.is_active():
            context.abort(grpc.StatusCode.CANCELLED, "The persistent subscription was dropped.")

    def _settle(self, group: Group, consumer: Consumer, requests: Iterator[Any]) -> None:
        """Apply the consumer's acks and nacks as they come (a thread per ``Read``)."""
        try:
            for request in requests:
                which = request.WhichOneof("content")
                if which not in ("ack", "nack"):
                    continue
                message = getattr(request, which)
                ids = [_uuid_text(i) for i in message.ids]
                with self._log.changed:
                    if consumer.ended:
                        return
                    if which == "ack":
                        group.ack(ids)
                    else:
                        group.nack(ids, _NACK_ACTIONS.get(message.action, "Unknown"))
                    self._log.changed.notify_all()
        except grpc.RpcError:
            pass  # the call ended
        finally:
            with self._log.changed:
                if not consumer.ended:
                    group.disconnect(consumer)
                self._log.changed.notify_all()

    def _event(self, group: Group, record: Record, retry_count: int, structured: bool) -> Any:
        link = group.links.get(record.id)  # a replayed parked event: sent with its link
        event = record
        if link is None and group.settings.resolve_links and record.type == "$>":
            target = self._log.resolve_link(record)
            if target is not None:
                event, link = target, record
        resp = _Resp.ReadEvent(event=_recorded(event, structured), retry_count=retry_count)
        if link is not None:
            resp.link.CopyFrom(_recorded(link, structured))
        # the original record's position (the link's, for a resolved or a replayed parked
        # event), on a stream's group too: servers from 22.10 on read streams with positions,
        # and kurrentdbclient refuses an event without one
        resp.commit_position = (record if link is None else link).position
        return _Resp(event=resp)

    def _where(
        self, options: Any, context: Context, *, with_filter: bool
    ) -> tuple[str, int | None, RecordFilter | None]:
        """The source, the start (a revision or position; None: from the end, kept as such
        and reported as ``-1``) and the filter of Create/Update."""
        which = options.WhichOneof("stream_option")
        if which == "all":
            all_options = options.all
            start_option = all_options.WhichOneof("all_option")
            record_filter = None
            if with_filter and all_options.WhichOneof("filter_option") == "filter":
                record_filter = RecordFilter.from_options(all_options)
            if start_option == "position":
                return ALL, int(all_options.position.commit_position), record_filter
            if start_option == "end":
                return ALL, None, record_filter
            return ALL, 0, record_filter
        if which == "stream":
            stream_options = options.stream
            name = wire.stream_name(stream_options.stream_identifier)
            start_option = stream_options.WhichOneof("revision_option")
            if start_option == "revision":
                return name, int(stream_options.revision), None
            if start_option == "end":
                return name, None, None
            return name, 0, None
        if not options.HasField("stream_identifier"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "No stream or $all in the options")
        # clients before 21.10 name the stream here and its start in the settings
        return wire.stream_name(options.stream_identifier), options.settings.revision, None


def _source(options: Any, stream_field: str) -> str:
    if options.WhichOneof("stream_option") == "all":
        return ALL
    return wire.stream_name(getattr(options, stream_field))


def _settings(raw: Any) -> Settings:
    # Create names it (a string, since 21.10); Update has only the old enum, whose number
    # EventStoreDB turns into a name with .NET's ToString (the number itself when unnamed)
    named = raw.consumer_strategy if "consumer_strategy" in raw.DESCRIPTOR.fields_by_name else ""
    number = raw.named_consumer_strategy
    value = raw.DESCRIPTOR.fields_by_name["named_consumer_strategy"].enum_type.values_by_number
    strategy = named or (value[number].name if number in value else str(number))
    timeout_ms = (
        raw.message_timeout_ms
        if raw.WhichOneof("message_timeout") == "message_timeout_ms"
        else raw.message_timeout_ticks // _TICKS_PER_MS
    )
    after_ms = (
        raw.checkpoint_after_ms
        if raw.WhichOneof("checkpoint_after") == "checkpoint_after_ms"
        else raw.checkpoint_after_ticks // _TICKS_PER_MS
    )
    return Settings(
        resolve_links=raw.resolve_links,
        extra_statistics=raw.extra_statistics,
        max_retry_count=raw.max_retry_count,
        min_checkpoint_count=max(1, raw.min_checkpoint_count),
        max_checkpoint_count=raw.max_checkpoint_count,
        max_subscriber_count=raw.max_subscriber_count,
        live_buffer_size=raw.live_buffer_size,
        read_batch_size=raw.read_batch_size,
        history_buffer_size=raw.history_buffer_size,
        message_timeout_ms=timeout_ms or 30_000,
        checkpoint_after_ms=after_ms,
        consumer_strategy=strategy,
    )


def _info(group: Group) -> Any:
    settings = group.settings
    records = group._records()
    last_known = records[-1] if records else None

    def shown(record: Record | None) -> str:
        if record is None:
            return ""
        return (
            f"C:{record.position}/P:{record.position}"
            if group.source == ALL
            else str(record.revision)
        )

    return persistent_pb2.SubscriptionInfo(
        event_source=group.source,
        group_name=group.name,
        status="Live",
        connections=[
            _connection_info(
                username="$anonymous",
                total_items=c.total,
                available_slots=c.buffer_size - c.in_flight,
                in_flight_messages=c.in_flight,
                connection_name=c.connection_name,
                **{"from": "127.0.0.1"},
            )
            for c in group.consumers
        ],
        total_items=group.total,
        last_checkpointed_event_position=shown(group.checkpointed),
        last_known_event_position=shown(last_known),
        resolve_link_tos=settings.resolve_links,
        start_from=_start_from(group),
        message_timeout_milliseconds=settings.message_timeout_ms,
        extra_statistics=settings.extra_statistics,
        max_retry_count=settings.max_retry_count,
        live_buffer_size=settings.live_buffer_size,
        buffer_size=settings.history_buffer_size,
        read_batch_size=settings.read_batch_size,
        check_point_after_milliseconds=settings.checkpoint_after_ms,
        min_check_point_count=settings.min_checkpoint_count,
        max_check_point_count=settings.max_checkpoint_count,
        retry_buffer_count=len(group.retries),
        total_in_flight_messages=len(group.in_flight),
        outstanding_messages_count=len(group.in_flight),
        named_consumer_strategy=settings.consumer_strategy,
        max_subscriber_count=settings.max_subscriber_count,
        parked_message_count=group.parked,
    )


def _start_from(group: Group) -> str:
    """The start as EventStoreDB stored it: ``-1`` for the end, ``C:<commit>/P:<prepare>`` on
    ``$all`` (a group's start never changes with the log; clients resend it on update)."""
    start = -1 if group.start is None else group.start
    return f"C:{start}/P:{start}" if group.source == ALL else str(start)


def _connection_info(**fields: Any) -> Any:
    info = persistent_pb2.SubscriptionInfo.ConnectionInfo(**fields)
    info.MergeFrom(persistent_pb2.SubscriptionInfo.ConnectionInfo(**_FROM))  # "from": a keyword
    return info


def _recorded(record: Record, structured: bool) -> Any:
    event_id = wire.event_id(record.id, structured)
    return _Resp.ReadEvent.RecordedEvent(
        id=event_id,
        stream_identifier=wire.identifier(record.stream),
        stream_revision=record.revision,
        prepare_position=record.position,
        commit_position=record.position,
        metadata={
            "type": record.type,
            "content-type": record.content_type,
            "created": str(record.created),
        },
        custom_metadata=record.metadata,
        data=record.data,
    )


def _uuid_text(identifier: Any) -> str:
    if identifier.WhichOneof("value") == "structured":
        bits = (identifier.structured.most_significant_bits % 2**64) << 64
        bits |= identifier.structured.least_significant_bits % 2**64
        return str(uuid.UUID(int=bits))
    return str(uuid.UUID(identifier.string))


def _abort_missing(context: Context, source: str, group: str) -> NoReturn:
    context.abort(
        grpc.StatusCode.NOT_FOUND, f"Subscription group {group} on stream {source} does not exist."
    )


def _abort_failed(context: Context, source: str, group: str, refused: InvalidSettings) -> NoReturn:
    context.abort(
        grpc.StatusCode.INTERNAL,
        f"Subscription group {group} on stream {source} failed: '{refused.args[0]}'",
    )


def _wake(log: EventLog) -> None:
    with log.changed:
        log.changed.notify_all()


__all__ = ["PersistentSubscriptionsServicer", "stream_of_group"]
