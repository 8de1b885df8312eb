"""A catch-up subscription that any store can reuse, and the notifier that wakes it.

A store hands :class:`CatchUpSubscription` three things: a function that reads a page of the
global log after a position (already filtered), a function that returns the log's head (its last
position), and a :class:`LogNotifier` that the store tells after every commit what it wrote. The
subscription reads history page by page, yields one :class:`~decider.stores.protocol.CaughtUp`,
then waits for live events. It never polls in a busy loop: an idle subscription sleeps on a bell
of its own (a ``threading.Event``) that the notifier rings only for commits its filter passes.
Stores whose log can also grow from another process (SQLite on a shared file) pass
``probe_interval``: the waiting subscription then checks the head every so often, a query that
costs microseconds, as a backstop to the store's own cross-process wake-up. A store that knows
which rows it has announced (SQLite, whose watch reads what other processes wrote) also passes
``announced``: a probe then reads the log only if a row there was not announced, and otherwise
moves the subscription's position to the head without reading (an announced row it wants has
already marked it), so a subscription whose filter passes none of this process's rows never
reads them.

No background thread is involved: the consumer's own :meth:`~CatchUpSubscription.poll` (or
iteration) does the reading, so a subscription that nobody polls costs nothing.
"""

from __future__ import annotations

import collections
import json
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from decider.stores.errors import StoreError
from decider.stores.protocol import (
    CaughtUp,
    Filter,
    NewEvent,
    Partitions,
    RecordedEvent,
    StreamAppend,
)

ReadPage = Callable[[int | None, int], list[RecordedEvent]]
"""``read_page(after_position, limit)``: up to ``limit`` matching events after the position."""

ReadHead = Callable[[], int | None]
"""``head()``: the last position of the whole log (matching or not), ``None`` if it is empty."""

Announced = Callable[[], tuple[bool, int | None]]
"""``announced()``: whether every row up to the log's head was announced to the notifier (the
announcement done: each marked every subscription whose filter passes it), and that head."""

ReadHeadAndPage = Callable[[int | None, int], tuple[int | None, list[RecordedEvent]]]
"""``head_and_page(after_position, limit)``: ``head()``, then ``read_page(after_position,
limit)`` read after it, in one call (a store for which each is a round trip joins them)."""


Summed = dict[str, dict[int | None, int]]
"""What another process wrote, summed up by a store's look: for each event type, each partition
(of the count the look was made for; ``None``: no key) with the last position of such events."""

Written = Sequence[tuple[str, str, int | None]]
"""What a commit wrote: each event's stream, type and partition key."""

_ONE_TYPE = re.compile(r'\[\["([^"\\]*)"\],\[((?:-?[0-9]+)(?:,-?[0-9]+)*)?\],([01])\]\Z')
"""A gist's text (:meth:`Gist.text`) of one type whose name JSON writes as it is (no quote,
backslash or character it escapes): the type, the keys, the unkeyed flag."""

_BY_TYPE_PAST = 64
"""A commit of more events than this is matched type by type (:class:`_ByType`): a
subscription that reads none of its types passes over it without looking at each event."""


def written_to(stream: str, events: Sequence[NewEvent]) -> Written:
    """What an append of ``events`` to ``stream`` writes, for :meth:`LogNotifier.notify`."""
    return [(stream, event.type, event.partition_key) for event in events]


def written_by(appends: Sequence[StreamAppend]) -> Written:
    """What a batch of ``appends`` writes, for :meth:`LogNotifier.notify`."""
    return [
        (item.stream, event.type, event.partition_key) for item in appends for event in item.events
    ]


class _ByType:
    """What a big commit wrote, grouped by event type (built once per commit, for every
    subscription's :meth:`CatchUpSubscription.wants`)."""

    def __init__(self, written: Written) -> None:
        self.groups: dict[str, list[tuple[str, str, int | None]]] = {}
        groups, get = self.groups, self.groups.get  # (locals: read once per event)
        for item in written:
            group = get(item[1])
            if group is None:
                groups[item[1]] = [item]
            else:
                group.append(item)


