"""Contract tests of partition keys: kept with each event, and reads filtered by them."""

from __future__ import annotations

import attrs
import pytest

from decider.stores.contract._support import Scope, ids_of, new_events, subscribed, take
from decider.stores.protocol import (
    ANY,
    NO_STREAM,
    CaughtUp,
    KeyedStore,
    NewEvent,
    Partitions,
    RecordedEvent,
    StreamAppend,
    TransactionalStore,
)

_KEYS = [0, 1, 2, 3, 4, 5, 6, 7, 2**32 - 1, None]
"""One event of each key: two of each partition of four, the largest key, and none."""

_HELD = Partitions(count=4, held=frozenset({1, 3}))


def _keyed(keys: list[int | None]) -> list[NewEvent]:
    return [
        attrs.evolve(event, partition_key=key)
        for event, key in zip(new_events(len(keys)), keys, strict=True)
    ]


def _keeps_keys(written: list[NewEvent], stored: list[RecordedEvent]) -> bool:
    """Whether the store kept the keys it was given (else it keeps none: every key is
    unknown, and a partitioned read passes every event)."""
    given = [e.partition_key for e in written]
    found = [e.partition_key for e in stored]
    assert found in (given, [None] * len(given)), f"keys stored as {found}, given {given}"
    return found == given


class PartitionContract:
    """Partition keys: a store keeps each event's key (or keeps none: every key unknown), and
    a read or subscription filtered by :class:`Partitions` gets the events of the partitions
    held and those of unknown partition, never another partition's."""

    def test_a_read_by_partitions_gets_those_partitions_and_the_unknown(self, scope: Scope) -> None:
        written = _keyed(_KEYS)
        scope.store.append(scope.stream(), written, NO_STREAM)
        stored = scope.log()
        assert ids_of(stored) == ids_of(written)
        keeps = _keeps_keys(written, stored)
        assert scope.store.read_stream(scope.stream()) == stored
        expected = [e for e in stored if _HELD.passes(e.partition_key)]
        if keeps:
            assert [e.partition_key for e in expected] == [1, 3, 5, 7, 2**32 - 1, None]
        assert scope.log(partitions=_HELD) == expected
        # Paged: the partitions' events only, in log order.
        first = scope.store.read_all(scope.start, 2, scope.filter(partitions=_HELD))
        assert first == expected[:2]
        nothing = Partitions(count=4, held=frozenset())
        unknown = [e for e in stored if nothing.passes(e.partition_key)]
        assert scope.log(partitions=nothing) == unknown

    @pytest.mark.parametrize("key", [-1, 2**32, True, "1", 1.0])
    def test_an_append_with_a_bad_partition_key_writes_nothing(
        self, scope: Scope, key: object
    ) -> None:
        good, bad = _keyed([1, None])
        bad = attrs.evolve(bad, partition_key=key)  # type: ignore[arg-type]  # the store checks it
        with pytest.raises(ValueError, match="a partition key must be"):
            scope.store.append(scope.stream(), [good, bad], NO_STREAM)
        if isinstance(scope.store, TransactionalStore):
            with pytest.raises(ValueError, match="a partition key must be"):
                scope.store.append_batch(
                    [
                        StreamAppend(scope.stream("a"), [good], NO_STREAM),
                        StreamAppend(scope.stream("b"), [bad], NO_STREAM),
                    ]
                )
        assert scope.log() == []

    def test_a_subscription_by_partitions_skips_the_others_live(self, scope: Scope) -> None:
        before = _keyed([1, 2, None])
        scope.store.append(scope.stream("a"), before, NO_STREAM)
        keeps = _keeps_keys(before, scope.log())
        with subscribed(scope.store, scope.start, scope.filter(partitions=_HELD)) as subscription:
            items = take(subscription, 3 if keeps else 4)
            assert isinstance(items[-1], CaughtUp)
            passed = [before[0], before[2]] if keeps else before
            assert [i.id for i in items[:-1] if isinstance(i, RecordedEvent)] == ids_of(passed)
            later = _keyed([6, 10, 3])
            for event in later:
                scope.store.append(scope.stream("b"), [event], ANY)
            passed = [later[2]] if keeps else later
            received = take(subscription, len(passed))
            assert [i.id for i in received if isinstance(i, RecordedEvent)] == ids_of(passed)

    def test_a_read_of_known_keys_only_leaves_the_unknown_out(self, scope: Scope) -> None:
        written = _keyed([1, None, 3, 2])
        scope.store.append(scope.stream(), written, NO_STREAM)
        stored = scope.log()
        if not isinstance(scope.store, KeyedStore):
            assert not _keeps_keys(written, stored)
            return  # it cannot tell: every event passes
        assert _keeps_keys(written, stored)
        known = Partitions(count=4, held=frozenset({1, 3}), unknown=False)
        assert ids_of(scope.log(partitions=known)) == ids_of([written[0], written[2]])
        unknown = Partitions(count=4, held=frozenset(), unknown=True)
        assert ids_of(scope.log(partitions=unknown)) == ids_of([written[1]])
        none = Partitions(count=4, held=frozenset(), unknown=False)
        assert scope.log(partitions=none) == []
