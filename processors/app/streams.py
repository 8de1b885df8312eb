"""Every stream name the processors write or read, and the names they are built from.

The one place a stream name is built or taken apart. The names (all derived, so a second run
finds what the first wrote)::

    <Workflow>-<instance id>                 an instance's events (its inbox and outbox)
    <Workflow>-<instance id>~g<n>            generation n (2, 3, ...) of a forked instance
    <handler>-<command id>                   one command's handler results
    topic-<message type>-<command id>        a published message
    reply-<message id of the input>          a reply
    timer-<Scheduled event id>               a fired timer
    decider-parked-<app>                     the app's parked-command ledger
    decider-failed-<Workflow>-<command id>   a parked command's CommandFailed, fed back
    decider-skipped-<processor>              the inputs a processor skipped
    decider-cancel-<instance stream>         an operator's cancel request for an instance
    inputs-<app>                             where ``decider publish`` appends by default
    decider-partitions-<app>                 the app's partition count (partitioned runs)
    decider-leases-<app>                     the history of partition claims (partitioned runs)

and the processors' (checkpoint) names ``<app>.workflow.<Workflow>``, ``<app>.commands``,
``<app>.timers``, beside which a running service writes its heartbeat under
``<app>.service-heartbeat``; in a partitioned run, a workflow processor's checkpoint per
partition is ``<processor>.p<partition>``.

:data:`SEPARATOR` (``-``) follows a workflow or handler name, which therefore cannot contain
it: the workflow of an instance stream is the part before the first ``-``, so ``Order`` and
``Order-v2`` can never be confused (``Order-v2`` is not a valid workflow name). An app name
may hold ``-`` (it only ends a stream name) but not ``.``, which joins a processor's name.
The names are checked when an :class:`~decider.processors.App` registers them
(:class:`~decider.processors.app.errors.AppDefinitionError`); a stream name built from data (an
instance id, a message id) is checked when it is built (:class:`InvalidStreamName`), so an
input that would make a name no store can hold is skipped with that reason.

Every name here is built from the core's grammar of stream names (:mod:`decider.streams`: the
separator, the first parts, the joins), which the store adapters' own streams share.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from decider import streams as grammar
from decider.processors.app.errors import AppDefinitionError, InvalidStreamName

SEPARATOR = grammar.SEPARATOR
"""Ends a workflow or handler name in the stream names built from it."""

MAX_STREAM_BYTES = 1000
"""The longest stream name (in UTF-8 bytes) built from data; every store holds this much
(PostgreSQL's index rows allow about 2,700 bytes, EventStoreDB and SQLite more)."""

RESERVED = grammar.RESERVED
"""First parts of the processors' own stream names: no workflow or handler may take them."""

_PART_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_APP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]*$")
_FAILED = grammar.system_prefix("failed")
_UUID_LENGTH = 36


# -- names checked at registration ------------------------------------------------------------


def check_app_name(name: str) -> str:
    """``name`` if it can name an app: letters, digits, ``_`` and ``-``; else AppDefinitionError.

    >>> check_app_name("traffic-fines")
    'traffic-fines'
    """
    if not isinstance(name, str) or not _APP_NAME.match(name):
        raise AppDefinitionError(
            f"app name {name!r} must start with a letter or digit and hold only letters, "
            "digits, '_' and '-'"
        )
    return name


def check_part_name(name: str, role: str) -> str:
    """``name`` if it can name a workflow or handler (``role``): a letter, then letters, digits
    and ``_``, and not a reserved name; else :class:`AppDefinitionError` naming it.

    >>> check_part_name("IssueTrafficFine", "workflow")
    'IssueTrafficFine'
    """
    if not isinstance(name, str) or not _PART_NAME.match(name):
        raise AppDefinitionError(
            f"{role} name {name!r} must be a letter followed by letters, digits or '_' "
            f"(no {SEPARATOR!r}: it separates the name from the id in its stream names)"
        )
    if name.lower() in RESERVED:
        raise AppDefinitionError(f"{role} name {name!r} is reserved for the processors' streams")
    return name