@attrs.frozen
class Gist:
    """What commits wrote, in brief, for waking another process's subscriptions: the events'
    types, their partition keys, and whether one had no key (streams are left out: one per
    instance, too many to send).

    A subscription may want such commits when its filter takes one of the types and its
    partitions one of the keys (or an unknown one): the types and keys are matched apart, so a
    gist wakes every subscription that one of its events would, and at times one more.

    >>> gist = Gist.of([("order-1", "Placed", 7), ("order-1", "Paid", None)])
    >>> (sorted(gist.types), sorted(gist.keys), gist.unkeyed)
    (['Paid', 'Placed'], [7], True)
    """

    types: frozenset[str]
    keys: frozenset[int]
    unkeyed: bool

    @classmethod
    def of(cls, written: Written) -> Gist:
        """The gist of a commit that wrote ``written`` (:func:`written_to`, :func:`written_by`)."""
        # Two comprehensions (no test per event in Python); None among the keys: unkeyed.
        types = frozenset([event_type for _, event_type, _ in written])
        keys: set[Any] = {key for _, _, key in written}
        unkeyed = None in keys
        if unkeyed:
            keys.discard(None)
        return cls(types, frozenset(keys), unkeyed)

    def __or__(self, other: Gist) -> Gist:
        """The gist of both commits."""
        return Gist(self.types | other.types, self.keys | other.keys, self.unkeyed or other.unkeyed)

    def text(self) -> str:
        """The gist as compact JSON (what :meth:`of_text` reads back).

        >>> Gist(frozenset({"Placed"}), frozenset({7, 3}), False).text()
        '[["Placed"],[3,7],0]'
        """
        return json.dumps(
            [sorted(self.types), sorted(self.keys), int(self.unkeyed)], separators=(",", ":")
        )

    @classmethod
    def of_text(cls, text: str) -> Gist | None:
        """The gist ``text`` holds (:meth:`text`); ``None`` (unknown) for anything unreadable.

        >>> Gist.of_text('[["Placed"],[3,7],0]') == Gist(
        ...     frozenset({"Placed"}), frozenset({3, 7}), False
        ... )
        True
        >>> Gist.of_text("") is None and Gist.of_text("[1") is None
        True
        """
        # The common gist (one type, named without escapes) is read without the JSON decoder:
        # a look reads one per commit of another process.
        plain = _ONE_TYPE.match(text)
        if plain is not None:
            type_name, keys_text, unkeyed_text = plain.groups()
            keys = frozenset(map(int, keys_text.split(","))) if keys_text else frozenset()
            return cls(frozenset((type_name,)), keys, unkeyed_text == "1")
        try:
            types, keys, unkeyed = json.loads(text)
            return cls(frozenset(map(str, types)), frozenset(map(int, keys)), bool(unkeyed))
        except (ValueError, TypeError):
            return None

    def summed(self, count: int, last: int, modulo: int = 0) -> Summed:
        """The gist as a look's summary for :meth:`LogNotifier.notify_written` (each of its
        types with each of its keys' partitions of ``count``, and ``None`` for no key), every
        entry at ``last``, the last position of the commits it covers: an entry for each event,
        and at times one more (types and keys are kept apart).

        ``modulo``: the gist's keys are the events' keys modulo this (0: the keys themselves).
        Where ``count`` does not divide it, the partitions are unknown: each is named.

        >>> Gist(frozenset({"Placed"}), frozenset({7, 3}), True).summed(4, 12)
        {'Placed': {3: 12, None: 12}}
        >>> Gist(frozenset({"Placed"}), frozenset({5}), False).summed(2, 12, modulo=3)
        {'Placed': {0: 12, 1: 12}}
        """
        partitions: dict[int | None, int]
        if modulo and modulo % count:
            partitions = dict.fromkeys(range(count), last) if self.keys else {}
        else:
            partitions = {key % count: last for key in self.keys}
        if self.unkeyed:
            partitions[None] = last
        return dict.fromkeys(self.types, partitions)

    def reduced(self, modulo: int) -> Gist:
        """The gist with its keys modulo ``modulo`` (fewer of them; what :meth:`summed` reads
        with ``modulo``).

        >>> Gist(frozenset({"Placed"}), frozenset({7, 3, 11}), False).reduced(4).keys
        frozenset({3})
        """
        return Gist(self.types, frozenset(key % modulo for key in self.keys), self.unkeyed)


