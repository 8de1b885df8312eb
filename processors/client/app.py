"""The App users build: the app's definition, and what a program outside the service asks of it.

:class:`App` is :class:`~decider.processors.app.definition.AppDefinition` (workflows, handlers,
routes, registered up front) with the client's operations as methods: ``app.publish``,
``app.publish_many``, ``app.request``, ``app.request_async``, ``app.cancel`` and ``app.fork``.
Each is one call of the function of the same name in :mod:`~decider.processors.client.publishing`,
:mod:`~decider.processors.client.requests`, :mod:`~decider.processors.client.cancelling` or
:mod:`~decider.processors.client.forking`, which
take the app as their first argument. The processors, the service and the operator's tools read
the definition only, so ``app/`` imports nothing above it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from decider import Workflow
from decider.processors.app.definition import AppDefinition
from decider.processors.client import cancelling, forking, publishing, requests
from decider.processors.client.cancelling import CancelRequest
from decider.processors.client.forking import ForkPlan
from decider.stores.protocol import EventStore


class App(AppDefinition):
    """Everything a :class:`~decider.processors.service.service.Service` runs, registered up front,
    and the client's operations on it (publish, request, cancel, fork).

    Registration checks what it can at once (message types registered with the codec, one
    handler or target stream per command type, unique names) and raises
    :class:`~decider.processors.app.errors.AppDefinitionError` naming the problem.
    """

    def publish(
        self,
        store: EventStore,
        message: object,
        stream: str,
        message_id: str | None = None,
        *,
        correlation_id: str | None = None,
    ) -> str:
        """Append ``message`` to ``stream`` as an input for the workflows; returns its message id.

        With the same ``message_id`` a second publish is recognised: by the store if it goes to
        the same stream (the event id derives from the message id), else by the workflow
        processor, which handles a message id once per instance.
        """
        return publishing.publish(
            self, store, message, stream, message_id, correlation_id=correlation_id
        )

    def publish_many(
        self,
        store: EventStore,
        messages: Sequence[object],
        stream: str,
        message_ids: Sequence[str] | None = None,
    ) -> list[str]:
        """Append several inputs to ``stream`` in one append; returns their message ids.

        The same as :meth:`publish` for each message, in one write (one fsync on SQLite).
        """
        return publishing.publish_many(self, store, messages, stream, message_ids)

    def request(
        self,
        store: EventStore,
        message: object,
        *,
        timeout: float = 10.0,
        stream: str | None = None,
        message_id: str | None = None,
    ) -> Any:
        """Publish ``message`` as an input and return the first message the workflow replies to
        it (``Reply(...)`` in ``decide``); a service of the app must be running (in this
        process or another).

        The input goes to ``stream`` (default ``inputs-<app name>``) and is routed like any
        other: it starts its instance or is delivered to the running one. The wait is a
        subscription to the store, from the request's position. Raises
        :class:`~decider.processors.app.errors.RequestTimeout` (naming the message id and the
        instance) if no reply comes within ``timeout`` seconds, and
        :class:`~decider.processors.app.errors.RequestNotAnswered` as soon as the instance records
        the request without a reply (it had ended, or the request failed or cancelled it).
        Retrying with the same ``message_id`` is the same input (it is handled once).
        """
        return requests.request(
            self, store, message, timeout=timeout, stream=stream, message_id=message_id
        )

    async def request_async(
        self,
        store: EventStore,
        message: object,
        *,
        timeout: float = 10.0,
        stream: str | None = None,
        message_id: str | None = None,
    ) -> Any:
        """:meth:`request` for asyncio: ``await app.request_async(store, message)``; the
        event loop is not blocked, and cancelling the task ends the wait."""
        return await requests.request_async(
            self, store, message, timeout=timeout, stream=stream, message_id=message_id
        )

    def cancel(
        self,
        store: EventStore,
        workflow: Workflow[Any, Any, Any] | str,
        instance_id: str | None = None,
        *,
        reason: str,
    ) -> CancelRequest:
        """Ask a running instance to cancel, for ``reason``: ``app.cancel(store, order, "o-1",
        reason=...)``, or with the instance's stream, ``app.cancel(store, "Order-o-1",
        reason=...)``. The same as ``decider cancel``.

        A ``decider.CancelRequested`` input is recorded in ``decider-cancel-<instance stream>``
        (once per instance: a second request returns the first, ``already=True``); the
        workflow processor delivers it: to ``decide`` if the workflow lists
        :class:`~decider.CancelRequested` among its inputs (it compensates, then returns
        ``Cancel(reason)``), else the instance is cancelled at once. Raises
        :class:`~decider.processors.app.errors.OperationError` for a workflow the app does
        not run, an instance with no events, or one that has ended.
        """
        return cancelling.cancel(self, store, workflow, instance_id, reason=reason)

    def fork(
        self,
        store: EventStore,
        workflow: Workflow[Any, Any, Any] | str,
        instance_id: str | None = None,
        *,
        at: int,
        reason: str,
        dry_run: bool = False,
    ) -> ForkPlan:
        """Repair an instance: end it and begin a new generation of it that decides, with the
        current code, the inputs it received up to revision ``at``: ``app.fork(store, order,
        "o-1", at=5, reason=...)``, or by a generation's stream, ``app.fork(store,
        "Order-o-1~g2", at=5, reason=...)``. The same as ``decider fork``.

        The new generation (stream ``<instance stream>~g<n>``) reuses the results of the
        commands and timers it decides exactly as the old one did (same type and message) and
        carries out the others anew; the instance's later inputs go to it, and the old
        generation ends with a ``Cancelled`` event that names the fork. ``dry_run`` returns
        the plan without writing it. Returns the plan (``already``: the generation was forked
        at ``at`` before, and nothing was written). Raises
        :class:`~decider.processors.app.errors.OperationError` naming what stands in the way.
        See :mod:`decider.processors.client.forking`.
        """
        return forking.fork(
            self, store, workflow, instance_id, at=at, reason=reason, dry_run=dry_run
        )
