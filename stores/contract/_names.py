"""Contract tests of names: what a store cannot hold is an :class:`InvalidName`, never an
outage, a driver's error or a half-written append (see :mod:`decider.stores.names`)."""

from __future__ import annotations

import pytest

from decider.stores.contract._support import Scope, new_events
from decider.stores.errors import InvalidName, PermanentStoreError
from decider.stores.names import CHECKPOINT, EVENT_TYPE, STREAM, NameRules
from decider.stores.protocol import (
    ANY,
    NO_STREAM,
    CheckpointStore,
    EventStore,
    StreamAppend,
    TransactionalStore,
)

_BAD_NAMES = [
    pytest.param("\ud800", "lone surrogate", id="lone-surrogate"),
    pytest.param("x\udfffy", "lone surrogate", id="low-surrogate"),
    pytest.param("a\x00b", "NUL", id="nul"),
]


def _rules(store: EventStore) -> NameRules:
    rules = getattr(store, "name_rules", None)
    assert isinstance(rules, NameRules), f"{type(store).__name__} declares no name_rules"
    return rules


class NameContract:
    """Names a store cannot hold raise :class:`InvalidName` (permanent) and write nothing;
    names it can hold, however odd, round-trip."""

    @pytest.mark.parametrize(("bad", "reason"), _BAD_NAMES)
    def test_a_stream_name_the_store_cannot_hold_is_invalid(
        self, scope: Scope, bad: str, reason: str
    ) -> None:
        stream = scope.stream(bad)
        with pytest.raises(InvalidName, match=reason) as raised:
            scope.store.append(stream, new_events(1), NO_STREAM)
        assert isinstance(raised.value, PermanentStoreError)
        assert (raised.value.kind, raised.value.name) == (STREAM, stream)
        with pytest.raises(InvalidName, match=reason):
            scope.store.read_stream(stream)
        assert scope.log() == []

    @pytest.mark.parametrize(("bad", "reason"), _BAD_NAMES)
    def test_an_event_type_the_store_cannot_hold_is_invalid(
        self, scope: Scope, bad: str, reason: str
    ) -> None:
        good, odd = new_events(1)[0], new_events(1, event_type=f"Odd{bad}")[0]
        with pytest.raises(InvalidName, match=reason) as raised:
            scope.store.append(scope.stream(), [good, odd], NO_STREAM)
        assert raised.value.kind == EVENT_TYPE
        assert scope.store.read_stream(scope.stream()) == []
        assert scope.log() == []

    @pytest.mark.parametrize(("bad", "reason"), _BAD_NAMES)
    def test_a_checkpoint_name_the_store_cannot_hold_is_invalid(
        self, scope: Scope, bad: str, reason: str
    ) -> None:
        store = scope.store
        if not isinstance(store, CheckpointStore):
            pytest.skip(f"{type(store).__name__} is not a CheckpointStore")
        with pytest.raises(InvalidName, match=reason) as raised:
            store.save_checkpoint(scope.stream(bad), 1)
        assert raised.value.kind == CHECKPOINT
        with pytest.raises(InvalidName, match=reason):
            store.load_checkpoint(scope.stream(bad))

    def test_a_batch_with_one_invalid_name_writes_nothing(self, scope: Scope) -> None:
        store = scope.store
        if not isinstance(store, TransactionalStore) or not isinstance(store, CheckpointStore):
            pytest.skip(f"{type(store).__name__} is not a transactional checkpoint store")
        appends = [
            StreamAppend(scope.stream("good"), new_events(1), NO_STREAM),
            StreamAppend(scope.stream("bad\ud800"), new_events(1), NO_STREAM),
        ]
        with pytest.raises(InvalidName):
            store.append_batch(appends, checkpoints=[(scope.stream("cp"), 5)])
        assert scope.log() == []
        assert store.load_checkpoint(scope.stream("cp")) is None

    def test_unicode_names_round_trip(self, scope: Scope) -> None:
        stream = scope.stream("Prüfung-東京-🎉-\u200b")
        [event] = new_events(1, event_type="Geprüft-✓")
        scope.store.append(stream, [event], NO_STREAM)
        [stored] = scope.store.read_stream(stream)
        assert (stored.stream, stored.type, stored.id) == (stream, "Geprüft-✓", event.id)

    def test_the_longest_name_the_store_declares_round_trips(self, scope: Scope) -> None:
        limit = _rules(scope.store).max_name_bytes
        if limit is None:
            pytest.skip(f"{type(scope.store).__name__} declares no name length limit")
        prefix = scope.stream()
        # Three-byte characters, then ASCII to land on the limit exactly.
        body = "東" * ((limit - len(prefix.encode())) // 3)
        longest = prefix + body + "x" * (limit - len((prefix + body).encode()))
        assert len(longest.encode()) == limit
        scope.store.append(longest, new_events(2), NO_STREAM)
        scope.store.append(longest, new_events(1), ANY)
        assert [e.revision for e in scope.store.read_stream(longest)] == [0, 1, 2]
        too_long = longest + "x"
        with pytest.raises(InvalidName, match=f"at most {limit}"):
            scope.store.append(too_long, new_events(1), NO_STREAM)
        store = scope.store
        if isinstance(store, CheckpointStore):
            store.save_checkpoint(longest, 7)
            assert store.load_checkpoint(longest) == 7
            with pytest.raises(InvalidName, match=f"at most {limit}"):
                store.save_checkpoint(too_long, 7)
