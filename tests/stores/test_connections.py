"""The per-thread connections of the SQL stores (``decider.stores._connections``): how many were
opened, and dropping one by the connection itself."""

from __future__ import annotations

import threading

from decider.stores._connections import ThreadConnections


class Fake:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_each_thread_opens_one_connection_and_keeps_it() -> None:
    connections = ThreadConnections(Fake, lambda: RuntimeError("closed"))
    mine = connections.get()[0]
    assert connections.get()[0] is mine and connections.opened == 1
    thread = threading.Thread(target=connections.get)
    thread.start()
    thread.join(10)
    assert connections.opened == 2
    connections.close()


def test_dropping_a_connection_closes_it_and_the_next_use_opens_another() -> None:
    connections = ThreadConnections(Fake, lambda: RuntimeError("closed"))
    broken = connections.get()[0]
    connections.drop_connection(broken)
    assert broken.closed and len(connections) == 0
    fresh = connections.get()[0]
    assert fresh is not broken and not fresh.closed and connections.opened == 2
    stray = Fake()  # not one of the store's (drop_all or close let go of it): closed all the same
    connections.drop_connection(stray)
    assert stray.closed and connections.get()[0] is fresh
    connections.close()
    assert fresh.closed
