"""The event loop a service runs ``async def`` handlers on: one loop, on its own thread.

Many commands can be in flight on it at once; each coroutine's outcome is handed to a callback
(called on the loop's thread). A handler that blocks the loop (a sync sleep inside an
``async def``) holds every async command: WARNING, that is the handler's bug to avoid.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class EventLoop:
    """An asyncio loop running on a daemon thread until :meth:`close`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the loop's thread."""
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def submit(self, coroutine: Coroutine[Any, Any, T], done: Callable[[T], None]) -> None:
        """Run ``coroutine`` on the loop; ``done(its result)`` is called on the loop's thread.

        The coroutine must not raise (wrap it so it returns its failure as a value).
        """

        async def run() -> None:
            done(await coroutine)

        asyncio.run_coroutine_threadsafe(run(), self._loop)

    def close(self, timeout: float = 1.0) -> None:
        """Cancel what runs on the loop, stop it, and wait up to ``timeout`` for its thread."""
        if not self._thread.is_alive():
            self._loop.close()
            return

        def cancel_all() -> None:
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            self._loop.call_soon(self._loop.stop)

        self._loop.call_soon_threadsafe(cancel_all)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._loop.close()
