"""State diagrams of a workflow, explored from its pure functions, and paths drawn on them.

A workflow is a state machine written as ``decide`` and ``evolve``, so its graph can be found
by running them: :func:`explore` starts from ``initial_state``, feeds inputs generated from the
workflow's input types (the hypothesis strategies of :func:`decider.testing.strategy_for`,
drawn with a fixed seed, so the same code always gives the same diagram) through
:func:`decider.handle`, and records every transition between state *types*: the edge label is
the input type and the kinds of command decided (``PoliceReportPublished /
Send(GenerateTrafficFineSystemNumber)``). An instance that reaches a terminal lifecycle status
(any status but not started and running) marks its state as terminal, with each way it was seen
to end there: a state that instances reach by ``Complete`` and by ``Fail`` ends as
``completed`` and as ``failed``, and both are drawn.

Exploration keeps drawing inputs until every input type was accepted in every state type it
reached (or the inputs drawn, or the ``budget`` of calls, run out). An input that ``decide``
rejects by raising (a command it builds refusing its arguments included) is dropped, not drawn.
What it could not do is reported on the diagram (:attr:`Diagram.gaps`): each input type no
value of which a reached state accepted, with the exception the last one raised, and whether
the budget ran out.

:func:`path` gives the transitions one recorded history took, :func:`observed` counts those of
many histories, and :func:`path_classes` styles a diagram's states as past, current, future or
error for one instance. :func:`to_mermaid` writes any of them as a Mermaid
``stateDiagram-v2``.

WARNING: exploration finds what the generated inputs reach. A transition behind a condition
that random values rarely meet (an id equal to one in the state, a string with a given value)
may be missing; :func:`explore` is bounded (``draws`` inputs per type, ``max_per_state``
distinct states per state type, ``budget`` calls of ``decide``), never exhaustive. Give it a
strategy for an input type (``strategies``) to steer the values it draws.

hypothesis is imported when :func:`explore` runs (the ``testing`` or ``console`` extra).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import attrs

from decider.events import Began, Ignored, InitiatedBy, Received, WorkflowEvent
from decider.kinds import Kind
from decider.workflow import Instance, Lifecycle, Workflow, advance, handle, start

__all__ = [
    "CURRENT",
    "ERROR",
    "FUTURE",
    "MERMAID_STYLES",
    "PAST",
    "Diagram",
    "Gap",
    "Transition",
    "end_kinds",
    "explore",
    "label",
    "observed",
    "path",
    "path_classes",
    "state_name",
    "to_mermaid",
    "with_path",
]

I = TypeVar("I")  # noqa: E741
S = TypeVar("S")
O = TypeVar("O")  # noqa: E741

_LIVE = (Lifecycle.NOT_STARTED, Lifecycle.RUNNING)
# How a recorded command event reads in a label: in the imperative, as decide wrote it. An event
# kind not listed (one added later) shows under its own name.
_IMPERATIVE: dict[str, str] = {
    Kind.SENT: "Send",
    Kind.PUBLISHED: "Publish",
    Kind.REPLIED: "Reply",
    Kind.SCHEDULED: "Schedule",
    Kind.COMPLETED: "Complete",
    Kind.FAILED: "Fail",
    Kind.CANCELLED: "Cancel",
}
_ERROR_CHARS = 300
# The order end kinds are listed in.
_ENDS = tuple(status.value for status in Lifecycle if status not in _LIVE)

PAST = "past"
"""The class :func:`path_classes` gives a state the instance went through."""
CURRENT = "current"
"""The class of the state the instance is in now."""
FUTURE = "future"
"""The class of a state the instance may still reach."""
ERROR = "error"
"""The class of a state where the instance failed or a command of it was parked."""

MERMAID_STYLES: Mapping[str, str] = {
    PAST: "fill:#e3eefc,stroke:#5b7fb5,color:#1d3557",
    CURRENT: "fill:#2a9d8f,stroke:#1d6b61,color:#ffffff,font-weight:bold",
    FUTURE: "fill:#ffffff,stroke:#aaaaaa,color:#777777,stroke-dasharray:4 3",
    ERROR: "fill:#e76f51,stroke:#9b2c17,color:#ffffff,font-weight:bold",
}
"""The Mermaid ``classDef`` of each path class."""


@attrs.frozen
class Transition:
    """A move between two state types, and what caused it (``input type / commands``)."""

    source: str
    target: str
    label: str


@attrs.frozen
class Gap:
    """What exploring could not do: no drawn value of ``input_type`` was accepted in a state
    of type ``state`` (``tried`` values were; ``error`` is what the last one raised), or, with
    ``state`` empty, no value of ``input_type`` could be drawn at all."""

    state: str
    input_type: str
    tried: int
    error: str

    def __str__(self) -> str:
        if not self.state:
            return f"no {self.input_type} could be drawn: {self.error}"
        return (
            f"{self.state}: no {self.input_type} accepted ({self.tried} drawn; "
            f"the last raised {self.error})"
        )


@attrs.frozen
class Diagram:
    """A workflow's state types and transitions.

    ``states`` in the order they were found, ``initial`` first; ``terminals`` maps each state
    type an instance ended in to every lifecycle status it ended with there, in the order
    ``completed``, ``failed``, ``cancelled``; ``counts`` (observed diagrams only) says how
    often each transition was taken. An explored diagram says what exploring could not do:
    ``gaps``, and ``exhausted`` if its budget ran out before it was done.
    """

    workflow: str
    initial: str
    states: tuple[str, ...]
    transitions: tuple[Transition, ...]
    terminals: Mapping[str, tuple[str, ...]]
    counts: Mapping[Transition, int] = attrs.field(factory=dict)
    gaps: tuple[Gap, ...] = ()
    exhausted: bool = False

    def edges(self) -> set[tuple[str, str]]:
        """The ``(source, target)`` pairs of the transitions, labels aside."""
        return {(t.source, t.target) for t in self.transitions}


def state_name(state: object) -> str:
    """The name a state shows under in a diagram: its type's name.

    >>> state_name(3)
    'int'
    """
    return type(state).__name__


def label(input: object, events: Sequence[WorkflowEvent[Any, Any]]) -> str:
    """The label of the transition an input and the events it added make.

    >>> from decider import Completed, Sent
    >>> label("report", [InitiatedBy("report"), Sent(1.5), Completed()])
    'str / Send(float), Complete'
    >>> label(3, [Received(3)])
    'int / -'
    """
    commands = []
    for event in events:
        if isinstance(event, (Began, InitiatedBy, Received, Ignored)):
            continue
        kind = type(event).__name__
        shown = _IMPERATIVE.get(kind, kind)
        carried = getattr(event, "message", None)
        commands.append(f"{shown}({type(carried).__name__})" if carried is not None else shown)
    return f"{type(input).__name__} / {', '.join(commands) or '-'}"


class _Builder:
    """Collects states, transitions and counts in the order they are found."""

    def __init__(self, workflow: str, initial: str) -> None:
        self.workflow = workflow
        self.initial = initial
        self.states: dict[str, None] = {initial: None}
        self.transitions: dict[Transition, int] = {}
        self.terminals: dict[str, set[str]] = {}

    def add(self, transition: Transition, status: Lifecycle) -> None:
        self.states.setdefault(transition.source)
        self.states.setdefault(transition.target)
        self.transitions[transition] = self.transitions.get(transition, 0) + 1
        self.end(transition.target, status)

    def end(self, state: str, status: Lifecycle) -> None:
        if status not in _LIVE:
            self.terminals.setdefault(state, set()).add(status.value)

    def build(self, *, counted: bool, gaps: Sequence[Gap] = (), exhausted: bool = False) -> Diagram:
        return Diagram(
            workflow=self.workflow,
            initial=self.initial,
            states=tuple(self.states),
            transitions=tuple(self.transitions),
            terminals={name: end_kinds(kinds) for name, kinds in self.terminals.items()},
            counts=dict(self.transitions) if counted else {},
            gaps=tuple(gaps),
            exhausted=exhausted,
        )


def end_kinds(kinds: Iterable[str]) -> tuple[str, ...]:
    """Lifecycle status values as a diagram lists them: completed, failed, cancelled.

    >>> end_kinds({"cancelled", "completed"})
    ('completed', 'cancelled')
    """
    found = set(kinds)
    return tuple(kind for kind in _ENDS if kind in found) + tuple(sorted(found - set(_ENDS)))


def explore(
    workflow: Workflow[I, S, O],
    input_types: Iterable[type[Any]],
    *,
    seed: int = 0,
    examples: int = 200,
    max_per_state: int = 8,
    budget: int = 200_000,
    strategies: Mapping[type[Any], Any] | None = None,
) -> Diagram:
    """The state diagram reachable from ``workflow.initial_state`` with generated inputs.

    For each input type, up to ``examples`` distinct values are drawn once, with the given
    ``seed``, from ``strategies[type]`` (a hypothesis strategy) where given, else from
    :func:`decider.testing.strategy_for`. A breadth-first search then handles every value in
    every state reached (up to ``max_per_state`` distinct states of one type are explored
    further), at most ``budget`` times in all. Where a state type refused an input type in
    every state of it explored, up to ``32 * max_per_state`` more states of that type are tried
    with a few values of that type: a state may refuse for what it holds. An input ``decide``
    rejects (raises, a command it builds refusing its arguments included) makes no transition:
    it is dropped, and exploring goes on with the next value. ``decide`` runs as under
    ``on_error="skip"``, so a rejected input never shows as a failure.

    The result reports what could not be done (:attr:`Diagram.gaps`, :attr:`Diagram.exhausted`).
    Deterministic: the same workflow, types and arguments give the same diagram.
    """
    if workflow.on_error != "skip":
        workflow = attrs.evolve(workflow, on_error="skip")
    chosen = dict(strategies or {})
    pools: list[tuple[str, list[Any]]] = []
    gaps: list[Gap] = []
    for cls in input_types:
        try:
            pools.append((cls.__name__, _examples(cls, examples, seed, chosen.get(cls))))
        except ImportError:
            raise
        except Exception as exc:  # a type hypothesis cannot draw: reported, the rest explored
            gaps.append(Gap("", cls.__name__, 0, _error_text(exc)))
    search = _Search(workflow, pools, budget)
    seen: dict[str, list[Instance[S]]] = {}
    reserve: dict[str, list[Instance[S]]] = {}
    queue: deque[Instance[S]] = deque([start(workflow)])
    while not search.exhausted:
        if queue:
            instance, only = queue.popleft(), None
        else:
            # Every state found was explored. A state type where an input type was never
            # accepted may refuse it for what the state holds: try more states of that type.
            picked = _refused_here(reserve, search)
            if picked is None:
                break
            instance, only = picked
        for after in search.step(instance, only):
            target = state_name(after.state)
            if _is_new(seen, target, after, max_per_state):
                queue.append(after)
            elif not _known(seen, target, after):
                _is_new(reserve, target, after, max_per_state * _RESERVE)  # kept for later
    gaps += search.gaps()
    return search.builder.build(counted=False, gaps=gaps, exhausted=search.exhausted)


_RESERVE = 32
"""States of one type kept in reserve: this many times ``max_per_state``."""
_RESERVE_DRAWS = 25
"""Values of an input type tried on a state from the reserve."""


class _Search(Generic[I, S, O]):
    """Handles drawn inputs in states, recording transitions, what each state type accepted,
    and what refused inputs raised, within a budget of calls."""

    def __init__(
        self, workflow: Workflow[I, S, O], pools: list[tuple[str, list[Any]]], budget: int
    ) -> None:
        self.workflow = workflow
        self.pools = pools
        self.budget = budget
        self.calls = 0
        self.exhausted = False
        self.builder = _Builder(workflow.name, state_name(workflow.initial_state))
        self.tried: dict[tuple[str, str], int] = {}
        self.accepted: set[tuple[str, str]] = set()
        self.errors: dict[tuple[str, str], str] = {}

    def step(self, instance: Instance[S], only: set[str] | None) -> list[Instance[S]]:
        """Every drawn value of every input type (of ``only``, a few values each) handled in
        ``instance``; the live instances it led to."""
        source = state_name(instance.state)
        found: list[Instance[S]] = []
        for type_name, pool in self.pools:
            if only is not None and type_name not in only:
                continue
            key = (source, type_name)
            for value in pool if only is None else pool[:_RESERVE_DRAWS]:
                if self.calls == self.budget:
                    self.exhausted = True
                    return found
                self.calls += 1
                self.tried[key] = self.tried.get(key, 0) + 1
                try:
                    events = handle(self.workflow, instance, value)
                    after = advance(self.workflow, instance, events)
                except Exception as exc:
                    self.errors[key] = _error_text(exc)  # refused here: dropped, no transition
                    continue
                self.accepted.add(key)
                target = state_name(after.state)
                self.builder.add(Transition(source, target, label(value, events)), after.status)
                if after.status in _LIVE:
                    found.append(after)
        return found

    def refused(self, state: str) -> set[str]:
        """The input types tried in states of type ``state`` and never accepted there."""
        return {t for (s, t) in self.tried if s == state and (s, t) not in self.accepted}

    def gaps(self) -> list[Gap]:
        """Every (state type, input type) tried and never accepted, with the last error."""
        return [
            Gap(state, type_name, count, self.errors.get((state, type_name), "nothing"))
            for (state, type_name), count in self.tried.items()
            if (state, type_name) not in self.accepted
        ]


def _refused_here(
    reserve: dict[str, list[Instance[S]]], search: _Search[Any, S, Any]
) -> tuple[Instance[S], set[str]] | None:
    """A state from the reserve of a type that refused some input type, and those types."""
    for name, kept in reserve.items():
        refused = search.refused(name)
        if kept and refused:
            return kept.pop(0), refused
    return None


def _known(seen: dict[str, list[Instance[S]]], name: str, instance: Instance[S]) -> bool:
    key = (instance.state, instance.status)
    return any((other.state, other.status) == key for other in seen.get(name, ()))


def _is_new(
    seen: dict[str, list[Instance[S]]], name: str, instance: Instance[S], limit: int
) -> bool:
    known = seen.setdefault(name, [])
    if len(known) >= limit:
        return False
    key = (instance.state, instance.status)
    if any((other.state, other.status) == key for other in known):
        return False
    known.append(instance)
    return True


def _examples(cls: type[Any], count: int, seed: int, strategy: Any = None) -> list[Any]:
    """``count`` values of ``cls`` at most, drawn by hypothesis from a fixed seed, distinct:
    from ``strategy`` if given, else from :func:`decider.testing.strategy_for`."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as fixed_seed

    from decider.testing import strategy_for

    found: list[Any] = []

    @fixed_seed(seed)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy if strategy is not None else strategy_for(cls))
    def collect(value: Any) -> None:
        if value not in found:
            found.append(value)

    collect()
    return found


