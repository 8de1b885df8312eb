"""The command pool: worker threads that carry out commands, in order per workflow instance.

Commands are submitted with a *key* (the instance stream they were sent from). Commands of one
key run one at a time, in the order submitted; commands of different keys run side by side, up
to the pool's size at once (sync calls on worker threads, ``async def`` handlers on the
service's event loop, :mod:`decider.processors.commands.event_loop`). A failed attempt is retried
after the handler's back-off, waited on the service clock by one timekeeper thread: the command
holds only its own key's later commands, never a worker.

A pool made with ``quick`` runs a quick sync handler's call, if the handler was registered
``inline=True``, on the thread that submits it (the
command processor's), with no hand-off to a worker and back, when the submitter allows it
(the command processor always does), nothing of its key is in hand and a slot is free: which
handlers are quick is
:mod:`decider.processors.commands.pace`'s to say (their recent calls, timed wherever they
ran). Such a call keeps every rule of a
worker's: it holds a slot, counts against the handler's limits, is judged and retried the same
way, and is watched for its timeout (past it, the attempt fails and is retried on a worker; the
submitting thread goes on when the call returns, its answer ignored). WARNING: until then the
submitting thread is held: a handler that was quick and hangs holds the command processor
(its commits wait) until the call returns.

Per handler (:class:`~decider.processors.app.definition.HandlerRegistration`):

- ``timeout``: a call that runs longer is a failed attempt (retried, then parked). A sync call
  cannot be killed in Python: its worker thread is abandoned (it ends when the call returns,
  its answer ignored) and a new worker takes its place, up to :attr:`CommandPool.max_abandoned`
  abandoned threads at once; past that the pool runs with fewer workers, and says so in the log.
- ``concurrency``: at most that many calls of the handler at once.
- ``rate``: at most that many calls per second (calls are spaced ``1 / rate`` apart).

The pool decides nothing about what a result means: it asks
:func:`~decider.processors.engine.failures.judge_attempt` after each call and acts on the
verdict. Each job's ``conclude`` callback gets the handler's results, or
:class:`~decider.processors.commands.handlers.GaveUp`, exactly once per generation (see
:meth:`CommandPool.reset`).
"""

from __future__ import annotations

import collections
import functools
import heapq
import itertools
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from decider.processors.app.definition import HandlerRegistration
from decider.processors.app.retry import HandlerFailure
from decider.processors.commands.event_loop import EventLoop
from decider.processors.commands.handlers import AttemptFailed, GaveUp, invoke, invoke_async
from decider.processors.commands.pace import Pace
from decider.processors.engine import failures, logs, telemetry
from decider.processors.engine.clock import Clock, Signal
from decider.processors.engine.failures import Verdict

Conclusion = Sequence[Any] | GaveUp | AttemptFailed
"""What a command came to: the handler's results, or why it is given up (to be parked), or
(for a job that is not retried here) that an attempt failed and may be retried elsewhere."""


@attrs.define(eq=False)
class Job:
    """One command for the pool: its handler, its key, and what to do once it concludes."""

    key: str
    handler: HandlerRegistration
    command: Any
    command_id: str
    conclude: Callable[[Conclusion], None]
    attempts: int = 0
    generation: int = 0
    trace: Any = attrs.Factory(telemetry.capture)
    """The trace context it was submitted in (the command's span): its calls and conclusion
    go on in it."""
    retry_here: bool = True
    """Whether a retryable failure is retried by the pool (after the back-off); if not, the
    job concludes with :class:`~decider.processors.commands.handlers.AttemptFailed` (a consumer
    group retries through the server). ``attempts`` may then start at the earlier deliveries'."""


@attrs.frozen
class HandlerLoad:
    """A handler's commands now: running, waiting to retry, queued behind others (and how many
    the running service parked)."""

    handler: str
    in_flight: int
    backing_off: int
    queued: int
    parked: int = 0


@attrs.define(eq=False)
class _Worker:
    job: Job | None = None
    deadline: float | None = None
    abandoned: bool = False


