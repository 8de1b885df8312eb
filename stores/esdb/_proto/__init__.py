"""The test server's protobuf and gRPC code, generated from the ``.proto`` files beside it.

The ``.proto`` sources are EventStoreDB's v1 client API (streams, persistent subscriptions,
gossip, server features, ``google.rpc`` status) as the clients ship them, and KurrentDB's v2
streams service (``AppendSession``). ``python stores/esdb/_proto/_generate.py``
regenerates the ``*_pb2.py``, ``*_pb2.pyi`` and ``*_pb2_grpc.py`` modules (grpcio-tools, at
development time only); they are checked in and not edited by hand.

The generated modules register their files in :data:`POOL`, a descriptor pool of their own:
``esdbclient`` and ``kurrentdbclient`` define the same message names (``event_store.client.*``)
in the default pool, and a client and this server often share a process (the tests).
"""

from google.protobuf import (
    any_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    struct_pb2,
    timestamp_pb2,
)

POOL = descriptor_pool.DescriptorPool()
"""The descriptor pool of the test server's messages (with the well-known types they use)."""

for _module in (any_pb2, duration_pb2, empty_pb2, struct_pb2, timestamp_pb2):
    POOL.AddSerializedFile(_module.DESCRIPTOR.serialized_pb)