def _error_text(exc: BaseException) -> str:
    """An exception as a gap names it: ``KeyError: 'x'``."""
    text = str(exc)
    if len(text) > _ERROR_CHARS:
        text = text[: _ERROR_CHARS - 1] + "\u2026"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def path(workflow: Workflow[I, S, O], history: Iterable[WorkflowEvent[I, O]]) -> list[Transition]:
    """The transitions one instance's recorded history took, input by input, in order.

    An input recorded as :class:`~decider.Ignored` moves nothing and makes no transition.

    >>> wf = Workflow("Count", 0, lambda s, e: str(s) if isinstance(e, Received) else s,
    ...               lambda i, s: [])
    >>> for step in path(wf, [Began(), InitiatedBy("a"), Received(2.5)]):
    ...     print(step)
    Transition(source='int', target='int', label='str / -')
    Transition(source='int', target='str', label='float / -')
    """
    steps: list[Transition] = []
    instance = start(workflow)
    group: list[WorkflowEvent[I, O]] = []
    for event in [*history, None]:
        if (
            event is None
            or isinstance(event, (Began, Received, Ignored))
            or (isinstance(event, InitiatedBy) and not (group and isinstance(group[-1], Began)))
        ):
            instance = _close(workflow, instance, group, steps)
            group = []
        if event is not None:
            group.append(event)
    return steps


