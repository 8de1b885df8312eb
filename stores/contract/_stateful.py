"""Contract: random operations give the same results on a store and on the reference store.

Positions are opaque, so results are compared through each store's own order: a position
becomes its index in the scope's part of the global log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from decider.stores.contract._support import Scope, new_events, open_scope
from decider.stores.errors import WrongExpectedVersion
from decider.stores.memory import MemoryEventStore
from decider.stores.protocol import (
    ANY,
    EXISTS,
    NO_STREAM,
    AppendResult,
    EventStore,
    ExpectedRevision,
    NewEvent,
    RecordedEvent,
)

STREAMS = ("a", "b", "c")
EXPECTATIONS: st.SearchStrategy[ExpectedRevision] = st.one_of(
    st.sampled_from([NO_STREAM, EXISTS, ANY]), st.integers(0, 5)
)
LIMITS = st.none() | st.integers(0, 4)
View = tuple[object, ...]


def _view(scope: Scope, events: Sequence[RecordedEvent]) -> list[View]:
    rank = {e.position: i for i, e in enumerate(scope.log())}
    return [
        (e.id, e.type, e.data, e.metadata, scope.label(e.stream), e.revision, rank[e.position])
        for e in events
    ]


def _outcome(scope: Scope, append: Callable[[], AppendResult]) -> View:
    try:
        result = append()
    except WrongExpectedVersion as conflict:
        return ("conflict", scope.label(conflict.stream), conflict.expected, conflict.actual)
    ranks = [e.position for e in scope.log()]
    return ("ok", result.next_expected_revision, ranks.index(result.position))


def comparison_machine(store: EventStore) -> type[RuleBasedStateMachine]:
    """A state machine that drives ``store`` and a fresh :class:`MemoryEventStore` alike.

    ``store`` is shared by every example (it may be slow to make); each example works in a
    fresh scope of it, so earlier examples are invisible.
    """

    class StoreMatchesReference(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.subject = open_scope(store)
            self.reference = open_scope(MemoryEventStore())
            self.history: list[tuple[str, list[NewEvent], ExpectedRevision]] = []

        def _append(self, label: str, events: list[NewEvent], expected: ExpectedRevision) -> None:
            got, want = (
                _outcome(s, partial(s.store.append, s.stream(label), events, expected))
                for s in (self.subject, self.reference)
            )
            assert got == want
            self.history.append((label, events, expected))

        @rule(
            label=st.sampled_from(STREAMS),
            count=st.integers(1, 3),
            expected=EXPECTATIONS,
            event_type=st.sampled_from(["A", "B"]),
        )
        def append(
            self, label: str, count: int, expected: ExpectedRevision, event_type: str
        ) -> None:
            self._append(label, new_events(count, event_type), expected)

        @precondition(lambda self: bool(self.history))
        @rule(
            data=st.data(),
            variant=st.sampled_from(["same", "expectation", "prefix", "extended", "stream"]),
        )
        def append_again(self, data: st.DataObject, variant: str) -> None:
            label, events, expected = data.draw(st.sampled_from(self.history))
            if variant == "expectation":
                expected = data.draw(EXPECTATIONS)
            elif variant == "prefix":
                events = events[:1]
            elif variant == "extended":
                events = [*events, *new_events(1)]
            elif variant == "stream":
                label = data.draw(st.sampled_from(STREAMS))
            self._append(label, events, expected)

        @rule(label=st.sampled_from(STREAMS), from_revision=st.integers(0, 6), limit=LIMITS)
        def read_stream(self, label: str, from_revision: int, limit: int | None) -> None:
            got, want = (
                _view(s, s.store.read_stream(s.stream(label), from_revision, limit))
                for s in (self.subject, self.reference)
            )
            assert got == want

        @rule(data=st.data(), limit=LIMITS, event_type=st.sampled_from([None, "A"]))
        def read_all_page(self, data: st.DataObject, limit: int | None, event_type: str) -> None:
            length = len(self.reference.log())
            index = data.draw(st.integers(-1, length - 1))
            fields = {} if event_type is None else {"event_types": (event_type,)}
            views = []
            for s in (self.subject, self.reference):
                after = s.start if index < 0 else s.log()[index].position
                views.append(_view(s, s.store.read_all(after, limit, s.filter(**fields))))
            assert views[0] == views[1]

        @invariant()
        def logs_match(self) -> None:
            assert _view(self.subject, self.subject.log()) == _view(
                self.reference, self.reference.log()
            )

    return StoreMatchesReference
