"""Property tests of a workflow with hypothesis: determinism and a total ``evolve``.

Each ``assert_*`` runs a hypothesis test at once, so a plain pytest test only calls it.

Histories are never made up: each run walks a random path through the workflow, feeding
drawn inputs through :func:`decider.handle` as a processor would, so every state and history
checked is one the workflow can reach. In most states most inputs are rejected (``decide``
raises), so each step draws up to :data:`ATTEMPTS` candidates and takes the first one that is
accepted; rejected ones are skipped, as they produce no history (also for a workflow whose
``on_error`` is ``"fail"``: the walk looks for the paths ``decide`` means). A run ends after its
drawn number of steps, at a dead end (no candidate accepted), or one input after the instance
ended. A run in which ``decide`` accepted none of the inputs drawn fails (with the last
exception it raised): it would have checked nothing.

The helpers keep no example database: every workflow shares their inner test, so saved
examples would leak between workflows; a failure prints its falsifying example instead.

hypothesis is imported when a helper is called, so the rest of :mod:`decider.testing`
works without it.
"""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import attrs

from decider.codec import Codec
from decider.commands import Command
from decider.events import TERMINAL_EVENTS, WorkflowEvent
from decider.models import field_types, model_kind
from decider.testing.diff import describe, sequence_diff, value_diff
from decider.workflow import Instance, Workflow, advance, fold, handle, lifecycle, start

if TYPE_CHECKING:
    from hypothesis.strategies import DataObject, SearchStrategy

I = TypeVar("I")  # noqa: E741
S = TypeVar("S")
O = TypeVar("O")  # noqa: E741
T = TypeVar("T")

ATTEMPTS = 20
"""How many inputs a step of a random walk draws at most to find one ``decide`` accepts."""


@attrs.define
class _Tally:
    """What the walks of one property run met: inputs drawn, accepted, the last rejection."""

    drawn: int = 0
    accepted: int = 0
    rejection: Exception | None = None

    def check(self, name: str) -> None:
        """Fail if inputs were drawn and ``decide`` accepted none: the run checked nothing."""
        if self.drawn and not self.accepted:
            raise AssertionError(
                f"{name}: decide accepted none of the {self.drawn} inputs drawn (the last "
                f"raised {self.rejection!r}), so nothing was checked; give strategies of "
                "inputs that decide accepts in the initial state"
            )


def strategy_for(cls: type[T], /, **fields: SearchStrategy[Any]) -> SearchStrategy[T]:
    """A hypothesis strategy for instances of the message class ``cls``: an attrs class, a
    dataclass or a pydantic model.

    Every field is drawn from its annotated type, message classes and unions of them included,
    even when the annotations are strings (``from __future__ import annotations``).
    ``fields`` overrides the strategy of the fields it names, e.g. to draw ids from a few
    values so that inputs meet the instance they belong to. Floats are finite and never
    NaN, so that a drawn message equals itself and fits in JSON.

    >>> from hypothesis import strategies as st
    >>> @attrs.frozen(kw_only=True)
    ... class Ping:
    ...     target: str
    ...     hops: int
    >>> strategy_for(Ping, target=st.just("db"))
    builds(Ping, target=just('db'), hops=integers())
    """
    from hypothesis import strategies as st

    if model_kind(cls) is None:
        raise TypeError(
            f"strategy_for needs an attrs class, a dataclass or a pydantic model, got {cls!r}"
        )
    types_ = field_types(cls)
    unknown = set(fields) - set(types_)
    if unknown:
        raise TypeError(f"{cls.__qualname__} has no field {', '.join(sorted(unknown))}")
    drawn = {
        name: fields[name] if name in fields else _strategy_for_type(tp)
        for name, tp in types_.items()
    }
    return st.builds(cast("Callable[..., T]", cls), **drawn)


def _strategy_for_type(tp: Any) -> SearchStrategy[Any]:
    from hypothesis import strategies as st

    if model_kind(tp) is not None:
        return strategy_for(tp)
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_strategy_for_type(arg) for arg in args))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(_strategy_for_type(args[0]), max_size=5).map(tuple)
    if origin is tuple and args:
        return st.tuples(*(_strategy_for_type(arg) for arg in args))
    if origin is list and args:
        return st.lists(_strategy_for_type(args[0]), max_size=5)
    if origin in (frozenset, set) and args:
        return st.frozensets(_strategy_for_type(args[0]), max_size=5).map(origin)
    if origin is dict and args:
        return st.dictionaries(_strategy_for_type(args[0]), _strategy_for_type(args[1]), max_size=5)
    return st.from_type(tp)


def assert_decide_deterministic(
    workflow: Workflow[I, S, O],
    inputs: SearchStrategy[I],
    *,
    max_inputs: int = 10,
    max_examples: int = 50,
) -> None:
    """Check that ``decide`` and :func:`decider.handle` are deterministic in every state reached.

    Runs a hypothesis test over random walks of up to ``max_inputs`` accepted inputs drawn
    from ``inputs`` (one strategy for any input, e.g. ``st.one_of`` of :func:`strategy_for`).
    Every input drawn, accepted or not, is decided twice against the state reached so far
    and handled twice: both calls must return equal commands and equal events, or raise the
    same error. Fails with hypothesis's smallest falsifying example.
    """
    from hypothesis import given, settings
    from hypothesis import strategies as st

    def twice(instance: Instance[S], input: I) -> None:
        where = f"{input!r} in state {instance.state!r}"
        if not instance.status.terminal:
            _same_twice("decide", where, _decide, workflow, input, instance.state)
        _same_twice("handle", where, handle, workflow, instance, input)

    tally = _Tally()

    @settings(max_examples=max_examples, deadline=None, database=None)
    @given(st.data())
    def decide_is_deterministic(data: st.DataObject) -> None:
        _walk(workflow, data, inputs, max_inputs, check=twice, tally=tally)

    decide_is_deterministic()
    tally.check("assert_decide_deterministic")


