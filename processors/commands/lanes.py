"""The command processor's lanes at a flush (one per partition held, or one for all the work):
what each has to commit, committed on its own under its fence, or every lane's in one
transaction under every partition's lease (``append_batch`` with ``checkpoints`` and
``leases``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from decider.processors.commands.replay import concluded_mark_name
from decider.processors.commands.watermark import Taken
from decider.processors.engine.base import Outcome
from decider.processors.engine.failures import PERMANENT
from decider.processors.engine.sharing import LeaseNotHeld
from decider.stores import Lease, LeaseLost
from decider.stores.errors import WrongExpectedVersion

if TYPE_CHECKING:
    from decider.processors.commands.processor import CommandProcessor


@attrs.frozen
class LanePlan:
    """What one lane (a partition's, or all the work's) has to commit at a flush."""

    key: int
    taken: Taken
    mark: int | None
    """The checkpoint to commit (``None``: it did not move)."""
    beyond: int | None
    """The concluded mark to store after (or with) the commit (``None``: none to)."""


def take_lane(
    processor: CommandProcessor, key: int, idle_due: bool, held: dict[int, Lease] | None
) -> LanePlan | None:
    """What concluded in ``key``'s lane, to commit (``None``: nothing to, now)."""
    if not processor.share.still_held(key, held):
        processor.marks.drop(key)  # released or lost: the new owner carries its commands out
        processor.share.let_go(key)  # or, if it is held after all, the next life here
        return None
    taken = processor.marks.lane(key).take()
    # With nothing in hand, every input of the lane up to what was read has concluded.
    mark = processor._read if taken.drained and processor._read is not None else taken.mark
    moved = mark is not None and mark != processor.share.mark(key)
    if not taken.appends and (not moved or (taken.mark is None and not idle_due)):
        return None  # an idle partition's checkpoint moves on about once a second
    concluded = processor._concluded_marks.get(key)
    beyond = taken.beyond
    if not processor._transactional or (concluded is not None and (beyond or 0) <= concluded):
        beyond = None
    return LanePlan(key, taken, mark if moved else None, beyond)


def commit_lane(processor: CommandProcessor, plan: LanePlan) -> bool:
    """Commit ``plan``'s lane on its own, under its fence; whether it wrote."""
    key, taken = plan.key, plan.taken
    try:
        with processor.share.fenced(key):
            processor.settle(Outcome(taken.appends, plan.mark))
            if plan.beyond is not None:
                # After the commit, so it never claims more than is stored (a crash in
                # between costs at most a second call of a handler, whose results are then
                # kept as stored); under the fence like the commit.
                name = concluded_mark_name(processor.share.checkpoint_name(key))
                processor.share.save_mark(name, plan.beyond)
                processor._concluded_marks[key] = plan.beyond
    except (LeaseLost, LeaseNotHeld) as exc:
        processor.marks.drop(key)
        processor.share.lease_gone(exc)
        return False
    except BaseException:
        processor._uncommitted.update(taken.outcomes)
        raise
    if plan.mark is not None:
        processor.share.committed_to(key, plan.mark)
    return True


def flush_together(processor: CommandProcessor, plans: list[LanePlan]) -> bool:
    """Commit every lane of ``plans`` in one transaction: their appends, checkpoints and
    concluded marks (in the commit itself, so never past what is stored), under every
    partition's lease; whether it did. ``False`` (nothing written) where the store has no
    such transaction, after a lost lease (that partition is dropped), a conflict or a
    rejection: the caller then commits the lanes one by one."""
    if not processor._joint:
        return False
    checkpoints: list[tuple[str, int]] = []
    for plan in plans:
        name = processor.share.checkpoint_name(plan.key)
        if plan.mark is not None:
            checkpoints.append((name, plan.mark))
        if plan.beyond is not None:
            checkpoints.append((concluded_mark_name(name), plan.beyond))
    appends = [item for plan in plans for item in plan.taken.appends]
    try:
        with processor.share.fenced_together([plan.key for plan in plans]):
            processor.commit(Outcome(appends, checkpoints=checkpoints))
    except (LeaseLost, LeaseNotHeld) as exc:
        processor.share.lease_gone(exc)
        return False
    except WrongExpectedVersion:
        processor.conflicts += 1
        return False
    except PERMANENT:
        return False
    except BaseException:
        for plan in plans:
            processor._uncommitted.update(plan.taken.outcomes)
        raise
    for plan in plans:
        if plan.mark is not None:
            processor.share.committed_to(plan.key, plan.mark)
        if plan.beyond is not None:
            processor._concluded_marks[plan.key] = plan.beyond
    return True
