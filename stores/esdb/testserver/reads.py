"""``Streams.Read``: stream and ``$all`` reads, and catch-up subscriptions to both.

Reads never hold the log's lock while sending: the record lists only grow, so a reader takes
their length once and walks indexes below it. Subscriptions wait for new records on the log's
condition variable; a cancelled call (client stop, deadline, server stop) wakes them through a
gRPC callback, so an idle subscription costs a parked thread and nothing else.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc

from decider.stores.esdb.testserver import wire
from decider.stores.esdb.testserver.log import EventLog, Record
from decider.stores.esdb.testserver.wire import Context

_PAGE = 512
_SAFETY_WAKE_SECONDS = 5.0  # a missed wake-up costs at most this; normal wakes are immediate


@functools.lru_cache(maxsize=256)
def _compile(regex: str) -> re.Pattern[str]:
    return re.compile(regex)


_MEMO_LIMIT = 100_000  # names a filter remembers its answer for before it starts over


@dataclass
class RecordFilter:
    """A server-side filter: a regex (or prefixes) on the stream name or on the event type.

    Like EventStoreDB's ``EventFilter``, a filtered read also drops the ``$epoch-information``
    stream and the checkpoint and parked streams of persistent subscriptions to ``$all``.
    Answers are remembered per stream name and per event type (names repeat through the log),
    so scanning a long log costs a dictionary lookup per record, not a regex search.
    """

    by_stream: bool
    regex: re.Pattern[str] | None
    prefixes: tuple[str, ...]
    checkpoint_interval: int
    _streams: dict[str, bool] = field(default_factory=dict, repr=False, compare=False)
    _types: dict[str, bool] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_options(cls, options: Any) -> RecordFilter | None:
        """The filter of ``ReadReq.Options``, ``None`` for ``no_filter``."""
        if options.WhichOneof("filter_option") != "filter":
            return None
        filter_options = options.filter
        by_stream = filter_options.WhichOneof("filter") == "stream_identifier"
        expression = filter_options.stream_identifier if by_stream else filter_options.event_type
        window = filter_options.max if filter_options.WhichOneof("window") == "max" else 32
        multiplier = filter_options.checkpointIntervalMultiplier or 1
        prefixes = tuple(expression.prefix)
        return cls(
            by_stream=by_stream,
            regex=None if prefixes or not expression.regex else _compile(expression.regex),
            prefixes=prefixes,
            checkpoint_interval=max(1, window) * multiplier,
        )

    def matches(self, record: Record) -> bool:
        """Whether a record passes (``re.search`` semantics, like .NET ``Regex.Match``)."""
        stream_passes = self._streams.get(record.stream)
        if stream_passes is None:
            stream_passes = self._remember(self._streams, record.stream, self._stream_passes)
        if self.by_stream or not stream_passes:
            return stream_passes
        type_passes = self._types.get(record.type)
        if type_passes is None:
            type_passes = self._remember(self._types, record.type, self._subject_passes)
        return type_passes

    @staticmethod
    def _remember(memo: dict[str, bool], name: str, decide: Callable[[str], bool]) -> bool:
        if len(memo) >= _MEMO_LIMIT:
            memo.clear()
        answer = memo[name] = decide(name)
        return answer

    def candidates(self, log: EventLog, first: int, end: int) -> Iterator[int]:
        """Indexes of the records from ``first`` to ``end`` (exclusive) whose stream name (or
        event type) passes, in log order, found through the log's name indexes; the caller
        still applies :meth:`matches` (a type filter's stream exclusions)."""
        passes: Callable[[str], bool]
        if self.by_stream:
            table, passes, memo = log.by_stream, self._stream_passes, self._streams
        else:
            table, passes, memo = log.by_type, self._subject_passes, self._types
        runs: list[Iterator[int]] = []
        for name in list(table):  # one C call: safe while a writer adds names
            answer = memo.get(name)
            if answer is None:
                answer = self._remember(memo, name, passes)
            if answer:
                found = table[name]
                runs.append(itertools.islice(found, bisect.bisect_left(found, first), None))
        for index in heapq.merge(*runs):
            if index >= end:
                return
            yield index

    def _stream_passes(self, stream: str) -> bool:
        if stream == "$epoch-information" or (
            stream.startswith("$persistentsubscription-$all::")
            and stream.endswith(("-checkpoint", "-parked"))
        ):
            return False
        return not self.by_stream or self._subject_passes(stream)

    def _subject_passes(self, subject: str) -> bool:
        if self.prefixes:
            return subject.startswith(self.prefixes)
        return self.regex is None or self.regex.search(subject) is not None


def read(log: EventLog, request: Any, context: Context) -> Iterator[Any]:
    """Answer one ``ReadReq`` (a read or a subscription, of a stream or of ``$all``)."""
    options = request.options
    render = _renderer(
        log,
        structured=options.uuid_option.WhichOneof("content") == "structured",
        resolve_links=options.resolve_links,
    )
    subscribe = options.WhichOneof("count_option") == "subscription"
    if not subscribe and wire.too_late(context):
        context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
    backwards = options.read_direction == 1
    if options.WhichOneof("stream_option") == "stream":
        name = wire.stream_name(options.stream.stream_identifier)
        if subscribe:
            return _counted(log, _subscribe_stream(log, name, options.stream, render, context))
        return _read_stream(
            log,
            name,
            stream_options=options.stream,
            backwards=backwards,
            count=options.count,
            render=render,
            context=context,
        )
    record_filter = RecordFilter.from_options(options)
    if subscribe:
        return _counted(log, _subscribe_all(log, options.all, record_filter, render, context))
    return _read_all(
        log,
        options.all,
        backwards=backwards,
        count=options.count,
        record_filter=record_filter,
        render=render,
        context=context,
    )


Render = Callable[[Record], Any]
"""Turns a record into the ``ReadResp`` a request wants (id format, links resolved or not)."""


def _renderer(log: EventLog, *, structured: bool, resolve_links: bool) -> Render:
    def render(record: Record) -> Any:
        if resolve_links and record.type == "$>":
            target = log.resolve_link(record)
            if target is None:
                return wire.unresolved_link_resp(record, structured)
            return wire.event_resp(record, structured, link_target=target)
        return wire.event_resp(record, structured)

    return render


def _counted(log: EventLog, items: Iterator[Any]) -> Iterator[Any]:
    """``items``, counted in ``log.subscriptions`` while the subscription runs."""
    with log.changed:
        log.subscriptions += 1
    try:
        yield from items
    finally:
        with log.changed:
            log.subscriptions -= 1


def _read_stream(
    log: EventLog,
    name: str,
    *,
    stream_options: Any,
    backwards: bool,
    count: int,
    render: Render,
    context: Context,
) -> Iterator[Any]:
    with log.changed:
        deleted = log.is_tombstoned(name)
        start = None if deleted else log.visible_from(name)
        index = log.stream(name)
        records = index.records if index is not None else []
        end = len(records)  # exclusive
    if deleted:
        wire.abort_deleted(context, name)
    if start is None:
        yield wire.not_found_resp(name)
        return
    which = stream_options.WhichOneof("revision_option")
    if backwards:
        first = end - 1 if which != "revision" else min(stream_options.revision, end - 1)
        stop = max(start - 1, first - count)
        chosen = range(first, stop, -1)
    else:
        first = (
            end
            if which == "end"
            else (max(start, stream_options.revision) if which == "revision" else start)
        )
        chosen = range(first, min(end, first + count))
    for revision in chosen:
        yield render(records[revision])


def _read_all(
    log: EventLog,
    all_options: Any,
    *,
    backwards: bool,
    count: int,
    record_filter: RecordFilter | None,
    render: Render,
    context: Context,
) -> Iterator[Any]:
    records = log.records
    end = len(records)
    which = all_options.WhichOneof("all_option")
    if backwards:
        # backwards from a position is exclusive of it, like EventStoreDB
        first = end - 1
        if which == "position":
            first = (
                bisect.bisect_left(log.positions, all_options.position.commit_position, 0, end) - 1
            )
        indexes: Iterable[int] = range(first, -1, -1)
    else:
        first = 0
        if which == "end":
            first = end
        elif which == "position":
            first = bisect.bisect_left(log.positions, all_options.position.commit_position, 0, end)
        indexes = range(first, end)
        if record_filter is not None and (record_filter.regex or record_filter.prefixes):
            indexes = record_filter.candidates(log, first, end)
    sent = 0
    for considered, i in enumerate(indexes):
        if sent >= count:
            return
        if considered % _PAGE == _PAGE - 1 and not context.is_active():
            return
        record = records[i]
        if record_filter is None or record_filter.matches(record):
            sent += 1
            yield render(record)


def _wake_on_cancel(log: EventLog, context: Context) -> bool:
    """Arrange for a cancelled call to wake its waiting subscription; False if already over."""

    def wake() -> None:
        with log.changed:
            log.changed.notify_all()

    return context.add_callback(wake)


def _wait_for(log: EventLog, has_more: Any, context: Context) -> bool:
    """Block until ``has_more()``; False once the call ended or the server is closing."""
    with log.changed:
        while not has_more():
            if log.closed or not context.is_active():
                return False
            log.changed.wait(_SAFETY_WAKE_SECONDS)
    return context.is_active()


def _subscribe_all(
    log: EventLog,
    all_options: Any,
    record_filter: RecordFilter | None,
    render: Render,
    context: Context,
) -> Iterator[Any]:
    if not _wake_on_cancel(log, context):
        return
    which = all_options.WhichOneof("all_option")
    records = log.records
    start = all_options.position.commit_position if which == "position" else -1
    # The start is fixed before the confirmation: whatever the client appends once it has the
    # confirmation must reach it, also for a subscription from the end.
    length = len(records)
    if which == "end":
        next_index = length
    elif which == "position":
        # a subscription from a position starts after it
        next_index = bisect.bisect_right(log.positions, start, 0, length)
    else:
        next_index = 0
    yield wire.confirmation_resp()
    # From the end, or from a position at or past the last record, EventStoreDB has nothing to
    # catch up: it says caught-up at once, with no checkpoint (Enumerator.AllSubscription*:
    # ``checkpoint >= confirmationLastPos`` goes live).
    caught_up = next_index >= length
    if caught_up:
        yield wire.caught_up_resp()
    considered = 0
    # the last position considered: where a checkpoint may point (the start is one)
    last_considered: int | None = start if which == "position" and not caught_up else None
    # EventStoreDB never sends a checkpoint before the start, nor the same checkpoint twice
    last_checkpoint = start - 1
    while True:
        end = len(records)
        if next_index >= end:
            if not caught_up:
                caught_up = True
                # always checkpoint when going live (EventStoreDB >= 23.10), at the last
                # record considered: never past it, or a resumed reader would skip an event
                if (
                    record_filter is not None
                    and last_considered is not None
                    and last_considered > last_checkpoint
                ):
                    last_checkpoint = last_considered
                    yield wire.checkpoint_resp(last_considered)
                yield wire.caught_up_resp()
                continue
            if not _wait_for(log, lambda n=next_index: len(records) > n, context):
                return
            continue
        for i in range(next_index, min(end, next_index + _PAGE)):
            record = records[i]
            # a start past the end of the log: later events at or before it are not wanted
            wanted = record.position > start
            if record_filter is None:
                if wanted:
                    yield render(record)
                continue
            if wanted and record_filter.matches(record):
                yield render(record)
            considered += 1
            last_considered = record.position
            if considered >= record_filter.checkpoint_interval:
                considered = 0
                if record.position > last_checkpoint:
                    last_checkpoint = record.position
                    yield wire.checkpoint_resp(record.position)
        next_index = min(end, next_index + _PAGE)
        if not context.is_active():
            return


def _subscribe_stream(
    log: EventLog, name: str, stream_options: Any, render: Render, context: Context
) -> Iterator[Any]:
    if not _wake_on_cancel(log, context):
        return
    with log.changed:
        deleted = log.is_tombstoned(name)
        index = log.stream(name)
        length = len(index.records) if index is not None else 0
        visible = log.visible_from(name)
    if deleted:
        wire.abort_deleted(context, name)
    yield wire.confirmation_resp()
    which = stream_options.WhichOneof("revision_option")
    if which == "end":
        next_revision = length
    elif which == "revision":
        next_revision = stream_options.revision + 1  # a subscription starts after it
    else:
        next_revision = 0
    # soft-deleted or truncated events are not replayed
    next_revision = max(next_revision, length if visible is None else visible)
    caught_up = False

    def current() -> tuple[list[Record], bool]:
        found = log.stream(name)
        return (found.records, found.tombstoned) if found is not None else ([], False)

    while True:
        records, tombstoned = current()
        if tombstoned:
            wire.abort_deleted(context, name)
        if next_revision >= len(records):
            if not caught_up:
                caught_up = True
                yield wire.caught_up_resp()
                continue

            def more(wanted: int = next_revision) -> bool:
                found = log.stream(name)
                return found is not None and (found.tombstoned or len(found.records) > wanted)

            if not _wait_for(log, more, context):
                return
            continue
        end = min(len(records), next_revision + _PAGE)
        for revision in range(next_revision, end):
            yield render(records[revision])
        next_revision = end
