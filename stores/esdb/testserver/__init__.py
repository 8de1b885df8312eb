"""An EventStoreDB-compatible gRPC test server, in process, memory-backed (optionally a file).

``esdbclient`` talks to it as to a single insecure EventStoreDB 24.10 node::

    with EsdbTestServer() as server:
        client = EventStoreDBClient(server.uri)

Modules: ``log`` (the engine and EventStoreDB's write rules), ``reads`` (reads and catch-up
subscriptions), ``streams_service`` (the Streams servicer), ``services`` (Gossip,
PersistentSubscriptions), ``wire`` (protobuf shapes and error texts), ``persistence`` (the
optional file), ``server`` (:class:`EsdbTestServer`). Run ``python -m
decider.stores.esdb.testserver``
to serve until interrupted.
"""

from decider.stores.esdb.testserver.server import EsdbTestServer

__all__ = ["EsdbTestServer"]
