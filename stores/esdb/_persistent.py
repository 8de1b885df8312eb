"""Consumer groups on EventStoreDB/KurrentDB: persistent subscriptions to ``$all``.

:class:`EsdbConsumerGroup` implements :class:`~decider.stores.consumer_groups.ConsumerGroup`
over the client's persistent-subscription calls, which ``esdbclient`` and ``kurrentdbclient``
name alike: ``create_subscription_to_all``, ``read_subscription_to_all`` (whose subscription
has ``ack`` and ``nack``), ``get_subscription_info``, ``replay_parked_events`` and
``delete_subscription``; only the ``AlreadyExists`` exception is named differently
(:mod:`._client` names it). Client exceptions become the store's in :mod:`._errors`.

- The group's server-side filter is :func:`~decider.stores.esdb.server_filter` of the filter
  asked for, as for catch-up subscriptions; what it lets through that the filter does not
  select is acknowledged by the reader at once, never delivered (an unanswered event would
  come back after the message timeout, and be parked in the end).
- The reader's background thread moves deliveries from the gRPC stream into a bounded queue,
  so :meth:`EsdbGroupReader.poll` can wait with a timeout; answers go back batched by the
  client (every ``max_ack_delay`` seconds or 50 answers).
- A delivery replayed from the parked stream comes with the parked ``$>`` link: it is answered
  by the link's id, and :attr:`~decider.stores.consumer_groups.Delivery.replayed` is set.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from decider.stores.consumer_groups import (
    Delivery,
    GroupInfo,
    GroupSettings,
    Nack,
    ParkedLink,
)
from decider.stores.esdb._client import CLIENT
from decider.stores.esdb._errors import map_error, mapped
from decider.stores.esdb._filters import server_filter
from decider.stores.esdb._reader import QueuedReader
from decider.stores.protocol import Filter, RecordedEvent

_MAX_ACK_DELAY = 0.05
_NACKS = {Nack.RETRY: "retry", Nack.PARK: "park"}


def parked_stream(group: str) -> str:
    """The parked stream of the ``$all`` group ``group``, as the server names it."""
    return "$persistentsubscription-$all::" + group + "-parked"


def _position(text: str) -> int | None:
    """``"C:123/P:123"`` -> 123; ``""`` -> ``None``."""
    commit = text.split("/", maxsplit=1)[0].removeprefix("C:")
    try:
        return int(commit)
    except ValueError:
        return None


def _delivery(item: Any) -> Delivery:
    link = getattr(item, "link", None)
    position = item.commit_position
    if position is None and link is not None:
        position = link.commit_position
    event = RecordedEvent(
        id=item.id,
        type=item.type,
        data=item.data,
        metadata=item.metadata,
        stream=item.stream_name,
        revision=item.stream_position,
        position=position if position is not None else -1,
        recorded_at=item.recorded_at or datetime.fromtimestamp(0, UTC),
    )
    return Delivery(event, item.ack_id, item.retry_count or 0, replayed=link is not None)


class EsdbGroupReader(QueuedReader[Delivery]):
    """One consumer of an :class:`EsdbConsumerGroup` (one ``Read`` call);
    a :class:`~decider.stores.consumer_groups.GroupReader`."""

    _ITEMS = (Delivery,)
    _ENDED = "persistent subscription"
    _THREAD = "esdb-group-reader"

    def __init__(self, subscription: Any, filter: Filter) -> None:
        super().__init__()
        self._subscription = subscription
        self._filter = filter
        self._start()

    def ack(self, delivery: Delivery) -> None:
        """Answer ``delivery``: done."""
        self._answer(lambda: self._subscription.ack(delivery.ack_id))

    def nack(self, delivery: Delivery, action: Nack) -> None:
        """Answer ``delivery``: retry it, or park it."""
        self._answer(lambda: self._subscription.nack(delivery.ack_id, action=_NACKS[action]))

    def _answer(self, send: Any) -> None:
        with mapped():
            send()

    def _cancel(self) -> None:
        # answers given so far are sent first
        with contextlib.suppress(Exception):  # a call that failed already
            self._subscription.stop()

    def _pump(self) -> None:
        for item in self._subscription:
            if not self._filter.matches(item.stream_name, item.type):
                self._subscription.ack(item.ack_id)  # not ours: never to come back
            elif not self._put(_delivery(item)):
                return


class EsdbConsumerGroup:
    """A persistent subscription to ``$all`` named ``name``, over ``filter``'s events;
    a :class:`~decider.stores.consumer_groups.ConsumerGroup`.

    ``client`` gives the store's client, or raises once the store is closed.
    """

    def __init__(self, client: Callable[[], Any], name: str, filter: Filter) -> None:
        self.name = name
        self.filter = filter
        self._open_client = client

    @property
    def _client(self) -> Any:
        return self._open_client()

    def ensure(self, settings: GroupSettings, *, start: int | None) -> bool:
        """Create the group unless it exists (then its own settings stay); whether it was
        created now. ``start``: the first position to deliver (``None``: from the start)."""
        where: dict[str, Any] = {} if start is None else {"commit_position": start}
        try:
            self._client.create_subscription_to_all(
                self.name,
                consumer_strategy=settings.consumer_strategy,
                message_timeout=settings.message_timeout,
                max_retry_count=settings.max_retry_count,
                max_subscriber_count=settings.max_subscriber_count,
                checkpoint_after=settings.checkpoint_after,
                min_checkpoint_count=settings.min_checkpoint_count,
                max_checkpoint_count=settings.max_checkpoint_count,
                **where,
                **server_filter(self.filter),
            )
        except CLIENT.already_exists:
            return False
        except CLIENT.base_error as exc:
            raise map_error(exc) from exc
        return True

    def read(self, buffer_size: int) -> EsdbGroupReader:
        """Connect as a consumer holding at most ``buffer_size`` unanswered deliveries."""
        with mapped():
            subscription = self._client.read_subscription_to_all(
                self.name, event_buffer_size=buffer_size, max_ack_delay=_MAX_ACK_DELAY
            )
        return EsdbGroupReader(subscription, self.filter)

    def info(self) -> GroupInfo:
        """The group's state on the server."""
        with mapped():
            info = self._client.get_subscription_info(self.name)
        return GroupInfo(
            in_flight=int(info.total_in_flight_messages),
            retry_buffer=int(info.retry_buffer_count),
            parked=int(info.parked_message_count),
            last_known_position=_position(info.last_known_event_position),
            checkpoint=_position(info.last_checkpointed_event_position),
            max_retry_count=int(info.max_retry_count),
        )

    def replay_parked(self) -> None:
        """Ask the server to deliver every parked event again."""
        with mapped():
            self._client.replay_parked_events(self.name)

    def parked(self) -> list[ParkedLink]:
        """The parked stream's entries not replayed since, oldest first."""
        stream = parked_stream(self.name)
        try:
            links = self._client.get_stream(stream, resolve_links=False)
        except CLIENT.not_found:
            return []
        except CLIENT.base_error as exc:
            raise map_error(exc, stream) from exc
        found = []
        for link in links:
            revision, _, target = link.data.decode("utf-8", "replace").partition("@")
            with contextlib.suppress(ValueError):
                found.append(ParkedLink(target, int(revision)))
        return found

    def delete(self) -> None:
        """Remove the group."""
        with mapped():
            self._client.delete_subscription(self.name)