def check_stream(name: str) -> str:
    """``name`` if a store can hold it as a stream name; else :class:`InvalidStreamName`.

    It must be non-empty UTF-8 (no lone surrogate), hold no NUL character, and be at most
    :data:`MAX_STREAM_BYTES` bytes long.

    >>> check_stream("Fine-r1")
    'Fine-r1'
    """
    if not isinstance(name, str) or not name:
        raise InvalidStreamName(repr(name)[:80], "a stream name must be a non-empty string")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidStreamName(_shown(name), "it is not valid UTF-8 (a lone surrogate)") from None
    if "\x00" in name:
        raise InvalidStreamName(_shown(name), "it holds a NUL character")
    if size > MAX_STREAM_BYTES:
        raise InvalidStreamName(
            _shown(name), f"it is {size} bytes long, more than {MAX_STREAM_BYTES}"
        )
    return name


def _shown(name: str) -> str:
    text = name.encode("utf-8", "backslashreplace").decode("utf-8")
    return repr(text if len(text) <= 80 else text[:79] + "…")


# -- instances ------------------------------------------------------------------------------


def instance_prefix(workflow: str) -> str:
    """The prefix of every instance stream of ``workflow``.

    >>> instance_prefix("Order")
    'Order-'
    """
    return grammar.stream_prefix(workflow)


def instance_stream(workflow: str, instance_id: str) -> str:
    """The stream of the instance ``instance_id`` of ``workflow``, checked (see
    :func:`check_stream`); the same name as :meth:`decider.Workflow.stream`.

    >>> instance_stream("Order", "o-1")
    'Order-o-1'
    >>> instance_stream("Order", "o-1~g2")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    InvalidStreamName: invalid stream name 'Order-o-1~g2': ... a generation of a forked instance
    """
    if not isinstance(instance_id, str) or not instance_id:
        raise InvalidStreamName(repr(instance_id)[:80], "an instance id must be a non-empty string")
    stream = check_stream(grammar.instance_stream(workflow, instance_id))
    if GENERATION in instance_id and generation_of(stream)[1] != 1:
        raise InvalidStreamName(
            _shown(stream),
            f"an instance id must not end in {GENERATION!r} and a number:"
            " that names a generation of a forked instance",
        )
    return stream


GENERATION = "~g"
"""Joins an instance stream and a generation's number (2, 3, ...) in a generation's stream name.
An instance id that ends in ``~g`` and a number (``o-1~g2``) is refused when its stream is
built, so that no instance's own stream reads as another's generation."""


def generation_stream(instance_stream: str, number: int) -> str:
    """The stream of generation ``number`` of the instance ``instance_stream`` (the instance's
    own stream is generation 1); checked (see :func:`check_stream`).

    >>> generation_stream("Order-o-1", 2), generation_stream("Order-o-1", 1)
    ('Order-o-1~g2', 'Order-o-1')
    """
    if number == 1:
        return instance_stream
    return check_stream(f"{instance_stream}{GENERATION}{number}")


def generation_of(stream: str) -> tuple[str, int]:
    """The instance stream a generation's stream belongs to, and the generation's number (1 for
    the instance's own stream).

    >>> generation_of("Order-o-1~g3"), generation_of("Order-o-1")
    (('Order-o-1', 3), ('Order-o-1', 1))
    """
    base, separator, number = stream.rpartition(GENERATION)
    if separator and number.isdigit() and int(number) >= 2 and str(int(number)) == number:
        return base, int(number)
    return stream, 1


def workflow_of(stream: str) -> str:
    """The workflow name an instance stream starts with (the part before the first ``-``).

    >>> workflow_of("Order-o-1"), workflow_of("Order-v2-o-1")
    ('Order', 'Order')
    """
    return stream.partition(SEPARATOR)[0]


# -- what commands lead to --------------------------------------------------------------------


def results_stream(handler: str, command_id: str) -> str:
    """The stream of one command's handler results: written once, with ``NO_STREAM``."""
    return grammar.stream_name(handler, command_id)


def topic_stream(message_type: str, command_id: str) -> str:
    """The stream of a message published by the command ``command_id``."""
    return grammar.stream_name(grammar.TOPIC, message_type, command_id)


def reply_stream(message_id: str) -> str:
    """The stream of the reply to the input whose message id is ``message_id`` (checked)."""
    return check_stream(grammar.stream_name(grammar.REPLY, message_id))


def timer_stream(scheduled_id: str) -> str:
    """The stream a fired timer's message goes to."""
    return grammar.stream_name(grammar.TIMER, scheduled_id)


def timer_prefix() -> str:
    """The prefix of every fired timer's stream."""
    return grammar.stream_prefix(grammar.TIMER)


def parked_stream(app: str) -> str:
    """The stream of an app's parked-command ledger."""
    return grammar.system_stream("parked", app)


