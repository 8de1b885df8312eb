"""Messages the engine itself feeds to workflows, registered like any other message.

A workflow lists one of these among its inputs to be told about it and decide what to do:

- ``decider.CommandFailed``: one of the instance's commands could not be carried out and was
  parked, so ``decide`` can compensate.
- ``decider.CancelRequested``: someone asked to cancel the instance; a workflow that does not
  list it among its inputs is cancelled at once instead.
"""

from __future__ import annotations

import attrs

from decider.messages import message


@message("decider.CommandFailed")
@attrs.frozen(kw_only=True)
class CommandFailed:
    """A command the workflow sent could not be carried out and was parked.

    ``command_id`` is the id of the workflow event that recorded the command, ``reason`` the
    last failure, ``attempts`` how many times it was tried.

    >>> CommandFailed(command_id="c1", command_type="fines.Pay", reason="503", attempts=3).attempts
    3
    """

    command_id: str
    command_type: str
    reason: str
    attempts: int


@message("decider.CancelRequested")
@attrs.frozen(kw_only=True)
class CancelRequested:
    """Someone asked to cancel the workflow instance, for ``reason``.

    A workflow that lists it among its inputs gets it in ``decide``, to compensate for what
    it has done and then end with ``Cancel(reason)`` (or carry on, if it is too late to
    cancel); a workflow that does not is cancelled at once (see :func:`decider.handle_cancel`).

    >>> CancelRequested(reason="the customer changed their mind").reason
    'the customer changed their mind'
    """

    reason: str
