"""Snapshots: an instance's state as JSON, tagged with the version of the state's shape.

A processor that loads a cold instance with a long history reads its latest snapshot and folds
only the events after it. This module is the pure part: when a snapshot is due
(``Workflow(snapshot_every=N)``) and how a state becomes bytes and back
(:class:`StateCodec`); where snapshots are stored is the processors' business.

A snapshot is a JSON object::

    {"workflow": "OrderFulfilment", "state_version": "2", "version": 10000,
     "status": "running", "state": {"_type": "Shipping", "order_id": "ord-1"},
     "handled": []}

``version`` is the number of events folded into it; ``handled`` message ids of inputs the
instance handled, for a caller that keeps them with the state (the state-stored variant's rows
do). The workflow processor's snapshots leave it empty: it looks an input older than the
snapshot up in the store instead, so a snapshot costs the same to read however long the
history. A snapshot whose
``state_version`` is not the workflow's current one, or that no longer decodes into the state's
classes, raises :class:`~decider.DecodeError`: the processor ignores it and folds the stream.

WARNING: ``state_version`` is the only thing that tells a snapshot of an old shape from a
current one when the old JSON still happens to fit the new classes (a field renamed, a default
added): change it whenever the state's classes change.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Collection
from typing import Any, Generic, TypeVar

import attrs
from cattrs.strategies import configure_tagged_union

from decider.codec import Codec
from decider.errors import DecodeError, WorkflowDefinitionError
from decider.models import model_kind
from decider.workflow import Instance, Lifecycle, Workflow

S = TypeVar("S")

TAG = "_type"
"""The key that names the class of a state that is one of a union of classes."""


@attrs.frozen
class Restored(Generic[S]):
    """An instance read back from a snapshot, and the message ids of the inputs it had handled."""

    instance: Instance[S]
    handled: frozenset[str]


def snapshot_due(workflow: Workflow[Any, Any, Any], before: int, after: int) -> bool:
    """Whether to snapshot an instance whose version went from ``before`` to ``after`` events:
    it passed a multiple of ``workflow.snapshot_every`` (never without ``snapshot_every``).

    >>> wf = Workflow("Job", 0, lambda s, e: s, lambda i, s: [], snapshot_every=100)
    >>> snapshot_due(wf, 98, 101), snapshot_due(wf, 101, 104)
    (True, False)
    """
    every = workflow.snapshot_every
    return every is not None and after // every > before // every


def state_type_of(workflow: Workflow[Any, S, Any]) -> Any:
    """The type a snapshot's state decodes as: ``workflow.state_type``, else the return
    annotation of ``evolve``.

    Raises :class:`~decider.WorkflowDefinitionError` if there is neither (a ``lambda`` has no
    annotations): guessing from the initial state would decode a later state as the wrong class.
    """
    if workflow.state_type is not None:
        return workflow.state_type
    try:
        hints = typing.get_type_hints(workflow.evolve)
    except Exception as exc:
        raise WorkflowDefinitionError(
            f"workflow {workflow.name!r}: cannot read the state type from evolve's annotations "
            f"({exc!r}); pass Workflow(..., state_type=State)"
        ) from exc
    if "return" not in hints:
        raise WorkflowDefinitionError(
            f"workflow {workflow.name!r}: evolve has no return annotation to take the state type "
            "from; pass Workflow(..., state_type=State) to snapshot it"
        )
    return hints["return"]


class StateCodec(Generic[S]):
    """Encodes one workflow's instances as snapshots and decodes them back.

    Built once per workflow (it prepares a converter for the state's type). A state that is a
    union of classes (``Initial | AwaitingPayment | ...``) is stored with its class name under
    ``"_type"``; messages inside it are stored as the :class:`~decider.Codec` stores them.

    >>> counter = Workflow("Count", 0, lambda s, e: s + 1, lambda i, s: [], state_type=int)
    >>> states = StateCodec(counter)
    >>> data = states.encode(Instance(7, Lifecycle.RUNNING, 7), handled={"msg_1"})
    >>> restored = states.decode(data)
    >>> restored.instance.state, restored.instance.version, restored.handled
    (7, 7, frozenset({'msg_1'}))
    """

    def __init__(self, workflow: Workflow[Any, S, Any], codec: Codec | None = None) -> None:
        self.workflow = workflow
        self.state_type = state_type_of(workflow)
        self.converter = (codec or Codec()).converter.copy()
        members = _union_members(self.state_type)
        if members is not None and all(model_kind(m) is not None for m in members):
            names = {m.__name__ for m in members}
            tag = (lambda cls: cls.__name__) if len(names) == len(members) else _qualified
            configure_tagged_union(self.state_type, self.converter, tag_generator=tag, tag_name=TAG)

    def encode(self, instance: Instance[S], handled: Collection[str] = ()) -> bytes:
        """A snapshot of ``instance`` (and the input message ids it handled) as JSON bytes.

        Raises :class:`~decider.WorkflowDefinitionError` if the state cannot be turned into
        JSON, naming the workflow and the reason.
        """
        try:
            state = self.converter.unstructure(instance.state, unstructure_as=self.state_type)
            doc = {
                "workflow": self.workflow.name,
                "state_version": self.workflow.state_version,
                "version": instance.version,
                "status": instance.status.value,
                "state": state,
                "handled": sorted(handled),
            }
            return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
        except (TypeError, ValueError) as exc:
            raise WorkflowDefinitionError(
                f"workflow {self.workflow.name!r}: its state {instance.state!r} cannot be "
                f"snapshotted as JSON: {exc}"
            ) from exc

    def decode(self, data: bytes) -> Restored[S]:
        """The instance a snapshot holds.

        Raises :class:`~decider.DecodeError` naming the reason if the snapshot is of another
        workflow or another ``state_version``, or does not decode: ignore it and fold the
        stream instead.
        """
        what = f"snapshot of {self.workflow.name}"
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise DecodeError(what, f"invalid JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise DecodeError(what, "expected a JSON object")
        if doc.get("workflow") != self.workflow.name:
            raise DecodeError(what, f"it is a snapshot of workflow {doc.get('workflow')!r}")
        if doc.get("state_version") != self.workflow.state_version:
            raise DecodeError(
                what,
                f"its state_version {doc.get('state_version')!r} is not the current "
                f"{self.workflow.state_version!r}",
            )
        version, handled = doc.get("version"), doc.get("handled")
        if not isinstance(version, int) or version < 0:
            raise DecodeError(what, f"'version' must be a non-negative integer, got {version!r}")
        # set(map(type, ...)) checks thousands of ids at C speed (a cold load waits on it).
        if not isinstance(handled, list) or not set(map(type, handled)) <= {str}:
            raise DecodeError(what, "'handled' must be a list of message ids")
        try:
            status = Lifecycle(doc.get("status"))
            state = self.converter.structure(doc.get("state"), self.state_type)
        except Exception as exc:
            raise DecodeError(what, f"the state does not decode: {exc!r}") from exc
        return Restored(Instance(state, status, version), frozenset(handled))


def _union_members(tp: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return None


def _qualified(cls: type[Any]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
