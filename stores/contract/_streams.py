"""Contract tests of appends and stream reads: revisions, conflicts, idempotency."""

from __future__ import annotations

from datetime import timedelta

import pytest

from decider.stores.contract._support import Scope, ids_of, new_events
from decider.stores.errors import WrongExpectedVersion
from decider.stores.protocol import ANY, EXISTS, NO_STREAM, ExpectedRevision, NewEvent


class StreamContract:
    """Appends with expected revisions, stream reads, and the idempotent-append rule."""

    def test_append_to_new_stream(self, scope: Scope) -> None:
        stream = scope.stream()
        [event] = new_events(1, metadata=b'{"m":1}')
        result = scope.store.append(stream, [event], NO_STREAM)
        assert result.next_expected_revision == 0
        assert result.position > scope.start
        [stored] = scope.store.read_stream(stream)
        assert (stored.id, stored.type, stored.data, stored.metadata) == (
            event.id,
            event.type,
            event.data,
            event.metadata,
        )
        assert (stored.stream, stored.revision, stored.position) == (stream, 0, result.position)
        assert stored.recorded_at.utcoffset() == timedelta(0), "recorded_at must be aware UTC"

    def test_binary_data_and_empty_metadata_round_trip(self, scope: Scope) -> None:
        event = NewEvent(id=new_events(1)[0].id, type="Raw", data=b"\x00\xff\x10binary")
        scope.store.append(scope.stream(), [event], ANY)
        [stored] = scope.store.read_stream(scope.stream())
        assert (stored.data, stored.metadata) == (b"\x00\xff\x10binary", b"")

    def test_expected_revisions_that_hold(self, scope: Scope) -> None:
        stream = scope.stream()
        assert scope.store.append(stream, new_events(2), ANY).next_expected_revision == 1
        assert scope.store.append(stream, new_events(1), EXISTS).next_expected_revision == 2
        assert scope.store.append(stream, new_events(3), 2).next_expected_revision == 5
        assert scope.store.append(stream, new_events(1), ANY).next_expected_revision == 6
        assert [e.revision for e in scope.store.read_stream(stream)] == list(range(7))

    @pytest.mark.parametrize(
        ("existing", "expected", "actual"),
        [
            pytest.param(2, NO_STREAM, 1, id="no_stream-on-existing"),
            pytest.param(0, EXISTS, None, id="exists-on-missing"),
            pytest.param(3, 1, 2, id="int-behind"),
            pytest.param(1, 4, 0, id="int-ahead"),
            pytest.param(0, 0, None, id="int-on-missing"),
        ],
    )
    def test_conflicts_name_the_actual_revision_and_write_nothing(
        self, scope: Scope, existing: int, expected: ExpectedRevision, actual: int | None
    ) -> None:
        stream = scope.stream()
        if existing:
            scope.store.append(stream, new_events(existing), NO_STREAM)
        before = scope.log()
        with pytest.raises(WrongExpectedVersion) as caught:
            scope.store.append(stream, new_events(2), expected)
        assert (caught.value.stream, caught.value.expected, caught.value.actual) == (
            stream,
            expected,
            actual,
        )
        assert scope.log() == before

    def test_multi_event_append_is_atomic(self, scope: Scope) -> None:
        stream = scope.stream()
        scope.store.append(stream, new_events(1), NO_STREAM)
        with pytest.raises(WrongExpectedVersion):
            scope.store.append(stream, new_events(5), 3)
        assert len(scope.store.read_stream(stream)) == 1
        batch = new_events(5)
        result = scope.store.append(stream, batch, 0)
        stored = scope.store.read_stream(stream)
        assert ids_of(stored[1:]) == ids_of(batch)
        assert [e.revision for e in stored] == [0, 1, 2, 3, 4, 5]
        assert result == type(result)(next_expected_revision=5, position=stored[-1].position)
        positions = [e.position for e in stored]
        assert positions == sorted(set(positions))

    def test_read_your_writes(self, scope: Scope) -> None:
        for index in range(5):
            event = new_events(1)
            result = scope.store.append(scope.stream(), event, index - 1 if index else NO_STREAM)
            assert scope.store.read_stream(scope.stream())[-1].id == event[0].id
            assert scope.log()[-1].position == result.position

    def test_read_stream_from_revision_and_limit(self, scope: Scope) -> None:
        stream = scope.stream()
        events = new_events(6)
        scope.store.append(stream, events, NO_STREAM)
        read = scope.store.read_stream
        assert ids_of(read(stream)) == ids_of(events)
        assert ids_of(read(stream, 2)) == ids_of(events[2:])
        assert ids_of(read(stream, 1, 3)) == ids_of(events[1:4])
        assert ids_of(read(stream, 4, 10)) == ids_of(events[4:])
        assert read(stream, 0, 0) == []
        assert read(stream, 6) == []
        assert read(stream, 100, 5) == []

    def test_missing_stream_reads_as_empty(self, scope: Scope) -> None:
        assert scope.store.read_stream(scope.stream("never-written")) == []
        assert scope.store.read_stream(scope.stream("never-written"), 3, 2) == []

    def test_streams_are_independent(self, scope: Scope) -> None:
        scope.store.append(scope.stream("a"), new_events(2), NO_STREAM)
        scope.store.append(scope.stream("b"), new_events(1), NO_STREAM)
        scope.store.append(scope.stream("a"), new_events(1), 1)
        assert [e.revision for e in scope.store.read_stream(scope.stream("a"))] == [0, 1, 2]
        assert [e.revision for e in scope.store.read_stream(scope.stream("b"))] == [0]

    @pytest.mark.parametrize("expected", [NO_STREAM, ANY], ids=str)
    def test_idempotent_reappend_to_new_stream(
        self, scope: Scope, expected: ExpectedRevision
    ) -> None:
        stream = scope.stream()
        events = new_events(3)
        first = scope.store.append(stream, events, expected)
        log = scope.log()
        assert scope.store.append(stream, events, expected) == first
        assert scope.log() == log

    @pytest.mark.parametrize("expected", [1, EXISTS, ANY], ids=str)
    def test_idempotent_reappend_to_existing_stream(
        self, scope: Scope, expected: ExpectedRevision
    ) -> None:
        stream = scope.stream()
        scope.store.append(stream, new_events(2), NO_STREAM)
        events = new_events(2)
        first = scope.store.append(stream, events, expected)
        assert first.next_expected_revision == 3
        log = scope.log()
        assert scope.store.append(stream, events, expected) == first
        assert scope.log() == log

    def test_idempotent_reappend_after_the_stream_moved_on(self, scope: Scope) -> None:
        stream = scope.stream()
        events = new_events(2)
        first = scope.store.append(stream, events, NO_STREAM)
        scope.store.append(stream, new_events(3), 1)
        log = scope.log()
        assert scope.store.append(stream, events, NO_STREAM) == first
        assert scope.store.append(stream, events[:1], NO_STREAM).next_expected_revision == 0
        assert scope.log() == log

    @pytest.mark.parametrize("shape", ["later-id-differs", "runs-past-the-end", "first-id-differs"])
    def test_partial_overlap_is_a_conflict(self, scope: Scope, shape: str) -> None:
        stream = scope.stream()
        events = new_events(2)
        scope.store.append(stream, events, NO_STREAM)
        retry = {
            "later-id-differs": [events[0], *new_events(1)],
            "runs-past-the-end": [*events, *new_events(1)],
            "first-id-differs": [*new_events(1), events[1]],
        }[shape]
        log = scope.log()
        with pytest.raises(WrongExpectedVersion) as caught:
            scope.store.append(stream, retry, NO_STREAM)
        assert caught.value.actual == 1
        assert scope.log() == log

    @pytest.mark.parametrize("expected", [ANY, EXISTS], ids=str)
    def test_partial_overlap_without_revision_is_a_conflict(
        self, scope: Scope, expected: ExpectedRevision
    ) -> None:
        stream = scope.stream()
        events = new_events(2)
        scope.store.append(stream, events, NO_STREAM)
        log = scope.log()
        with pytest.raises(WrongExpectedVersion):
            scope.store.append(stream, [events[1], *new_events(1)], expected)
        assert scope.log() == log
        fresh = new_events(2)
        assert scope.store.append(stream, fresh, expected).next_expected_revision == 3
        assert ids_of(scope.store.read_stream(stream)) == ids_of(events) + ids_of(fresh)

    @pytest.mark.parametrize("expected", [ANY, EXISTS], ids=str)
    def test_one_event_without_revision_written_once(
        self, scope: Scope, expected: ExpectedRevision
    ) -> None:
        """One event at a time (stores may check it in the insert itself): written after the
        stream's end, found again where it is stored (revision 0 or later), and EXISTS on a
        missing stream is a conflict that writes nothing."""
        stream = scope.stream()
        with pytest.raises(WrongExpectedVersion):
            scope.store.append(stream, new_events(1), EXISTS)
        assert scope.store.read_stream(stream) == []
        head = new_events(1)
        at_zero = scope.store.append(stream, head, ANY)
        assert at_zero.next_expected_revision == 0
        event = new_events(1)
        first = scope.store.append(stream, event, expected)
        assert first.next_expected_revision == 1
        log = scope.log()
        assert scope.store.append(stream, event, expected) == first
        assert scope.store.append(stream, head, expected) == at_zero
        assert scope.log() == log
        assert scope.store.append(stream, new_events(1), expected).next_expected_revision == 2

    def test_an_id_stored_twice_counts_at_its_latest_revision(self, scope: Scope) -> None:
        stream = scope.stream()
        event = new_events(1)
        scope.store.append(stream, event, NO_STREAM)
        second = scope.store.append(stream, event, 0)  # an explicit revision writes it again
        assert second.next_expected_revision == 1
        log = scope.log()
        assert scope.store.append(stream, event, ANY) == second
        assert scope.store.append(stream, event, EXISTS) == second
        assert scope.log() == log
