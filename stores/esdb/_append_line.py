"""One long-lived ``BatchAppend`` call that every append of a store goes through.

A gRPC call is costly in Python: a client-streaming or bidirectional call starts a thread to
consume its requests, and each call is set up and torn down in the channel. A store that made
one call per append (the clients' ``append_to_stream``, or a ``BatchAppend`` call per batch)
spent more CPU on that than on the append itself (about 1 ms of client CPU per one-event
append on the test server, against 0.2 ms on an open call). The official .NET client keeps one
``BatchAppend`` call open for the life of its connection and sends every append on it; this
line does the same:

- :meth:`AppendLine.submit` registers each append under a correlation id, queues its request
  (``is_final``: one atomic append), and waits for the answers, which a reader thread hands
  out by correlation id as the server sends them. Threads share the call: each waits only for
  its own answers.
- The call opens on first use. If it fails (the server went away, the channel was closed or
  replaced after a reconnect), every append waiting on it fails with
  :class:`~decider.stores.errors.StoreUnavailable` (each of them may or may not have been
  written, as after any lost call) and the next append opens a new call.
- :meth:`AppendLine.close` ends the call.

The server applies a call's requests in the order it receives them, so the appends one thread
submits keep their order; appends from different threads are independent anyway.
"""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import grpc

from decider.stores.errors import StoreError
from decider.stores.esdb._client import call_options, channel, settle
from decider.stores.esdb._errors import (
    closed_channel,
    closed_while_waiting,
    ended,
    rpc_error,
    store_closed,
)
from decider.stores.esdb._pipeline import (
    BATCH_APPEND,
    Outcome,
    Req,
    Resp,
    outcome,
    request,
)
from decider.stores.protocol import StreamAppend

_END = object()
"""Put on a line's request queue to end its call."""


class _Waiter:
    """One append's answer, handed over from the reader thread."""

    __slots__ = ("append", "done", "outcome")

    def __init__(self, append: StreamAppend) -> None:
        self.append = append
        self.outcome: Outcome | None = None
        self.done = threading.Event()

    def answer(self, result: Outcome) -> None:
        self.outcome = result
        self.done.set()


class _Call:
    """One open ``BatchAppend`` call: its request queue, its reader and what waits on it."""

    def __init__(self, client: Any) -> None:
        self.requests: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.pending: dict[str, _Waiter] = {}
        self.failure: StoreError | None = None
        self.lock = threading.Lock()
        self.channel = channel(client)
        multi = self.channel.stream_stream(
            BATCH_APPEND,
            request_serializer=Req.SerializeToString,
            response_deserializer=Resp.FromString,
        )
        self.consumer: threading.Thread | None = None
        self.consuming = threading.Event()
        self.responses = multi(self._requests(), **call_options(client, leader=True))
        self.reader = threading.Thread(target=self._read, name="esdb-append-line", daemon=True)
        self.reader.start()

    def _requests(self) -> Iterator[Any]:
        # run by gRPC's request thread, which asks for the first request as soon as it starts
        self.consumer = threading.current_thread()
        self.consuming.set()
        while True:
            item = self.requests.get()
            if item is _END:
                return
            yield item

    def send(self, waiters: Sequence[_Waiter]) -> None:
        """Register ``waiters`` and queue their requests; raises the call's failure if it
        failed before they were registered."""
        correlations = [uuid.uuid4() for _ in waiters]
        requests = [request(w.append, c) for w, c in zip(waiters, correlations, strict=True)]
        with self.lock:
            if self.failure is not None:
                raise self.failure
            for waiter, correlation in zip(waiters, correlations, strict=True):
                self.pending[str(correlation)] = waiter
        for item in requests:
            self.requests.put(item)

    def _read(self) -> None:
        failure: StoreError
        try:
            for response in self.responses:
                with self.lock:
                    waiter = self.pending.pop(response.correlation_id.string, None)
                if waiter is not None:
                    waiter.answer(outcome(response, waiter.append))
            failure = ended("append call")
        except grpc.RpcError as exc:
            failure = rpc_error(exc, "append call")
        except ValueError as exc:  # the channel was closed under us
            failure = closed_channel(exc)
        self.fail(failure)

    def fail(self, failure: StoreError) -> None:
        """End the call: every append still waiting gets ``failure``."""
        with self.lock:
            if self.failure is None:
                self.failure = failure
            waiting = list(self.pending.values())
            self.pending.clear()
        for waiter in waiting:
            waiter.answer(failure)
        self.requests.put(_END)

    def close(self) -> None:
        """End the call and return once no thread works on it any more: our reader, gRPC's
        request thread and the channel's thread, which handles the call's last operations.

        All three are daemon threads. At interpreter exit (the store's atexit hook closes it)
        Python freezes daemon threads wherever they are once the hook returns, and then
        collects the call, whose ``__del__`` takes the call's lock: a thread frozen while
        holding that lock made the process hang there."""
        self.fail(closed_while_waiting())
        self.responses.cancel()
        if threading.current_thread() is not self.reader:
            self.reader.join()
        # the request thread ends at _END, or once the call has ended when it was sending
        self.consuming.wait()
        assert self.consumer is not None
        self.consumer.join()
        settle(self.responses)


class AppendLine:
    """The store's one open ``BatchAppend`` call, opened on first use and after a failure."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._call: _Call | None = None
        self._closed = False

    def submit(self, appends: Sequence[StreamAppend]) -> list[Outcome]:
        """Send each of ``appends`` (independent atomic appends) and wait for every answer;
        each one's outcome, in order. Raises :class:`~decider.stores.errors.StoreUnavailable`
        (or :class:`~decider.stores.errors.StoreError`) if the call failed before they were
        sent; a failure after that is each waiting append's outcome."""
        if not appends:
            return []
        waiters = [_Waiter(item) for item in appends]
        self._open().send(waiters)
        for waiter in waiters:
            waiter.done.wait()
        return [w.outcome for w in waiters if w.outcome is not None]

    def _open(self) -> _Call:
        with self._lock:
            if self._closed:
                raise store_closed()
            call = self._call
            stale = call is not None and (
                call.failure is not None or call.channel is not channel(self._client)
            )
            if stale:
                assert call is not None
                call.close()
            if call is None or stale:
                try:
                    call = self._call = _Call(self._client)
                except ValueError as exc:  # the channel was closed under us
                    raise closed_channel(exc) from exc
            return call

    def close(self) -> None:
        """End the call (appends still waiting fail); later submits raise."""
        with self._lock:
            self._closed = True
            call, self._call = self._call, None
        if call is not None:
            call.close()
