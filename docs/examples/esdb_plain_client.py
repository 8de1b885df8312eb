"""A plain esdbclient session: append, conflict, read, subscribe, catch up.

Run it against any EventStoreDB node, real or the project's test server:

    python -m decider.stores.esdb.testserver --port 2113 &
    python docs/examples/esdb_plain_client.py esdb://localhost:2113?Tls=false

It prints one line per step; against EventStoreDB 24.10 and against the test server the lines
are the same (tests/esdb_server/test_esdb_server_script.py checks the test server's).
"""

from __future__ import annotations

import sys
import uuid

from esdbclient import CaughtUp, EventStoreDBClient, NewEvent, StreamState
from esdbclient.exceptions import NotFound, WrongCurrentVersion


def main(uri: str) -> None:
    """Run the session against the node at ``uri``."""
    stream = f"order-{uuid.uuid4().hex}"
    placed = NewEvent(type="OrderPlaced", data=b'{"amount": 42}')
    paid = NewEvent(type="OrderPaid", data=b"{}")
    with EventStoreDBClient(uri) as client:
        try:
            client.get_stream(stream)
        except NotFound:
            print("read before writing: not found")

        first = client.append_to_stream(
            stream, current_version=StreamState.NO_STREAM, events=placed
        )
        print("appended OrderPlaced at revision", client.get_current_version(stream))

        try:
            client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=paid)
        except WrongCurrentVersion as exc:
            print("conflict:", exc)

        again = client.append_to_stream(
            stream, current_version=StreamState.NO_STREAM, events=placed
        )
        print("idempotent re-append returns the same position:", again == first)

        client.append_to_stream(stream, current_version=0, events=paid)
        print("read:", [(e.type, e.stream_position) for e in client.get_stream(stream)])

        subscription = client.subscribe_to_all(
            filter_include=[stream], filter_by_stream_name=True, include_caught_up=True
        )
        seen = []
        for item in subscription:
            if isinstance(item, CaughtUp):
                print("caught up after", seen)
                break
            seen.append(item.type)
        client.append_to_stream(
            stream, current_version=1, events=NewEvent(type="OrderShipped", data=b"{}")
        )
        live = next(iter(subscription))
        print("live:", live.type, live.stream_position)
        subscription.stop()


if __name__ == "__main__":
    main(sys.argv[1])