def _close(
    workflow: Workflow[I, S, O],
    instance: Instance[S],
    group: list[WorkflowEvent[I, O]],
    steps: list[Transition],
) -> Instance[S]:
    """``instance`` after one input's events, noting the transition they make."""
    if not group:
        return instance
    after = advance(workflow, instance, group)
    inputs = [e for e in group if isinstance(e, (InitiatedBy, Received))]
    if inputs:
        transition = Transition(
            state_name(instance.state), state_name(after.state), label(inputs[0].message, group)
        )
        steps.append(transition)
    return after


def observed(
    workflow: Workflow[I, S, O], histories: Iterable[Sequence[WorkflowEvent[I, O]]]
) -> Diagram:
    """The transitions a set of recorded histories took, with how often each was taken."""
    builder = _Builder(workflow.name, state_name(workflow.initial_state))
    for history in histories:
        instance = start(workflow)
        for step in path(workflow, history):
            builder.add(step, Lifecycle.RUNNING)
        instance = advance(workflow, instance, history)
        builder.end(state_name(instance.state), instance.status)
    return builder.build(counted=True)


def with_path(definition: Diagram, steps: Sequence[Transition]) -> Diagram:
    """``definition`` plus any transition of ``steps`` it lacks (one exploration missed)."""
    transitions = dict.fromkeys(definition.transitions)
    states = dict.fromkeys(definition.states)
    for step in steps:
        transitions.setdefault(step)
        states.setdefault(step.source)
        states.setdefault(step.target)
    return attrs.evolve(definition, states=tuple(states), transitions=tuple(transitions))


