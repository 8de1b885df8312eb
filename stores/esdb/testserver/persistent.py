"""Persistent subscriptions (competing consumers) on the test server's log, without gRPC.

A :class:`Group` reads its source (a stream, or ``$all`` with an optional filter) from its
start or its last checkpoint and hands each event to one of its connected :class:`Consumer`\\s,
as EventStoreDB's ``PersistentSubscription`` does:

- consumers wait in a queue in the order they connected; consumer strategies:
  ``DispatchToSingle`` (the head while it has a free slot; a full head goes to the tail),
  ``RoundRobin`` (the head, which then goes to the tail, until one has a free slot),
  ``Pinned`` (by a hash of the event's stream), ``PinnedByCorrelation`` (by
  ``$correlationId`` in the event's metadata, else the stream); a consumer holds at most its
  ``buffer_size`` unacknowledged events;
- an event not acknowledged within ``message_timeout_ms`` is sent again (``retry_count`` + 1)
  at the next tick of a 1 s timer, as EventStoreDB checks timeouts on its timer;
  a nack with ``Retry`` does the same, ``Skip`` drops it, ``Park`` parks it; past
  ``max_retry_count`` retries an event is parked: a ``$>`` link to it is written to the group's
  parked stream ``$persistentsubscription-<source>::<group>-parked``; ``ReplayParked`` sends
  the parked events again (all, or the first ``stop_at``) and truncates the parked stream; a
  replayed event comes with its parked link, and is answered by the link's id;
- after ``min_checkpoint_count`` events are done (acked, skipped or parked), the group writes a
  ``$SubscriptionCheckpoint`` to ``$persistentsubscription-<source>::<group>-checkpoint``: the
  last event before which everything is done; a group restarted (``RestartSubsystem``, or the
  server on its file) resumes after it.

Everything runs under the log's lock and wakes waiting consumers through its condition.
"""

from __future__ import annotations

import bisect
import json
import math
import time
import uuid
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from decider.stores.esdb.testserver.log import ANY, EventLog, Proposed, Record
from decider.stores.esdb.testserver.reads import RecordFilter

ALL = "$all"
"""The source name of a subscription to ``$all``."""

STRATEGIES = ("DispatchToSingle", "RoundRobin", "Pinned", "PinnedByCorrelation")

TICK_SECONDS = 1.0
"""EventStoreDB's persistent subscription timer: message timeouts take effect on its ticks."""


class GroupExists(Exception):
    """``Create`` of a group that exists."""


class GroupMissing(Exception):
    """A call names a group that does not exist."""


class TooManyConsumers(Exception):
    """``max_subscriber_count`` consumers are connected already."""


@dataclass
class Settings:
    """A group's settings, with EventStoreDB's defaults."""

    resolve_links: bool = False
    extra_statistics: bool = False
    max_retry_count: int = 10
    min_checkpoint_count: int = 10
    max_checkpoint_count: int = 1000
    max_subscriber_count: int = 0  # 0: no limit
    live_buffer_size: int = 500
    read_batch_size: int = 20
    history_buffer_size: int = 500
    message_timeout_ms: int = 30_000
    checkpoint_after_ms: int = 2_000
    consumer_strategy: str = "RoundRobin"


class InvalidSettings(Exception):
    """Settings EventStoreDB refuses; the argument is its reason, word for word."""


def check_strategy(settings: Settings) -> None:
    """:class:`InvalidSettings` for a consumer strategy that is not registered
    (``PersistentSubscriptionService`` checks it first on Create, after the group's existence
    on Update)."""
    if settings.consumer_strategy not in STRATEGIES:
        raise InvalidSettings(f"Consumer strategy {settings.consumer_strategy} does not exist.")


def check_buffers(settings: Settings) -> None:
    """:class:`InvalidSettings` for a read batch that does not fit the history buffer: the
    ``ArgumentOutOfRangeException`` of ``PersistentSubscription``'s constructor, in .NET's words."""
    if settings.read_batch_size >= settings.history_buffer_size:
        raise InvalidSettings(
            "Specified argument was out of the range of valid values. "
            "(Parameter 'ReadBatchSize may not be greater than or equal to BufferSize')"
        )


@dataclass
class Delivery:
    """An event sent to a consumer and not yet acknowledged."""

    record: Record
    cursor: int
    retry_count: int
    consumer: Consumer
    deadline: float


