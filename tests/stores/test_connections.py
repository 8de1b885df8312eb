"""The per-thread connections of the SQL stores (``decider.stores._connections``): how many were
opened, and dropping one by the connection itself."""

from __future__ import annotations

import threading

from decider.stores._connections import KEEP_IDLE, ThreadConnections


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


def test_a_thread_that_ends_leaves_its_connection_to_the_next_one_if_it_is_fit() -> None:
    fit = {"yes": True}
    connections = ThreadConnections(
        Fake, lambda: RuntimeError("closed"), reusable=lambda _: fit["yes"]
    )
    taken: list[Fake] = []

    def take() -> None:
        taken.append(connections.get()[0])

    for _ in range(3):
        thread = threading.Thread(target=take)
        thread.start()
        thread.join(10)
        del thread
    assert taken[0] is taken[1] is taken[2] and connections.opened == 1
    assert [c.closed for c in taken] == [False] * 3 and len(connections) == 1
    fit["yes"] = False  # (a connection left in a transaction, say): closed, not handed on
    thread = threading.Thread(target=take)
    thread.start()
    thread.join(10)
    del thread
    assert taken[3] is taken[0] and [c.closed for c in taken] == [True] * 4
    assert len(connections) == 0
    connections.close()


def test_at_most_keep_idle_connections_wait_and_close_closes_them() -> None:
    connections = ThreadConnections(Fake, lambda: RuntimeError("closed"), reusable=lambda _: True)
    taken: list[Fake] = []
    barrier = threading.Barrier(KEEP_IDLE + 2)

    def take() -> None:
        taken.append(connections.get()[0])
        barrier.wait(10)  # all at once: each opens its own

    threads = [threading.Thread(target=take) for _ in range(KEEP_IDLE + 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    del threads, thread
    assert len(connections) == KEEP_IDLE and sum(c.closed for c in taken) == 2
    connections.close()
    assert all(c.closed for c in taken)