def path_classes(diagram: Diagram, steps: Sequence[Transition], *, error: bool) -> dict[str, str]:
    """Each state's class for one instance: past, current (or error), future, or none.

    The current state is where the last step ended (the initial state before any);
    ``error`` (a parked command, a failed instance) marks it :data:`ERROR` instead of
    :data:`CURRENT`. Future states are those reachable from it; states neither visited nor
    reachable get no class.
    """
    current = steps[-1].target if steps else diagram.initial
    classes = {step.source: PAST for step in steps}
    following: dict[str, list[str]] = {}
    for t in diagram.transitions:
        following.setdefault(t.source, []).append(t.target)
    queue = deque([current])
    while queue:
        for target in following.get(queue.popleft(), []):
            if target not in classes and target != current:
                classes[target] = FUTURE
                queue.append(target)
    classes[current] = ERROR if error else CURRENT
    return classes


def to_mermaid(diagram: Diagram, classes: Mapping[str, str] | None = None) -> str:
    """The diagram as Mermaid ``stateDiagram-v2`` text; ``classes`` styles states by class.

    An observed diagram's labels end with the count, e.g. ``(12)``. A terminal state has one
    end arrow per way instances end there, labelled with the status (``completed``,
    ``failed``, ``cancelled``).

    >>> go = Transition("A", "B", "Go / Complete")
    >>> print(to_mermaid(Diagram("W", "A", ("A", "B"), (go,), {"B": ("completed", "failed")})))
    stateDiagram-v2
        [*] --> A
        A --> B : Go / Complete
        B --> [*] : completed
        B --> [*] : failed
    """
    ids = _ids(diagram.states)
    lines = ["stateDiagram-v2"]
    lines += [
        f'    state "{_mermaid_text(name)}" as {ids[name]}'
        for name in diagram.states
        if ids[name] != name
    ]
    lines.append(f"    [*] --> {ids[diagram.initial]}")
    for t in diagram.transitions:
        count = diagram.counts.get(t)
        text = _mermaid_text(t.label) + (f" ({count})" if count is not None else "")
        lines.append(f"    {ids[t.source]} --> {ids[t.target]} : {text}")
    lines += [
        f"    {ids[name]} --> [*] : {kind}"
        for name in diagram.states
        for kind in diagram.terminals.get(name, ())
    ]
    if classes:
        used = sorted(set(classes.values()))
        lines += [f"    classDef {c} {MERMAID_STYLES[c]}" for c in used if c in MERMAID_STYLES]
        for c in used:
            members = ",".join(ids[s] for s in diagram.states if classes.get(s) == c)
            if members:
                lines.append(f"    class {members} {c}")
    return "\n".join(lines)


def _ids(states: Sequence[str]) -> dict[str, str]:
    """A Mermaid id per state: its name where that is a plain identifier, else ``s<n>``."""
    return {
        name: name if name.isidentifier() and name.isascii() else f"s{index}"
        for index, name in enumerate(states)
    }


def _mermaid_text(text: str) -> str:
    # A colon or a newline would end the label, ';' the statement; '#' starts an entity code.
    for bad, good in ((":", " "), (";", ","), ("#", ""), ("\n", " "), ('"', "'")):
        text = text.replace(bad, good)
    return text
