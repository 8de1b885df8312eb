"""Testing workflows: given-when-then specifications and hypothesis property checks.

A specification replays past inputs through ``decide`` (so the given state is one the
workflow can reach), handles one more input exactly as a processor would, and checks the
outcome, failing with a difference shown element by element:

>>> from decider import Complete, Replied, Reply, Workflow
>>> def decide(name: str, greeted: int) -> list[Reply[str] | Complete]:
...     if greeted == 1:
...         return [Reply(f"bye {name}"), Complete()]
...     return [Reply(f"hello {name}")]
>>> def evolve(greeted: int, event: object) -> int:
...     return greeted + 1 if isinstance(event, Replied) else greeted
>>> spec = WorkflowSpec(Workflow("Greeter", 0, evolve, decide))
>>> _ = spec.given("ann").when("bob").then_commands(Reply("bye bob"), Complete())
>>> _ = spec.given("ann", "bob").when("cy").then_ignored()
>>> _ = spec.when("ann").then_commands(Reply("hello bob"))
Traceback (most recent call last):
    ...
AssertionError: commands differ: expected 1, got 1; first difference at #0
  ! #0 expected: Reply(message='hello bob')
         actual: Reply(message='hello ann')
         field message: expected 'hello bob', actual 'hello ann'
when: 'ann'

:func:`assert_decide_deterministic` and :func:`assert_fold_total` run hypothesis tests over
input sequences drawn from a strategy, which :func:`strategy_for` builds for message classes.
:func:`replay_check` and :func:`assert_replays` replay recorded histories through the current
code, before a new version is deployed.
"""

from decider.testing.diff import field_diff, sequence_diff, value_diff
from decider.testing.properties import (
    assert_decide_deterministic,
    assert_fold_total,
    strategy_for,
)
from decider.testing.replay import ReplayDifference, ReplayReport, assert_replays, replay_check
from decider.testing.spec import (
    Given,
    Outcome,
    WorkflowSpec,
    command_of,
    deliver,
    is_workflow_event,
    unregistered,
)

__all__ = [
    "Given",
    "Outcome",
    "ReplayDifference",
    "ReplayReport",
    "WorkflowSpec",
    "assert_decide_deterministic",
    "assert_fold_total",
    "assert_replays",
    "command_of",
    "deliver",
    "field_diff",
    "is_workflow_event",
    "replay_check",
    "sequence_diff",
    "strategy_for",
    "unregistered",
    "value_diff",
]
