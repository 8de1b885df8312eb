"""The small services around Streams: Gossip (one leader node) and PersistentSubscriptions.

Persistent subscriptions are not emulated: ``List`` reports that none exist (what a fresh node
says) and every other persistent-subscription call fails with ``UNIMPLEMENTED`` and a message
that says so, rather than pretending to work.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import grpc

from decider.stores.esdb_testserver._proto import (
    gossip_pb2,
    gossip_pb2_grpc,
    persistent_pb2,
    persistent_pb2_grpc,
    shared_pb2,
)
from decider.stores.esdb_testserver.wire import Context

_NOT_EMULATED = "persistent subscriptions are not emulated by the decider EventStoreDB test server"


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


class PersistentSubscriptionsServicer(persistent_pb2_grpc.PersistentSubscriptionsServicer):
    """Answers ``List`` like a node without persistent subscriptions; the rest is refused."""

    def List(self, request: Any, context: Context) -> Any:
        """No subscriptions: an empty list for all, NOT_FOUND for one stream (as EventStoreDB)."""
        if request.options.WhichOneof("list_option") == "list_for_stream":
            context.abort(grpc.StatusCode.NOT_FOUND, "Subscription group does not exist.")
        return persistent_pb2.ListResp()

    def _refuse(self, request: Any, context: Context) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, _NOT_EMULATED)

    Create = Update = Delete = Read = GetInfo = ReplayParked = RestartSubsystem = _refuse