class LogNotifier:
    """Wakes the waiting subscriptions whose events were written, or all when the store closes.

    A store calls :meth:`notify` after each commit with what it wrote (each event's stream and
    type): only the subscriptions whose filter passes one of them look at the log again, so a
    commit of checkpoints, leases or another processor's events costs the others nothing. A
    notification that cannot say what was written (another process's commit) wakes every
    subscription. A subscription marked while it reads reads again, so no wake-up is lost
    between its read and its wait. Each subscription waits on a bell of its own, so a commit
    wakes the threads it concerns and no other.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._subscriptions: weakref.WeakSet[CatchUpSubscription] = weakref.WeakSet()
        self._count: int | None = None
        """:meth:`partition_count`, kept from one attach or detach to the next (``None``: not
        counted since)."""
        self.on_change: Callable[[], None] | None = None
        """Called after a subscription is attached (before it reads) or detached: a store
        that listens to other processes for some partitions only re-aims there."""

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called; subscriptions then end."""
        return self._closed

    def attach(self, subscription: CatchUpSubscription) -> None:
        """Notify ``subscription`` from now on (until it stops, or is collected)."""
        with self._lock:
            self._subscriptions.add(subscription)
            self._count = None
        if self.on_change is not None:
            self.on_change()

    def detach(self, subscription: CatchUpSubscription) -> None:
        """Notify ``subscription`` no more."""
        with self._lock:
            self._subscriptions.discard(subscription)
            self._count = None
        if self.on_change is not None:
            self.on_change()

    def key_classes(self, classes: int) -> frozenset[int] | None:
        """Of the partition keys modulo ``classes``, those whose events some subscription may
        want (where its partitions' count divides ``classes`` or ``classes`` divides it, each
        partition's keys fall in classes of their own); ``None``: every one (a subscription
        reads all partitions, or counts them otherwise). Events without a key are not asked
        about.

        >>> notifier = LogNotifier()
        >>> held = Filter(partitions=Partitions(count=4, held=frozenset({1})))
        >>> subscription = CatchUpSubscription(
        ...     read_page=lambda *_: [], head=lambda: None, notifier=notifier, filter=held
        ... )
        >>> sorted(notifier.key_classes(8))
        [1, 5]
        >>> sorted(notifier.key_classes(2))
        [1]
        >>> notifier.key_classes(6) is None
        True
        """
        with self._lock:
            subscriptions = list(self._subscriptions)
        wanted: set[int] = set()
        for subscription in subscriptions:
            held = subscription.partitions
            if held is None:
                return None
            if classes % held.count == 0:
                wanted.update(c for c in range(classes) if c % held.count in held.held)
            elif held.count % classes == 0:
                wanted.update(p % classes for p in held.held)
            else:
                return None
        return frozenset(wanted)

    def notify(self, written: Written | None = None) -> None:
        """Tell the subscriptions that the log may have grown: those whose filter passes an
        event of ``written`` (each event's stream, type and partition key), or every one when
        ``written`` is ``None`` (unknown). ``()``: nothing a subscription reads was written."""
        if written is not None and not written:
            return
        told: Written | _ByType | None = written
        if written is not None and len(written) > _BY_TYPE_PAST:
            told = _ByType(written)
        with self._lock:
            for subscription in self._subscriptions:
                if not subscription.dirty and subscription.wants(told):
                    subscription.mark()

    def notify_gist(self, gist: Gist | None) -> bool:
        """Tell the subscriptions that another process committed what ``gist`` says: those
        that may want one of its events look again (every one when ``gist`` is ``None``:
        unknown). Whether any subscription may want them (marked now or already)."""
        wanted = False
        with self._lock:
            for subscription in self._subscriptions:
                if gist is None or subscription.may_want(gist):
                    wanted = True
                    if not subscription.dirty:
                        subscription.mark()
        return wanted

    def partition_count(self) -> int:
        """The partition count of the subscriptions that read some partitions only, when they
        share one (what a store sums a look up by, :meth:`notify_written`); else 1.

        Counted again only after an attach or a detach (a store asks at each look and each
        commit). A subscription collected unstopped may leave a count it alone had, or a 1
        where it alone differed: a sum by that count still wakes every subscription that may
        want an entry (:meth:`CatchUpSubscription.behind` takes every partition of a count
        not its own)."""
        count = self._count
        if count is None:
            with self._lock:
                counts = {subscription.partition_count for subscription in self._subscriptions}
                found = [count for count in counts if count is not None]
                count = self._count = found[0] if len(found) == 1 else 1
        return count

    def notify_written(self, written: Summed, count: int) -> None:
        """Tell the subscriptions that some process wrote what ``written`` sums up (each event
        type and partition of ``count``, ``None`` for no key, with its last position): those
        that have not read past an entry their filter may take (its types, and its partitions
        when it counts ``count`` of them; the stream is not summed, so not checked) look again.
        For a store that learns of other processes' commits by looking (one look serves every
        subscription, and none reads again what it has read)."""
        if not written:
            return
        with self._lock:
            for subscription in self._subscriptions:
                if not subscription.dirty and subscription.behind(written, count):
                    subscription.mark()

    def close(self) -> None:
        """Wake every waiting subscription for good: the store is closing."""
        with self._lock:
            self._closed = True
            subscriptions = list(self._subscriptions)
        for subscription in subscriptions:
            subscription.ring()


