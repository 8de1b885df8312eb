"""The Gossip service of a single node that is always the leader."""

from __future__ import annotations

import time
import uuid
from typing import Any

from decider.stores.esdb._proto import gossip_pb2, gossip_pb2_grpc, shared_pb2
from decider.stores.esdb.testserver.wire import Context


class GossipServicer(gossip_pb2_grpc.GossipServicer):
    """Cluster gossip of a single node that is always the leader."""

    def __init__(self, address: str, port: int) -> None:
        self._instance_id = str(uuid.uuid4())
        self._address = address
        self._port = port

    def Read(self, request: Any, context: Context) -> Any:
        """One alive ``Leader`` member at the server's advertised address."""
        member = gossip_pb2.MemberInfo(
            instance_id=shared_pb2.UUID(string=self._instance_id),
            time_stamp=time.time_ns() // 100,
            state=gossip_pb2.MemberInfo.Leader,
            is_alive=True,
            http_end_point=gossip_pb2.EndPoint(address=self._address, port=self._port),
        )
        return gossip_pb2.ClusterInfo(members=[member])