def failed_stream(workflow: str, command_id: str) -> str:
    """The stream a parked command's ``CommandFailed`` goes to (one per command)."""
    return grammar.system_stream("failed", workflow, command_id)


def failed_stream_workflow(stream: str) -> str | None:
    """The workflow name a :func:`failed_stream` is addressed to (``None``: not such a stream).

    >>> failed_stream_workflow(failed_stream("Order", "6f1f3b0e-4c1a-5d8e-9b7a-2f0c1d9e8a47"))
    'Order'
    """
    if not stream.startswith(_FAILED) or len(stream) < len(_FAILED) + _UUID_LENGTH + 2:
        return None
    return stream[len(_FAILED) : -(_UUID_LENGTH + 1)]


def skipped_stream(processor: str) -> str:
    """The stream where a processor records the inputs it skipped."""
    return grammar.system_stream("skipped", processor)


def skipped_prefix(app: str | None = None) -> str:
    """The prefix of the skipped-inputs streams of ``app``'s processors (of every app: ``None``).

    >>> skipped_prefix("fines")
    'decider-skipped-fines.'
    """
    return skipped_stream(f"{app}." if app is not None else "")


def cancel_stream(instance_stream: str) -> str:
    """The stream an operator's cancel request for the instance ``instance_stream`` goes to.

    >>> cancel_stream("Order-o-1")
    'decider-cancel-Order-o-1'
    """
    return grammar.system_stream("cancel", instance_stream)


def input_stream(app: str) -> str:
    """The stream ``decider publish`` appends an input to when none is given.

    The workflow processors read their inputs by type from every stream, so any stream that is
    not an instance stream will do.

    >>> input_stream("fines")
    'inputs-fines'
    """
    return grammar.stream_name(grammar.INPUTS, app)


def is_system_stream(stream: str) -> bool:
    """Whether ``stream`` is one of the processors' own (``decider-...``): no input goes there.

    >>> is_system_stream(parked_stream("fines")), is_system_stream(input_stream("fines"))
    (True, False)
    """
    return stream.startswith(grammar.system_prefix())


# -- processors -------------------------------------------------------------------------------


def workflow_processor_name(app: str, workflow: str) -> str:
    """The name (and checkpoint name) of an app's processor of ``workflow``."""
    return f"{app}.workflow.{workflow}"


def command_processor_name(app: str) -> str:
    """The name (and checkpoint name) of an app's command processor."""
    return f"{app}.commands"


def timer_processor_name(app: str) -> str:
    """The name (and checkpoint name) of an app's timer processor."""
    return f"{app}.timers"


def router_name(app: str) -> str:
    """The name of an app's input router (a partitioned run on a store that keeps partition
    keys; its checkpoint is that of partition 0, ``<name>.p0``)."""
    return f"{app}.router"


def routed_stream(app: str) -> str:
    """The stream where an app's input router records, for each input stored without a
    partition key, the instance partition it belongs to
    (:class:`~decider.processors.app.messages.InputRouted` records)."""
    return grammar.system_stream("routed", app)


def processor_names(app: str, workflows: Iterable[str]) -> list[str]:
    """The names of the processors a service of ``app`` runs: one per workflow, then the
    command and the timer processor.

    >>> processor_names("fines", ["Fine"])
    ['fines.workflow.Fine', 'fines.commands', 'fines.timers']
    """
    names = [workflow_processor_name(app, workflow) for workflow in workflows]
    return [*names, command_processor_name(app), timer_processor_name(app)]


def short_processor_name(app: str, processor: str) -> str:
    """A processor's name without its app's (what an operator may type instead).

    >>> short_processor_name("fines", "fines.commands")
    'commands'
    """
    return processor.removeprefix(f"{app}.")


def heartbeat_name(app: str) -> str:
    """The checkpoint name under which a running service of ``app`` writes its heartbeat."""
    return f"{app}.service-heartbeat"


def partition_checkpoint_name(processor: str, partition: int) -> str:
    """The checkpoint name of ``processor`` for one partition (a partitioned run)."""
    return f"{processor}.p{partition}"


def partition_count_stream(app: str) -> str:
    """The stream that records an app's partition count (a partitioned run)."""
    return grammar.system_stream("partitions", app)


def lease_history_stream(app: str) -> str:
    """The stream of an app's partition claims, one per new lease epoch (a partitioned run)."""
    return grammar.system_stream("leases", app)
