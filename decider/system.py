"""Messages the engine itself feeds to workflows, registered like any other message.

A workflow lists one of these among its inputs to be told about it and decide what to do:

- ``decider.CommandFailed``: one of the instance's commands could not be carried out and was
  parked, so ``decide`` can compensate.
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