@dataclass(eq=False)
class Consumer:
    """One ``Read`` call of a group: the events waiting for it and those it holds."""

    connection_name: str
    buffer_size: int
    outbox: deque[tuple[Record, int]] = field(default_factory=deque)
    in_flight: int = 0
    ended: bool = False
    dropped: bool = False  # by the server (group updated, deleted, restarted), not by leaving
    total: int = 0
    id: str = field(default_factory=lambda: str(uuid.uuid4()))


def stream_of_group(source: str, group: str, kind: str) -> str:
    """The checkpoint (``kind="checkpoint"``) or parked stream of a group."""
    return f"$persistentsubscription-{source}::{group}-{kind}"


class Group:
    """One persistent subscription group; call every method under ``log.changed``."""

    def __init__(
        self,
        log: EventLog,
        source: str,
        name: str,
        start: int | None,
        settings: Settings,
        *,
        record_filter: RecordFilter | None = None,
    ) -> None:
        self.log = log
        self.source = source
        self.name = name
        self.start = start  # a revision (stream) or position ($all); None: from the end
        check_buffers(settings)
        self.settings = settings
        self.filter = record_filter
        self.consumers: list[Consumer] = []
        self.in_flight: dict[str, Delivery] = {}
        self.retries: deque[tuple[Record, int, int]] = deque()  # record, cursor, retry count
        self.links: dict[str, Record] = {}  # replayed parked event id -> its parked link
        self.done_since_checkpoint = 0
        self.checkpointed: Record | None = None
        self.total = 0
        self.parked = 0
        self.cursor = self._first_cursor()

    # -- where the group reads -----------------------------------------------------------

    def _records(self) -> list[Record]:
        if self.source == ALL:
            return self.log.records
        index = self.log.stream(self.source)
        return index.records if index is not None else []

    def _first_cursor(self) -> int:
        """The cursor after the last checkpoint, else at the group's start."""
        checkpoint = self.log.stream(stream_of_group(self.source, self.name, "checkpoint"))
        records = self._records()
        if checkpoint is not None and checkpoint.records:
            value = json.loads(checkpoint.records[-1].data)
            if self.source == ALL:
                position = int(str(value).split("/")[0].removeprefix("C:"))
                return bisect.bisect_right(self.log.positions, position, 0, len(records))
            return int(value) + 1
        if self.start is None:
            return len(records)
        if self.source == ALL:
            return bisect.bisect_left(self.log.positions, self.start, 0, len(records))
        return self.start

    def _wanted(self, record: Record) -> bool:
        if self.source != ALL:
            return True
        if record.stream.startswith("$persistentsubscription-"):
            return False
        return self.filter is None or self.filter.matches(record)

    # -- dispatching ---------------------------------------------------------------------

    def connect(self, connection_name: str, buffer_size: int) -> Consumer:
        """A new consumer; :class:`TooManyConsumers` past ``max_subscriber_count``."""
        limit = self.settings.max_subscriber_count
        if limit and len(self.consumers) >= limit:
            raise TooManyConsumers()
        consumer = Consumer(connection_name, max(1, buffer_size))
        self.consumers.append(consumer)
        self.dispatch()
        return consumer

    def disconnect(self, consumer: Consumer) -> None:
        """Drop a consumer; what it held goes to the others again (a retry)."""
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        consumer.ended = True
        for event_id, delivery in list(self.in_flight.items()):
            if delivery.consumer is consumer:
                del self.in_flight[event_id]
                self._retry(delivery.record, delivery.cursor, delivery.retry_count + 1)
        for record, retry_count in consumer.outbox:
            self.retries.appendleft((record, self._cursor_of(record), retry_count))
        consumer.outbox.clear()
        self.dispatch()

    def dispatch(self) -> None:
        """Hand out retries, then new events, while a consumer has a free slot."""
        self._expire()
        while self.retries:
            record, cursor, retry_count = self.retries[0]
            if not self._send(record, cursor, retry_count):
                return
            self.retries.popleft()
        records = self._records()
        while self.cursor < len(records):
            record = records[self.cursor]
            if self._wanted(record) and not self._send(record, self.cursor, 0):
                return
            self.cursor += 1

    def _send(self, record: Record, cursor: int, retry_count: int) -> bool:
        consumer = self._choose(record)
        if consumer is None:
            return False
        consumer.outbox.append((record, retry_count))
        consumer.in_flight += 1
        consumer.total += 1
        self.total += 1
        timeout = self.settings.message_timeout_ms / 1000
        self.in_flight[self.ack_id(record)] = Delivery(
            record, cursor, retry_count, consumer, time.monotonic() + timeout
        )
        return True

    def _choose(self, record: Record) -> Consumer | None:
        """The consumer that takes ``record``, as EventStoreDB's consumer strategies choose."""
        queue = self.consumers  # in the order they connected, rotated by the strategies
        strategy = self.settings.consumer_strategy
        if strategy in ("Pinned", "PinnedByCorrelation"):
            if not queue:
                return None
            key = record.stream
            if strategy == "PinnedByCorrelation":
                key = _correlation_id(record) or key
            pinned = queue[zlib.crc32(key.encode()) % len(queue)]
            return pinned if pinned.in_flight < pinned.buffer_size else None
        for _ in range(len(queue)):
            head = queue[0]
            if strategy == "RoundRobin":  # the head goes to the tail whether it takes it or not
                queue.append(queue.pop(0))
            if head.in_flight < head.buffer_size:
                return head
            if strategy != "RoundRobin":  # DispatchToSingle: a full head goes to the tail
                queue.append(queue.pop(0))
        return None

    def ack_id(self, record: Record) -> str:
        """What a consumer answers ``record`` by: the parked link's id for a replayed one."""
        link = self.links.get(record.id)
        return record.id if link is None else link.id

    def next_deliveries(self, consumer: Consumer) -> list[tuple[Record, int]]:
        """What ``consumer`` should send now (taken from its outbox)."""
        self.dispatch()
        sent = list(consumer.outbox)
        consumer.outbox.clear()
        return sent

    def next_deadline(self) -> float | None:
        """The tick at which the first unacknowledged event times out."""
        first = min((d.deadline for d in self.in_flight.values()), default=None)
        return None if first is None else math.ceil(first / TICK_SECONDS) * TICK_SECONDS

    def _expire(self) -> None:
        """Send again what timed out by the last tick (``NotifyClockTick``), not to the
        millisecond: an ack that comes a little late still counts, as on EventStoreDB."""
        tick = math.floor(time.monotonic() / TICK_SECONDS) * TICK_SECONDS
        for event_id, delivery in list(self.in_flight.items()):
            if delivery.deadline <= tick:
                del self.in_flight[event_id]
                delivery.consumer.in_flight -= 1
                self._retry(delivery.record, delivery.cursor, delivery.retry_count + 1)

    # -- acknowledgements ----------------------------------------------------------------

    def ack(self, event_ids: list[str]) -> None:
        """The events are handled."""
        for event_id in event_ids:
            delivery = self._take(event_id)
            if delivery is not None:
                self.links.pop(delivery.record.id, None)
                self._done()
        self.dispatch()

    def nack(self, event_ids: list[str], action: str) -> None:
        """``Park``, ``Retry``, ``Skip`` (``Stop`` skips too; ``Unknown`` retries)."""
        for event_id in event_ids:
            delivery = self._take(event_id)
            if delivery is None:
                continue
            if action == "Park":
                self._park(delivery.record)
            elif action in ("Skip", "Stop"):
                self.links.pop(delivery.record.id, None)
                self._done()
            else:
                self._retry(delivery.record, delivery.cursor, delivery.retry_count + 1)
        self.dispatch()

    def _take(self, event_id: str) -> Delivery | None:
        delivery = self.in_flight.pop(event_id, None)
        if delivery is not None:
            delivery.consumer.in_flight -= 1
        return delivery

    def _retry(self, record: Record, cursor: int, retry_count: int) -> None:
        if retry_count > self.settings.max_retry_count:
            self._park(record)
        else:
            self.retries.append((record, cursor, retry_count))

    def _park(self, record: Record) -> None:
        self.links.pop(record.id, None)
        link = Proposed(
            str(uuid.uuid4()),
            "$>",
            "application/octet-stream",
            f"{record.revision}@{record.stream}".encode(),
            b"",
        )
        self._write(stream_of_group(self.source, self.name, "parked"), link)
        self.parked += 1
        self._done()

    def _done(self) -> None:
        self.done_since_checkpoint += 1
        if self.done_since_checkpoint >= self.settings.min_checkpoint_count:
            self.checkpoint()

    def checkpoint(self) -> None:
        """Write the low-water mark: the last event before which everything is done."""
        pending = [d.cursor for d in self.in_flight.values()] + [c for _, c, _ in self.retries]
        low = min(pending, default=self.cursor) - 1
        records = self._records()
        if low < 0 or low >= len(records):
            return
        record = records[low]
        if self.checkpointed is record:
            return
        value: Any = record.revision
        if self.source == ALL:
            value = f"C:{record.position}/P:{record.position}"
        event = Proposed(
            str(uuid.uuid4()),
            "$SubscriptionCheckpoint",
            "application/json",
            json.dumps(value).encode(),
            b"",
        )
        self._write(stream_of_group(self.source, self.name, "checkpoint"), event)
        self.checkpointed = record
        self.done_since_checkpoint = 0

    def replay_parked(self, stop_at: int | None) -> None:
        """Send the parked events again (the first ``stop_at``), then truncate what was sent."""
        parked_stream = stream_of_group(self.source, self.name, "parked")
        start = self.log.visible_from(parked_stream)
        index = self.log.stream(parked_stream)
        if index is None or start is None:
            return
        links = index.records[start:]
        if stop_at is not None:
            links = links[:stop_at]
        for link in links:
            target = self.log.resolve_link_locked(link)
            if target is not None:
                self.links[target.id] = link
                self.retries.append((target, self._cursor_of(target), 0))
                self.parked -= 1
        if links:
            meta = dict(index.meta)
            meta["$tb"] = links[-1].revision + 1
            data = json.dumps(meta).encode()
            proposed = Proposed(str(uuid.uuid4()), "$metadata", "application/json", data, b"")
            self._write("$$" + parked_stream, proposed)
        self.dispatch()

    def _cursor_of(self, record: Record) -> int:
        if self.source == ALL:
            return bisect.bisect_left(self.log.positions, record.position)
        return record.revision

    def _write(self, stream: str, event: Proposed) -> None:
        """Append under the lock the caller holds (``EventLog.append`` would take it again)."""
        _, soft_deleted, last = self.log.check(stream, ANY, [event.id])
        new, _ = self.log.new_records(stream, [event], soft_deleted, last)
        self.log.commit(new)