class CatchUpSubscription:
    """History after a position, then one :class:`~decider.stores.protocol.CaughtUp`, then live
    events.

    Guarantees: events come in log order, each once; ``CaughtUp`` comes exactly once, after
    every event that was in the log when the subscription reached the head; :meth:`stop` is safe
    from any thread and makes a blocked :meth:`poll` return ``None`` promptly. One thread
    consumes a subscription (polls or iterates it); any thread may stop it.

    ``probe_interval`` (seconds, or ``None``) bounds how long a wait may last before the head is
    checked again: the backstop for appends made by another process that no wake-up announced.
    With ``announced`` (:data:`Announced`), a probe reads the log only when a row may not have
    been announced; else it moves the position to the head unread (an announced row that this
    subscription wants has marked it, and then it reads).
    """

    def __init__(
        self,
        *,
        read_page: ReadPage,
        head: ReadHead,
        notifier: LogNotifier,
        after_position: int | None = None,
        page_size: int = 500,
        probe_interval: float | None = None,
        head_and_page: ReadHeadAndPage | None = None,
        filter: Filter | None = None,
        announced: Announced | None = None,
    ) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size}")
        if probe_interval is not None and probe_interval <= 0:
            raise ValueError(f"probe_interval must be positive, got {probe_interval}")
        self._read_page = read_page
        self._head = head
        self._head_and_page = head_and_page
        self._notifier = notifier
        self._position = after_position
        self._page_size = page_size
        self._probe_interval = probe_interval
        self._announced = announced
        self._buffer: collections.deque[RecordedEvent | CaughtUp] = collections.deque()
        self._filter = filter
        self._caught_up = False
        self._stopped = False
        self._woken = False
        self._bell = threading.Event()
        """Rung by the notifier, :meth:`wake` and :meth:`stop`; :meth:`poll` waits on it."""
        self.dirty = True
        """Whether the log may hold something new for this subscription (set by the
        notifier, cleared before each read)."""
        notifier.attach(self)

    @property
    def delivered_to(self) -> int | None:
        """The position up to which every event that passes the filter has been delivered,
        once history is read and nothing is queued (``None``: still reading history, or
        events are queued for :meth:`poll`). The events past what was last delivered up to it
        are none of this subscription's: a consumer has nothing left to do before it."""
        if not self._caught_up or self._buffer:
            return None
        return self._position

    @property
    def partitions(self) -> Partitions | None:
        """The partitions whose events it reads (``None``: all)."""
        return None if self._filter is None else self._filter.partitions

    @property
    def partition_count(self) -> int | None:
        """The count of partitions whose some it reads (``None``: it reads them all)."""
        held = self.partitions
        return None if held is None else held.count

    def behind(self, written: Summed, count: int) -> bool:
        """Whether an entry of ``written`` (event type, then partition of ``count`` or ``None``,
        with its last position) is past what this subscription has read and may pass its filter
        (a filter of another partition count takes every partition)."""
        position, pattern = self._position, self._filter
        held = None if pattern is None else pattern.partitions
        if held is not None and held.count != count:
            held = None
        for event_type, partitions in written.items():
            if pattern is not None and not pattern.takes_type(event_type):
                continue
            for partition, at in partitions.items():
                if (position is None or at > position) and (
                    held is None or (held.unknown if partition is None else partition in held.held)
                ):
                    return True
        return False

    def mark(self) -> None:
        """The log may hold something new for this subscription: read it again (the
        notifier's call)."""
        self.dirty = True
        self._bell.set()

    def look_again(self) -> None:
        """Make the next :meth:`poll` pass over what was written since the last read, as a
        probe does: where the store says every row up to the log's head was announced (every
        one this subscription wants has then marked it), the position moves to the head with
        no read; else (or with no such store) it reads the log again. For the consumer's own
        thread, between polls."""
        if self._announced is None:
            self.mark()
        else:
            self._probe()

    def ring(self) -> None:
        """Wake a blocked :meth:`poll` to look at its state (the store closed)."""
        self._bell.set()

    def wants(self, written: Written | _ByType | None) -> bool:
        """Whether an event of ``written`` (``None``: unknown) may pass this subscription's
        filter, its partitions included (it reads the log again if so)."""
        pattern = self._filter
        if written is None or pattern is None:
            return True
        held = pattern.partitions
        if isinstance(written, _ByType):
            return any(
                pattern.takes_type(event_type)
                and any(
                    pattern.matches(stream, event_type) and (held is None or held.passes(key))
                    for stream, _, key in group
                )
                for event_type, group in written.groups.items()
            )
        return any(
            pattern.matches(stream, event_type) and (held is None or held.passes(key))
            for stream, event_type, key in written
        )

    def may_want(self, gist: Gist) -> bool:
        """Whether a commit of what ``gist`` says may hold an event that passes this
        subscription's filter: one of its types passes the filter's types and one of its keys
        (or an unknown one) the filter's partitions (the stream is not checked)."""
        pattern = self._filter
        if pattern is None:
            return True
        held = pattern.partitions
        if held is not None and not (
            (gist.unkeyed and held.unknown) or any(held.passes(key) for key in gist.keys)
        ):
            return False
        return any(pattern.takes_type(event_type) for event_type in gist.types)

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called or the store was closed."""
        return self._ended()

    def _ended(self) -> bool:
        return self._stopped or self._notifier.closed

    def stop(self) -> None:
        """End the subscription; a blocked :meth:`poll` or iteration returns promptly."""
        self._stopped = True
        self._notifier.detach(self)
        self._bell.set()

    def wake(self) -> None:
        """Make the current (or, if none is waiting, the next) wait of :meth:`poll` return
        ``None`` at once, without ending the subscription: the consumer has other work that
        became ready (safe from any thread; a wake that finds items buffered waits for them to
        be taken)."""
        self._woken = True
        self._bell.set()

    def __enter__(self) -> CatchUpSubscription:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __iter__(self) -> Iterator[RecordedEvent | CaughtUp]:
        while (item := self.poll(None)) is not None:
            yield item

    def poll(self, timeout: float | None) -> RecordedEvent | CaughtUp | None:
        """The next item, waiting up to ``timeout`` seconds (``None``: until one comes or the
        subscription stops); ``None`` on timeout or once stopped."""
        buffer = self._buffer
        if buffer and not self._stopped and not self._notifier._closed:
            return buffer.popleft()  # a page in hand: the drain of a batch, event by event
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ended():
            if self._buffer:
                return self._buffer.popleft()
            if self.dirty:
                self.dirty = False  # a commit from now on marks it again
                try:
                    self._fetch()
                except StoreError:
                    self.dirty = True
                    if self._ended():  # the store closed under us: end quietly
                        return None
                    raise
                if self._buffer:
                    continue
            if self._woken:
                self._woken = False
                return None
            wait = self._probe_interval if self._probe_interval is not None else 3600.0
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                wait = min(wait, remaining)
            # Clear, then look once more: a bell rung after the look is kept for the wait.
            self._bell.clear()
            if self._ready():
                continue
            told = self._bell.wait(wait)
            if not told and self._probe_interval is not None and wait >= self._probe_interval:
                self._probe()  # another process may have appended
        return None

    def _probe(self) -> None:
        """Read the log again if a row may not have been announced; else pass over every row up
        to the head unread. Only ever sets :attr:`dirty` (a mark meanwhile is kept)."""
        if self._announced is None:
            self.dirty = True
            return
        try:
            announced, head = self._announced()
        except StoreError:  # the read that follows says what is wrong, or ends quietly
            self.dirty = True
            return
        if not announced:
            self.dirty = True
        elif (
            # Every row up to the head was announced before the look, so one this subscription
            # wants (past its position: committed after its last read began) marked it dirty.
            not self.dirty
            and self._caught_up
            and not self._buffer
            and head is not None
            and (self._position is None or head > self._position)
        ):
            self._position = head

    def _ready(self) -> bool:
        return self.dirty or self._stopped or self._woken or self._notifier.closed

    def _fetch(self) -> None:
        """Read the next page if the log grew past our position; queue CaughtUp when at the head."""
        if self._head_and_page is not None:
            head, page = self._head_and_page(self._position, self._page_size)
        else:
            head, page = self._head(), None
        if head is None or (self._position is not None and head <= self._position):
            self._mark_caught_up()
            return
        if page is None:
            page = self._read_page(self._position, self._page_size)
        self._buffer.extend(page)
        if len(page) < self._page_size:
            # The page was read after the head, and it is short, so it holds every matching
            # event up to the head: skipping the non-matching tail up to the head is safe.
            last = page[-1].position if page else head
            self._position = max(head, last)
            self._mark_caught_up()
        else:
            self._position = page[-1].position
            self.dirty = True  # a full page: more to read, whatever the notifier says

    def _mark_caught_up(self) -> None:
        if not self._caught_up:
            self._caught_up = True
            self._buffer.append(CaughtUp(self._position))