class CommandPool:
    """Worker threads carrying out commands: in order per key, side by side across keys."""

    def __init__(
        self,
        name: str,
        size: int,
        clock: Clock,
        logger: logging.Logger | None,
        *,
        max_abandoned: int | None = None,
        quick: float = 0.0,
    ) -> None:
        if size < 1:
            raise ValueError(f"a command pool needs at least 1 worker, got {size}")
        self.name = name
        self.size = size
        self.max_abandoned = size if max_abandoned is None else max_abandoned
        """How many timed-out sync calls may hold a thread at once before workers are not
        replaced any more."""
        self.clock = clock
        self.log = logs.with_context(logger or logging.getLogger(__name__), processor=name)
        # One lock; the workers, the watchdog and wait_calls each wait on their own condition,
        # so a change wakes one worker, not every thread of the pool.
        # Taken directly where no condition is waited on or notified (a Condition's own
        # __enter__ and __exit__ are two calls in Python, several per command).
        self._lock = lock = threading.Lock()
        self._cond = threading.Condition(lock)
        self._watch_cond = threading.Condition(lock)
        self._calls_cond = threading.Condition(lock)
        self._calls_waiting = 0
        """How many threads wait on ``_calls_cond`` (the lock held): none, almost always."""
        self._queues: dict[str, collections.deque[Job]] = {}
        self._ready: collections.deque[str] = collections.deque()
        self._running: dict[str, int] = collections.Counter()
        self._backing_off: dict[str, int] = collections.Counter()
        self._next_call: dict[str, float] = {}
        self._in_flight = 0
        self._paused = False
        self._closed = False
        self._generation = 0
        self._workers: list[_Worker] = []
        self._abandoned = 0
        self._tickets = itertools.count(1)
        self._watch_until = float("inf")
        self._shortest_timeout = float("inf")
        """The shortest timeout of a sync call seen (the watchdog's longest sleep)."""
        self._delayed: list[tuple[datetime, int, Job]] = []
        self._wake = Signal()
        self._random = random.Random()
        self._loop: EventLoop | None = None
        self._threads: list[threading.Thread] = []
        self.timeouts = 0
        """How many calls ran past their handler's timeout."""
        self.pace = Pace(quick)
        """Each handler's recent call times: whether its next call may run inline (``quick``:
        the seconds under which a call is quick; 0, the default: every call on a worker)."""
        self._inline: _Worker | None = None
        """The call running on a submitting thread, if one is (its deadline watched)."""
        self.inline_calls = 0
        """How many calls ran on the submitting thread."""

    # -- life cycle -------------------------------------------------------------------------

    def start(self, needs_loop: bool) -> None:
        """Start the workers, the timekeeper and the watchdog (and the event loop if asked)."""
        if needs_loop:
            self._loop = EventLoop(f"decider {self.name} loop")
            self._loop.start()
        for _ in range(self.size):
            self._add_worker()
        for target, role in ((self._keep_time, "backoff"), (self._watch, "watchdog")):
            thread = threading.Thread(
                target=target, name=f"decider {self.name} {role}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def close(self) -> None:
        """End every thread (a call in hand is abandoned; its answer is ignored)."""
        with self._lock:
            self._closed = True
            self._generation += 1
            self._wake_all()
        self._wake.set()
        for thread in self._threads:
            thread.join(1.0)
        if self._loop is not None:
            self._loop.close()

    def _wake_all(self) -> None:
        """Wake every waiting thread (the lock held): the pool's state changed for all."""
        self._cond.notify_all()
        self._watch_cond.notify_all()
        self._calls_cond.notify_all()

    def _add_worker(self) -> None:
        worker = _Worker()
        self._workers.append(worker)
        thread = threading.Thread(
            target=self._work, args=(worker,), name=f"decider {self.name} worker", daemon=True
        )
        thread.start()

    # -- the processor's side ---------------------------------------------------------------

    def submit(self, job: Job, *, inline: bool = True) -> None:
        """Queue ``job`` behind the earlier jobs of its key; or, if ``inline`` allows it, its
        handler is quick and nothing of its key is in hand, carry its call out now, on this
        thread (it concludes, or waits for its retry, before this returns)."""
        with self._lock:
            job.generation = self._generation
            queue = self._queues.get(job.key)
            if queue is not None:
                queue.append(job)
                return
            self._queues[job.key] = collections.deque([job])
            caller = self._start_inline(job) if inline else None
            if caller is None:
                self._ready.append(job.key)
                self._cond.notify()
                return
        self._run_inline(job, caller)

    def in_hand(self) -> int:
        """How many submitted jobs have not concluded."""
        with self._lock:
            return sum(len(queue) for queue in self._queues.values())

    def calls_in_flight(self) -> int:
        """How many handler calls are running now."""
        with self._lock:
            return self._in_flight

    def pause(self) -> None:
        """Start no new call (a stop is coming); calls in flight go on."""
        with self._lock:
            self._paused = True

    def wait_calls(self, deadline: float, tick: Callable[[], None]) -> bool:
        """Wait until no call is in flight or the monotonic ``deadline`` passes, calling
        ``tick`` each time a call ends (woken by it, no polling); whether none is left."""
        while True:
            with self._lock:
                if self._in_flight == 0:
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._calls_waiting += 1
                try:
                    self._calls_cond.wait(remaining)
                finally:
                    self._calls_waiting -= 1
            tick()

    def reset(self) -> None:
        """Forget every job (a new subscription life submits them again); the answers of
        calls still in flight are ignored. The pool runs again (a pause ends)."""
        with self._lock:
            self._generation += 1
            self._queues.clear()
            self._ready.clear()
            self._delayed.clear()
            self._backing_off.clear()
            self._paused = False
            self._wake_all()

    def load(self) -> list[HandlerLoad]:
        """Each handler's commands now (handlers with none are left out)."""
        with self._lock:
            queued: dict[str, int] = collections.Counter()
            for queue in self._queues.values():
                for job in queue:
                    queued[job.handler.name] += 1
            names = set(queued) | {n for n, c in self._running.items() if c}
            result = []
            for name in sorted(names):
                running = self._running.get(name, 0)
                waiting = self._backing_off.get(name, 0)
                result.append(
                    HandlerLoad(name, running, waiting, max(0, queued[name] - running - waiting))
                )
            return result

    # -- the workers ------------------------------------------------------------------------

    def _work(self, worker: _Worker) -> None:
        while True:
            with self._lock:
                job = self._take(worker)
                if job is None:
                    return
                timeout = job.handler.timeout
                if timeout is not None and not job.handler.is_async:
                    worker.job, worker.deadline = job, time.monotonic() + timeout
                    self._shortest_timeout = min(self._shortest_timeout, timeout)
                    if worker.deadline < self._watch_until:
                        self._watch_cond.notify()  # the watchdog must wake sooner
            if job.handler.is_async:
                self._start_async(job)
                continue
            start = time.perf_counter()
            outcome = self._call(job)
            seconds = time.perf_counter() - start
            with self._lock:
                if worker.abandoned:
                    # Timed out: the watchdog concluded this attempt and replaced the worker.
                    self._abandoned -= 1
                    self._ignore_late(job)
                    return
                worker.job, worker.deadline = None, None
                self.pace.record(job.handler.name, seconds)
            self._attempted(job, outcome)

    def _take(self, worker: _Worker) -> Job | None:
        """The next job a worker may start (the lock held); ``None``: the worker ends."""
        while True:
            if self._closed or worker.abandoned:
                return None
            if not self._paused and self._in_flight < self.size:
                job, wait = self._pick()
                if job is not None:
                    return job
            else:
                wait = None
            self._cond.wait(wait)

    def _pick(self, only_async: bool = False) -> tuple[Job | None, float | None]:
        """The first ready job whose handler is under its limits, started (the lock held);
        else how long until a rate limit lets one through (``None``: until told)."""
        now = time.monotonic()
        soonest: float | None = None
        for _ in range(len(self._ready)):
            key = self._ready.popleft()
            job = self._queues[key][0]
            handler = job.handler
            if only_async and not handler.is_async:
                self._ready.append(key)
                continue
            if handler.concurrency is not None and self._running[handler.name] >= (
                handler.concurrency
            ):
                self._ready.append(key)
                continue
            if handler.rate is not None:
                free = self._next_call.get(handler.name, now)
                if free > now:
                    self._ready.append(key)
                    soonest = free - now if soonest is None else min(soonest, free - now)
                    continue
                self._next_call[handler.name] = max(free, now) + 1 / handler.rate
            self._started(job)
            return job, None
        return None, soonest

    def _started(self, job: Job) -> None:
        """``job``'s call starts (the lock held): it takes a slot."""
        job.attempts += 1
        self._running[job.handler.name] += 1
        self._in_flight += 1

    # -- calls on the submitting thread -------------------------------------------------------

    def _start_inline(self, job: Job) -> _Worker | None:
        """If ``job`` (alone in its key's queue) may run on the submitting thread now, start
        it there (the lock held): a quick sync handler, a free slot, under its limits, no
        other call inline. ``None``: it goes to the workers."""
        handler = job.handler
        if (
            handler.is_async
            or not handler.inline
            or self._paused
            or self._closed
            or self._inline is not None
            or self._in_flight >= self.size
            or not self.pace.inline(handler.name)
        ):
            return None
        if handler.concurrency is not None and self._running[handler.name] >= (handler.concurrency):
            return None
        now = time.monotonic()
        if handler.rate is not None:
            free = self._next_call.get(handler.name, now)
            if free > now:
                return None
            self._next_call[handler.name] = max(free, now) + 1 / handler.rate
        self._started(job)
        caller = _Worker(job, None if handler.timeout is None else now + handler.timeout)
        if handler.timeout is not None:
            self._shortest_timeout = min(self._shortest_timeout, handler.timeout)
        self._inline = caller
        if caller.deadline is not None and caller.deadline < self._watch_until:
            self._watch_cond.notify()  # the watchdog must wake sooner
        self.inline_calls += 1
        return caller

    def _run_inline(self, job: Job, caller: _Worker) -> None:
        """Call ``job``'s handler on this thread, then act on the outcome as a worker does
        (unless the watchdog timed the call out meanwhile: then its answer is ignored)."""
        start = time.perf_counter()
        try:
            outcome = self._call(job)
        except BaseException:  # an interrupt: the call is over, the thread's owner ends
            with self._lock:
                self._inline = None
                if not caller.abandoned:
                    self._finish_call(job)
            raise
        seconds = time.perf_counter() - start
        with self._lock:
            self._inline = None
            if caller.abandoned:
                self._ignore_late(job)
                return
            self.pace.record(job.handler.name, seconds)
        self._attempted(job, outcome)

    def _call(self, job: Job) -> Sequence[Any] | HandlerFailure:
        """One call of ``job``'s sync handler, in its span (see
        :func:`~decider.processors.engine.telemetry.call_handler`)."""
        return telemetry.call_handler(  # the handler's span, latency and retry count
            self.name,
            job.handler.type_name,
            job.command_id,
            job.attempts,
            functools.partial(invoke, job.handler, job.command, job.command_id),
            job.trace,
        )

    def _ignore_late(self, job: Job) -> None:
        """A timed-out call returned (the lock held): the watchdog concluded its attempt."""
        self.log.warning(
            "%s: a timed-out call of %s returned; its answer is ignored",
            self.name,
            job.handler.name,
        )

    def _start_async(self, job: Job) -> None:
        assert self._loop is not None
        timeout = job.handler.timeout
        coroutine = telemetry.call_handler_async(
            self.name,
            job.handler.type_name,
            job.command_id,
            job.attempts,
            lambda: invoke_async(job.handler, job.command, job.command_id, timeout),
            job.trace,
        )
        self._loop.submit(coroutine, lambda outcome: self._async_done(job, outcome))

    def _async_done(self, job: Job, outcome: Sequence[Any] | HandlerFailure) -> None:
        """On the loop's thread: conclude ``job``, then start the next async commands from
        here (no worker thread in between)."""
        self._attempted(job, outcome)
        while True:
            with self._lock:
                if self._closed or self._paused or self._in_flight >= self.size:
                    return
                following, _ = self._pick(only_async=True)
            if following is None:
                return
            self._start_async(following)

    def _attempted(self, job: Job, outcome: Sequence[Any] | HandlerFailure) -> None:
        """After one call: conclude the job, or schedule its retry (as
        :func:`~decider.processors.engine.failures.judge_attempt` decides)."""
        policy = job.handler.retry
        verdict = failures.judge_attempt(outcome, job.attempts, policy, retry_here=job.retry_here)
        if verdict is Verdict.DONE:
            assert not isinstance(outcome, HandlerFailure)
            self._conclude(job, outcome)
            return
        assert isinstance(outcome, HandlerFailure)
        if verdict is Verdict.PARK:
            self._conclude(job, GaveUp(outcome.reason, job.attempts, outcome.exception))
            return
        if verdict is Verdict.REDELIVER:
            self._conclude(job, AttemptFailed(outcome.reason, job.attempts, outcome.exception))
            return
        delay = failures.backoff(policy, job.attempts, self._random)
        self.log.warning(
            "%s: %s %s of %s failed (attempt %d of %d), retrying in %.3fs: %s",
            self.name,
            job.handler.type_name,
            job.command_id,
            job.key,
            job.attempts,
            policy.max_attempts,
            delay,
            outcome.reason,
            extra={
                "command_id": job.command_id,
                "event_type": job.handler.type_name,
                "stream": job.key,
                "attempt": job.attempts,
                "retry_in": delay,
            },
        )
        with self._lock:
            self._finish_call(job)
            if job.generation != self._generation:
                return
            self._backing_off[job.handler.name] += 1
            due = self.clock.now() + timedelta(seconds=delay)
            heapq.heappush(self._delayed, (due, next(self._tickets), job))
        self._wake.set()

    def _conclude(self, job: Job, conclusion: Conclusion) -> None:
        # Read without the lock: a reset may come just after the read with it or without.
        if job.generation == self._generation:
            try:
                if job.trace is None:  # nothing traces: no nullcontext entered and left
                    job.conclude(conclusion)
                else:
                    with telemetry.attached(job.trace):
                        job.conclude(conclusion)
            except Exception:  # the processor's bug: the job still ends, the worker goes on
                self.log.exception("%s: concluding %s failed", self.name, job.command_id)
        with self._lock:
            self._finish_call(job)
            if job.generation != self._generation:
                return
            queue = self._queues[job.key]
            queue.popleft()
            if queue:
                self._ready.append(job.key)
                self._cond.notify()
            else:
                del self._queues[job.key]

    def _finish_call(self, job: Job) -> None:
        """A call is over (the lock held): free its slot (and wake a worker if a job waits
        for one: an idle worker woken for nothing costs a futex and a GIL hand-off)."""
        self._running[job.handler.name] -= 1
        self._in_flight -= 1
        if self._ready:
            self._cond.notify()  # a slot is free
        if self._calls_waiting:
            self._calls_cond.notify_all()

    # -- the timekeeper (back-off, on the service clock) --------------------------------------

    def _keep_time(self) -> None:
        while True:
            self._wake.clear()
            with self._lock:
                if self._closed:
                    return
                now = self.clock.now()
                while self._delayed and self._delayed[0][0] <= now:
                    _, _, job = heapq.heappop(self._delayed)
                    self._backing_off[job.handler.name] -= 1
                    self._ready.append(job.key)
                    self._cond.notify()
                wait = (self._delayed[0][0] - now).total_seconds() if self._delayed else 3600.0
            self.clock.wait(self._wake, wait)

    # -- the watchdog (timeouts, in real time) ----------------------------------------------

    def _watch(self) -> None:
        while True:
            expired: list[Job] = []
            with self._lock:
                if self._closed:
                    return
                now = time.monotonic()
                late = [w for w in self._workers if w.deadline is not None and w.deadline <= now]
                for worker in late:
                    assert worker.job is not None
                    job = worker.job
                    worker.abandoned = True
                    self._abandoned += 1
                    self._workers.remove(worker)
                    self.timeouts += 1
                    expired.append(job)
                    self.pace.record(job.handler.name, float("inf"))
                    if self._abandoned <= self.max_abandoned:
                        self._add_worker()
                    else:
                        self.log.error(
                            "%s: %d timed-out calls still hold their threads; not replacing "
                            "their workers (the pool runs with %d)",
                            self.name,
                            self._abandoned,
                            len(self._workers),
                        )
                inline = self._inline
                if (
                    inline is not None
                    and not inline.abandoned
                    and inline.deadline is not None
                    and inline.deadline <= now
                ):
                    # The submitting thread stays in the call until it returns; the attempt
                    # is over now (retried on a worker, or parked).
                    assert inline.job is not None
                    inline.abandoned = True
                    self.timeouts += 1
                    expired.append(inline.job)
                    self.pace.record(inline.job.handler.name, float("inf"))
                # Sleep until the earliest deadline of a call in flight; a call with an
                # earlier one wakes the watchdog (see _work and _start_inline).
                callers = [*self._workers, *([inline] if inline is not None else [])]
                deadlines = [
                    w.deadline for w in callers if w.deadline is not None and not w.abandoned
                ]
                # With no call pending, it wakes again within the shortest timeout seen: a
                # call started meanwhile cannot be due sooner, so it need not wake it.
                self._watch_until = min(deadlines, default=now + self._shortest_timeout)
                if not expired:
                    wait = self._watch_until - now
                    self._watch_cond.wait(None if wait == float("inf") else wait)
            for job in expired:
                self._attempted(job, failures.handler_timed_out(job.handler.timeout))