def assert_fold_total(
    workflow: Workflow[I, S, O],
    inputs: SearchStrategy[I],
    *,
    codec: Codec | None = None,
    max_inputs: int = 10,
    max_examples: int = 50,
) -> None:
    """Check that ``evolve`` never raises on a history the workflow itself produces.

    Runs a hypothesis test over random walks of up to ``max_inputs`` accepted inputs drawn
    from ``inputs``, folding each input's events as they are produced. Folding must not
    raise, must leave the initial state as it was, and folding the whole history at once
    must give the state and lifecycle built step by step (it would not if ``evolve``
    depended on anything but its arguments). With a ``codec``, every event is encoded and
    decoded before it is folded, as a processor reading the stream back would see it.
    """
    from hypothesis import given, settings
    from hypothesis import strategies as st

    pristine = copy.deepcopy(workflow.initial_state)

    tally = _Tally()

    @settings(max_examples=max_examples, deadline=None, database=None)
    @given(st.data())
    def fold_is_total(data: st.DataObject) -> None:
        instance, history = _walk(workflow, data, inputs, max_inputs, codec=codec, tally=tally)
        folded = _fold(workflow, history)
        _check(value_diff("state after folding the whole history", instance.state, folded), history)
        _check(value_diff("lifecycle", instance.status, lifecycle(history)), history)
        changed = value_diff(
            "initial state (evolve changed it in place)", pristine, workflow.initial_state
        )
        _check(changed, history)

    fold_is_total()
    tally.check("assert_fold_total")


def _walk(
    workflow: Workflow[I, S, O],
    data: DataObject,
    inputs: SearchStrategy[I],
    max_inputs: int,
    *,
    codec: Codec | None = None,
    check: Callable[[Instance[S], I], None] | None = None,
    tally: _Tally | None = None,
) -> tuple[Instance[S], list[WorkflowEvent[I, O]]]:
    """A random path through the workflow: the instance at its end and its history."""
    from hypothesis import strategies as st

    instance, history = start(workflow), list[WorkflowEvent[I, O]]()
    # Rejected inputs are skipped, never recorded as failures: the walk follows what decide means.
    skipping = attrs.evolve(workflow, on_error="skip")
    steps = data.draw(st.integers(min_value=0, max_value=max_inputs), label="steps")
    for _ in range(steps):
        if instance.status.terminal and not isinstance(history[-1], TERMINAL_EVENTS):
            break  # one input after the end shows it ignored; more would show nothing new
        events = _accepted(skipping, instance, data, inputs, check, tally=tally or _Tally())
        if events is None:
            break
        if codec is not None:
            events = [codec.decode_event(*codec.encode_event(event)) for event in events]
        history.extend(events)
        instance = _fold_step(workflow, instance, events, history)
    return instance, history


def _accepted(
    workflow: Workflow[I, S, O],
    instance: Instance[S],
    data: DataObject,
    inputs: SearchStrategy[I],
    check: Callable[[Instance[S], I], None] | None,
    *,
    tally: _Tally,
) -> list[WorkflowEvent[I, O]] | None:
    """The events of the first of up to ``ATTEMPTS`` drawn inputs that ``decide`` accepts."""
    for _ in range(ATTEMPTS):
        input = data.draw(inputs, label="input")
        tally.drawn += 1
        if check is not None:
            check(instance, input)
        try:
            events = handle(workflow, instance, input)
        except Exception as exc:
            tally.rejection = exc
            continue  # rejected: it produces no history
        tally.accepted += 1
        return events
    return None


def _fold_step(
    workflow: Workflow[I, S, O],
    instance: Instance[S],
    events: Sequence[WorkflowEvent[I, O]],
    history: Sequence[WorkflowEvent[I, O]],
) -> Instance[S]:
    try:
        return advance(workflow, instance, events)
    except Exception as exc:
        raise AssertionError(
            f"evolve raised {exc!r} on a history the workflow produced:\n{describe(history)}"
        ) from exc


def _fold(workflow: Workflow[I, S, O], history: Sequence[WorkflowEvent[I, O]]) -> S:
    try:
        return fold(workflow, history)
    except Exception as exc:
        raise AssertionError(
            f"fold raised {exc!r} on a history the workflow produced:\n{describe(history)}"
        ) from exc


def _check(failure: str | None, history: Sequence[object]) -> None:
    if failure is not None:
        raise AssertionError(f"{failure}\nhistory:\n{describe(history)}")


def _decide(workflow: Workflow[I, S, O], input: I, state: S) -> list[Command[O]]:
    return list(workflow.decide(input, state))


def _same_twice(
    what: str, where: str, call: Callable[..., list[T]], *args: Any
) -> list[T] | Exception:
    first, second = _attempt(call, *args), _attempt(call, *args)
    if isinstance(first, Exception) or isinstance(second, Exception):
        if type(first) is not type(second) or str(first) != str(second):
            raise AssertionError(
                f"{what} is not deterministic for {where}: first {first!r}, then {second!r}"
            )
        return first
    failure = sequence_diff(f"{what} results", first, second)
    if failure is not None:
        raise AssertionError(f"{what} is not deterministic for {where}:\n{failure}")
    return first


def _attempt(call: Callable[..., list[T]], *args: Any) -> list[T] | Exception:
    try:
        return call(*args)
    except Exception as exc:
        return exc