def _correlation_id(record: Record) -> str | None:
    try:
        metadata = json.loads(record.metadata)
    except ValueError:
        return None
    found = metadata.get("$correlationId") if isinstance(metadata, dict) else None
    return found if isinstance(found, str) else None


class Groups:
    """Every group of the server by (source, name)."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.groups: dict[tuple[str, str], Group] = {}
        self.definitions: dict[tuple[str, str], tuple[int | None, RecordFilter | None]] = {}

    def create(
        self,
        source: str,
        name: str,
        start: int | None,
        settings: Settings,
        record_filter: RecordFilter | None,
    ) -> None:
        """A new group; :class:`GroupExists` if it is there, :class:`InvalidSettings` for
        settings EventStoreDB refuses (checked in its order: the strategy, the group, the
        buffers)."""
        check_strategy(settings)
        with self.log.changed:
            if (source, name) in self.groups:
                raise GroupExists()
            self.groups[source, name] = Group(
                self.log, source, name, start, settings, record_filter=record_filter
            )
            self.definitions[source, name] = (start, record_filter)

    def get(self, source: str, name: str) -> Group:
        """The group; :class:`GroupMissing` if none."""
        found = self.groups.get((source, name))
        if found is None:
            raise GroupMissing()
        return found

    def update(self, source: str, name: str, start: int | None, settings: Settings) -> None:
        """New settings (and start); connected consumers are dropped, as on EventStoreDB.
        :class:`GroupMissing`, then :class:`InvalidSettings` (the group stays as it was)."""
        with self.log.changed:
            old = self.get(source, name)
            check_strategy(settings)
            _, record_filter = self.definitions[source, name]
            new = Group(self.log, source, name, start, settings, record_filter=record_filter)
            self._drop(old)
            self.definitions[source, name] = (start, record_filter)
            self.groups[source, name] = new
            self.log.changed.notify_all()

    def delete(self, source: str, name: str) -> None:
        """Remove the group; its consumers' calls end."""
        with self.log.changed:
            self._drop(self.get(source, name))
            del self.groups[source, name]
            del self.definitions[source, name]
            self.log.changed.notify_all()

    def restart(self) -> None:
        """Restart every group from its checkpoint; consumers are dropped."""
        with self.log.changed:
            for key, group in list(self.groups.items()):
                self._drop(group)
                start, record_filter = self.definitions[key]
                self.groups[key] = Group(
                    self.log,
                    group.source,
                    group.name,
                    start,
                    group.settings,
                    record_filter=record_filter,
                )
            self.log.changed.notify_all()

    def all(self) -> Iterator[Group]:
        """Every group."""
        return iter(list(self.groups.values()))

    @staticmethod
    def _drop(group: Group) -> None:
        for consumer in list(group.consumers):
            consumer.ended = consumer.dropped = True
        group.consumers.clear()
